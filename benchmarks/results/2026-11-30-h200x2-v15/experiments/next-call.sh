#!/usr/bin/env bash
# NOT RUN (written at the end of session 15): a first device call for the next session, from the
# repository root on the 2-GPU machine (nvidia-h200-x2), about 4 minutes. Logs under $OUT/r, one
# archive $OUT/r.tgz. Two trees built side by side:
#   head   - main as landed;
#   step64 - + step64.patch: two-shot steps of rows of 16 KB capped at 64 KiB per peer and phase
#            (4 rows) instead of 128 KiB (8 rows). Session 13 measured 8192 x 8192 435 -> 423-427 us
#            from 16 to 8 rows with the split; 4 rows was never measured there. Aim: the last
#            step's peer-row tail (8192 x 8192 427-430 against 420). Rows of 8 KB keep 128 KiB
#            (8192 x 4096 was slower at 8 rows than at 16). The plan's CPU test of the cap fails
#            with the patch; it is a benchmark experiment.
# Then: benchmark A/B (3 rounds) and, for each tree, the sweep at hidden 8192 (bf16, fp16) from 8 MB.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
X=benchmarks/results/2026-11-30-h200x2-v15/experiments
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
mk() {  # name, patch (or none)
  local v=$1 p=$2
  rm -rf /tmp/$v && mkdir /tmp/$v && git archive HEAD | tar x -C /tmp/$v \
    && { [ $p = none ] || (cd /tmp/$v && git apply $OLDPWD/$X/$p); } \
    && (cd /tmp/$v && cmake -S . -B b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > /dev/null \
        && cmake --build b -j 16 --target bench_arfusion arfusion-bench > $R/build-$v.log 2>&1); echo "build $v rc=$?"
}
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/gpus.txt 2>&1
mk head none > $R/mk-head.txt 2>&1 &
mk step64 step64.patch > $R/mk-step64.txt 2>&1 &
wait; ts "builds: $(cat $R/mk-*.txt | tr '\n' ' ')"
for i in 1 2 3; do for v in head step64; do
  timeout 60 /tmp/$v/b/benchmarks/bench_arfusion --benchmark_out=$R/gb-$v-$i.json --benchmark_out_format=json > $R/gb-$v-$i.txt 2>&1
done; done; ts gbench
tar czf $OUT/r.tgz -C $OUT r
for v in head step64; do
  timeout 60 /tmp/$v/b/benchmarks/arfusion-bench --hidden 8192 --dtypes bf16,fp16 --min-bytes 8388608 \
    --max-bytes 268435456 --per-octave 2 --out $R/sweep-$v > $R/sweep-$v.txt 2>&1; ts "sweep $v rc=$?"
done
tar czf $OUT/r.tgz -C $OUT r
python3 tools/gbtable.py head=$R/gb-head-1.json head=$R/gb-head-2.json head=$R/gb-head-3.json \
  step64=$R/gb-step64-1.json step64=$R/gb-step64-2.json step64=$R/gb-step64-3.json > $R/ab.txt
grep -E "(auto|twoshot)_(fused|allreduce)/(2048|8192)/(4096|8192)/1" $R/ab.txt
tar czf $OUT/r.tgz -C $OUT r
