#!/usr/bin/env bash
# Session 6, device call B: where does the fused epilogue's regression come from? Variants built
# from one tree with -D flags (+ the old tree with and without the push barrier), gbench filtered,
# 3 interleaved rounds. Then racecheck with 8 blocks per rank on the candidate.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
left() { echo $(( 570 - ($(date +%s) - T0) )); }
for v in old oldbar; do
  mkdir -p /tmp/$v && cp -r CMakeLists.txt CMakePresets.json cmake include benchmarks tests tools /tmp/$v/ && rm -rf /tmp/$v/src
done
cp -r exp/old-src /tmp/old/src; cp -r exp/old-bar-src /tmp/oldbar/src
declare -A SRC=( [new]=. [oldscale]=. [lateres]=. [nopushbar]=. [both]=. [old]=/tmp/old [oldbar]=/tmp/oldbar )
declare -A FL=( [new]="" [oldscale]="-DARF_EXP_OLDSCALE" [lateres]="-DARF_EXP_LATERES" [nopushbar]="-DARF_EXP_NOPUSHBAR" [both]="-DARF_EXP_OLDSCALE -DARF_EXP_LATERES" [old]="" [oldbar]="" )
V="new oldscale lateres nopushbar both old oldbar"
for v in $V; do
  ( cmake -S ${SRC[$v]} -B /tmp/b-$v -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CUDA_FLAGS=${FL[$v]}" && cmake --build /tmp/b-$v -j 5 --target bench_arfusion $([ $v = new ] && echo test_gpu_procs test_gpu) ) > $R/build-$v.log 2>&1 &
done
wait; ts builds
for v in $V; do [ -x /tmp/b-$v/benchmarks/bench_arfusion ] || { echo "build $v failed"; tail -20 $R/build-$v.log; }; done
F='run/(add_rmsnorm|oneshot_fused|oneshot_flag_fused|twoshot_fused|oneshot_allreduce)/(1/4096|16/8192|128/8192|2048/4096)/1/'
args=""
for rep in 1 2 3; do for v in $V; do
  /tmp/b-$v/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/gb-$v-r$rep.json --benchmark_out_format=json > $R/gb-$v-r$rep.txt 2>&1
  args="$args $v=$R/gb-$v-r$rep.json"
done; done; ts gbench
python3 exp/gbtable.py $args > $R/ab.txt; cat $R/ab.txt | cut -c1-600
# racecheck, 8 blocks per rank, on the candidate (device_check builds build-h200 = new)
rm -rf build-h200; ln -s /tmp/b-new build-h200
l=$(left); if [ $l -gt 60 ]; then
  SAN_TOOLS=racecheck SAN_RACE_BLOCKS=8 SAN_WAIT_S=$(( l - 40 )) SAN_RACE_LIMIT_S=$(( l - 20 )) OUT=$R tools/device_check.sh sanitize 2>&1 | head -3; ts racecheck-8blocks
fi
tar czf $OUT/r.tgz -C $OUT r
