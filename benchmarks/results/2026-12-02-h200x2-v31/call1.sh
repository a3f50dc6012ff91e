#!/usr/bin/env bash
# Session 31, call 1 (H200 pair). Tree = main (session 31's host fixes and lamportNextUnit's
# fence, barrier, fence). Every GPU ctest entry (the new ThreadsNccl2.WrongCurrentDeviceOnOneRank-
# FailsOnBoth and the NCCL path's chunked allReduceAdd among them) and the four compute-sanitizer
# tools, then an A/B of the fence: FENCE1 = the fence after the barrier only (as before 9c2e2c2),
# main last, on the shapes whose one-shot blocks take several units (forced one-shot, 256 rows
# and up) and on the anchors (Auto), 3 rounds.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; V=benchmarks/results/2026-12-02-h200x2-v31
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
export VARIANTS="FENCE1=$V/fence-after-barrier-only.patch" VARIANT_TARGETS=bench_arfusion
OUT=$R bash tools/device_check.sh variants > $R/variants.txt 2>&1 &
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; ts "build: $(tail -1 $R/build.txt)"
wait; ts "variants: $(tr '\n' ' ' < $R/variants.txt)"
CTEST_ARGS="-L gpu" timeout 250 env OUT=$R bash tools/device_check.sh tests > $R/tests.txt 2>&1; ts "ctest"
OUT=$R timeout 170 bash tools/device_check.sh sanitize > $R/sanitize.txt 2>&1; ts "sanitize"
AB_FILTER='^run/((oneshot_fused|oneshot_allreduce)/(256|512|2048)/|auto_fused/(1/4096|128/8192|512/8192|2048/8192|8192/8192)/1/)' \
  OUT=$R timeout 120 bash tools/device_check.sh ab > $R/ab-run.txt 2>&1; ts "ab"
tar czf $OUT/r.tgz -C $OUT r
tail -6 $R/tests.txt; cat $R/sanitize.txt; cat $R/ab.txt; cat $R/times.txt
