#!/usr/bin/env bash
# Session 21 call 8 (bench only, not landed): LAG = the flag two-shot's last unit all-gathers its
# sums as Lamport data (no phase-1 fence and flag; receivers poll and clear, one row at a time),
# Lamport area 35 MiB per peer (lamport-ag-last-unit.patch). M = main. 3 gbench runs of the
# two-shot shapes, then a focused set of LAG's GPU tests (bounded).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; E=$PWD/benchmarks/results/2026-11-30-h200x2-v21/call8
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
bb() {  # name patch tests(ON/OFF) targets...
  local n=$1 p=$2 t=$3; shift 3
  rm -rf /tmp/arf-$n && mkdir -p /tmp/arf-$n && git ls-files -z | xargs -0 cp --parents -t /tmp/arf-$n \
  && { [ -z "$p" ] || (cd /tmp/arf-$n && patch -p1 -s < $p); } \
  && cmake -S /tmp/arf-$n -B /tmp/arf-$n/build -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=$t > /dev/null \
  && cmake --build /tmp/arf-$n/build -j 16 --target "$@" > $R/build-$n.log 2>&1; echo "$n build rc=$?" > $R/rc-$n.txt
}
bb M "" OFF bench_arfusion & bb LAG $E/lamport-ag-last-unit.patch ON bench_arfusion test_gpu & wait
ts "$(cat $R/rc-*.txt | tr '\n' ' ')"
F='(auto_fused|twoshot_allreduce)/(512|2048|8192)/(4096|8192)/1|nccl_path_fused/(2048|8192)/8192/1|peer_store/(2048|8192)/'
for i in 1 2 3; do for v in M LAG; do
  timeout 60 /tmp/arf-$v/build/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/gb-$v-$i.json --benchmark_out_format=json > $R/gb-$v-$i.txt 2>&1
done; done; ts gbench
python3 tools/gbtable.py $(for v in M LAG; do for i in 1 2 3; do echo $v=$R/gb-$v-$i.json; done; done) > $R/ab.txt 2>&1
tar czf $OUT/r.tgz -C $OUT r
ARFTEST_TIMEOUT_S=10 timeout 80 /tmp/arf-LAG/build/tests/test_gpu --gtest_filter='ThreadsNccl2.EveryDtypeStrategySyncAndShape:ThreadsNccl2.SmallWorkspaceChunksLargeMessages:ThreadsNccl2.NaNInfNegZeroAndSentinelInputsMatchNccl:*SplitFault*' > $R/tests-LAG.txt 2>&1; ts "tests rc=$?"
tar czf $OUT/r.tgz -C $OUT r
grep -E "^(auto_fused|twoshot_allreduce|peer_store)" $R/ab.txt; grep -E "^\[ +(OK|FAILED|PASSED) +\]|tests? ran" $R/tests-LAG.txt | tail -12; cat $R/times.txt
