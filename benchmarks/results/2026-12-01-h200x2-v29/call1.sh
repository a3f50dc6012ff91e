#!/usr/bin/env bash
# Session 29, call 1 (H200 pair). Tree = main + tree.patch (applied here): two-role.patch +
# lamport-prefetch-unit.patch + the row-signal knob
# (both from session 28, correct on one H200, untimed). One A/B:
#  - NOLP = the tree without lamport-prefetch-unit.patch (the Lamport two-shot shapes, 256-512 rows);
#  - the tree's binary with ARFUSION_TWO_SHOT_FINISHERS unset (OFF) and 8/16/24/33 (flag two-shot
#    one-wave shapes, 2048 rows), and F=16 with the pushers signalling every 3rd row and only the
#    last (9: R is 9 there) (ARFUSION_TWO_SHOT_ROW_SIGNAL, a probe knob: the cost of the per-row
#    release fences). 3 rounds each, interleaved.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; V=benchmarks/results/2026-12-01-h200x2-v29
patch -p1 < $V/tree.patch > $R/patch.log 2>&1 || { echo "tree.patch does not apply"; exit 1; }  # the tree under test
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $R/gpus.txt 2>&1; nvidia-smi topo -m >> $R/gpus.txt 2>&1
export VARIANTS="NOLP=benchmarks/results/2026-12-01-h200x2-v28/lamport-prefetch-unit.patch:R" VARIANT_TARGETS=bench_arfusion
OUT=$R bash tools/device_check.sh variants > $R/variants.txt 2>&1 &
{ cmake -S . -B build-h200 -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF \
  && cmake --build build-h200 -j 24 --target bench_arfusion; } > $R/build.log 2>&1; ts "build rc=$?"
wait; ts "variants: $(tr '\n' ' ' < $R/variants.txt)"
B=build-h200/benchmarks/bench_arfusion; NB=/tmp/arf-NOLP/build/benchmarks/bench_arfusion
FL='^run/((auto_fused|twoshot_fused|twoshot_allreduce|nccl_path_fused)/(256|512)/(4096|8192)/1/|peer_store/512/)'
FF='^run/((auto_fused|twoshot_fused|twoshot_allreduce)/2048/(4096|8192)/1/|peer_store/2048/)'
a1=""; a2=""
for i in 1 2 3; do
  timeout 60 $NB --benchmark_filter="$FL" --benchmark_out=$R/gl-NOLP-$i.json --benchmark_out_format=json > /dev/null 2>&1
  timeout 60 $B --benchmark_filter="$FL" --benchmark_out=$R/gl-LP-$i.json --benchmark_out_format=json > /dev/null 2>&1
  a1="$a1 NOLP=$R/gl-NOLP-$i.json LP=$R/gl-LP-$i.json"
  for v in OFF 8 16 24 33 16k3 16k9; do
    unset ARFUSION_TWO_SHOT_FINISHERS ARFUSION_TWO_SHOT_ROW_SIGNAL
    case $v in OFF) ;; *k*) export ARFUSION_TWO_SHOT_FINISHERS=${v%k*} ARFUSION_TWO_SHOT_ROW_SIGNAL=${v#*k};; *) export ARFUSION_TWO_SHOT_FINISHERS=$v;; esac
    timeout 60 $B --benchmark_filter="$FF" --benchmark_out=$R/gf-$v-$i.json --benchmark_out_format=json > /dev/null 2>&1
    a2="$a2 F$v=$R/gf-$v-$i.json"
  done
  unset ARFUSION_TWO_SHOT_FINISHERS ARFUSION_TWO_SHOT_ROW_SIGNAL
done; ts gbench
python3 tools/gbtable.py $a1 > $R/ab-lamport.txt 2>&1
python3 tools/gbtable.py $a2 > $R/ab-finishers.txt 2>&1
tar czf $OUT/r.tgz -C $OUT r
cat $R/ab-lamport.txt $R/ab-finishers.txt $R/times.txt
