#!/usr/bin/env bash
# Session 13, call 2: (a) the Lamport-AG two-shot with the next unit's RS before the tail
# (-DARF_EXP_EARLYRS) at lags 0/1/2 vs the flag kernel of the same binary; (b) per-block
# %globaltimer traces (-DARF_EXP_TRACE) of the flag and Lamport-AG two-shots.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
bb() { # name src-dir extra-flags targets...
  local n=$1 s=$2 f=$3; shift 3
  rm -rf /tmp/$n && mkdir -p /tmp/$n && cp -r CMakeLists.txt CMakePresets.json include benchmarks tests tools cmake /tmp/$n/ && cp -r $s /tmp/$n/src && cd /tmp/$n \
  && cmake -S . -B b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS=$f" "-DCMAKE_CUDA_FLAGS=$f" > /dev/null \
  && cmake --build b -j 8 --target "$@" > build.log 2>&1; echo "$n build rc=$?"; tail -5 build.log; }
( bb er $PWD/src "-DARF_EXP_LAMPORT_MIB=72 -DARF_EXP_EARLYRS" bench_arfusion ) > $R/build-er.txt 2>&1 &
( bb tr $PWD/src "-DARF_EXP_LAMPORT_MIB=72 -DARF_EXP_TRACE" bench_arfusion ) > $R/build-tr.txt 2>&1 &
wait; cat $R/build-er.txt $R/build-tr.txt; ts builds
F='run/(twoshot_fused|twoshot_allreduce|peer_store)/(512|2048|8192)/(4096|8192)/1/'
gb() { # label bin env...
  local l=$1 b=$2; shift 2
  env "$@" timeout 90 $b --benchmark_filter="$F" --benchmark_out=$R/gb-$l.json --benchmark_out_format=json > $R/gb-$l.txt 2>&1 || echo "$l rc=$?"
}
E=/tmp/er/b/benchmarks/bench_arfusion
for i in 1 2; do
  gb flag-$i $E
  for L in 0 1 2; do gb er$L-$i $E ARF_EXP_AG=$L; done
  ts "gbench round $i"
done
python3 exp/gbtable.py flag=$R/gb-flag-1.json flag=$R/gb-flag-2.json er0=$R/gb-er0-1.json er0=$R/gb-er0-2.json \
  er1=$R/gb-er1-1.json er1=$R/gb-er1-2.json er2=$R/gb-er2-1.json er2=$R/gb-er2-2.json > $R/ab.txt
cat $R/ab.txt
tar czf $OUT/r.tgz -C $OUT r
T=/tmp/tr/b/benchmarks/bench_arfusion
for s in twoshot_fused/2048/8192 twoshot_allreduce/2048/8192 twoshot_fused/8192/8192 twoshot_fused/8192/4096 twoshot_allreduce/8192/4096; do
  n=$(echo $s | tr / _)
  timeout 60 $T --benchmark_filter="run/$s/1/" > $R/tr-flag-$n.txt 2>&1
  ARF_EXP_AG=1 timeout 60 $T --benchmark_filter="run/$s/1/" > $R/tr-ag1-$n.txt 2>&1
  echo "$s: $(grep -c '^TR' $R/tr-flag-$n.txt) / $(grep -c '^TR' $R/tr-ag1-$n.txt) trace lines; $(grep -E "^run" $R/tr-flag-$n.txt | awk '{print $2}') / $(grep -E "^run" $R/tr-ag1-$n.txt | awk '{print $2}')"
done
ts traces
tar czf $OUT/r.tgz -C $OUT r
