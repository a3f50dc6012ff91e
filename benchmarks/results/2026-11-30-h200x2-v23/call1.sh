#!/usr/bin/env bash
# Session 23, call 1 (H200 pair). Main = this tree (the stop word: a failed wait fails the calls
# queued behind it at once; the soak preloads its comparison kernels). OLD = main at 9befe56
# (session23.patch reversed), OLDK = this tree with the kernels of 9befe56 (stop-word.patch
# reversed; the tests are this tree's), L35 = this tree with the Lamport area at 35 MiB per peer.
# Every GPU ctest entry on this tree; the new QueuedCallsFailFast test on this tree and on OLDK (it
# must fail there); a gbench A/B OLDK / L35 / main; then the soak with all its ranks on ONE GPU
# (CUDA_VISIBLE_DEVICES=0): this tree, OLD (lazy loading), OLD with eager loading.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R; E=benchmarks/results/2026-11-30-h200x2-v23
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
export VARIANTS="OLDK=$E/stop-word.patch:R L35=$E/lamport-35mib.patch OLD=$E/session23.patch:R"
VARIANT_TARGETS="test_gpu bench_arfusion" OUT=$R bash tools/device_check.sh variants > $R/variants.txt 2>&1 &
OUT=$R bash tools/device_check.sh build > $R/build.txt 2>&1; ts "build: $(tail -1 $R/build.txt)"
CTEST_ARGS="-L gpu" timeout 300 env OUT=$R bash tools/device_check.sh tests > $R/tests.txt 2>&1; ts "ctest"
wait; ts "variants: $(tr '\n' ' ' < $R/variants.txt)"
timeout 60 build-h200/tests/test_gpu --gtest_filter='Paths/Faults.QueuedCallsFailFast/*' > $R/queued-main.txt 2>&1; ts "queued calls, main: rc=$?"
timeout 40 /tmp/arf-OLDK/build/tests/test_gpu --gtest_filter='Paths/Faults.QueuedCallsFailFast/0:Paths/Faults.QueuedCallsFailFast/2' > $R/queued-oldk.txt 2>&1; ts "queued calls, OLDK: rc=$?"
export VARIANTS="OLDK=x L35=x"
AB_RUNS=2 AB_FILTER='(auto_fused|twoshot_fused|oneshot_fused|oneshot_flag_fused|twoshot_allreduce|nccl_path_fused)/' OUT=$R timeout 80 bash tools/device_check.sh ab > /dev/null 2>&1; ts ab
CUDA_VISIBLE_DEVICES=0 timeout 90 build-h200/tests/test_gpu --gtest_filter='Ranks/LocalGroup.Soak*' > $R/soak1gpu-main.txt 2>&1; ts "one GPU, soak, main: rc=$?"
CUDA_VISIBLE_DEVICES=0 timeout 35 /tmp/arf-OLD/build/tests/test_gpu --gtest_filter='Ranks/LocalGroup.Soak*/0' > $R/soak1gpu-old.txt 2>&1; ts "one GPU, soak 2 ranks, OLD: rc=$?"
CUDA_VISIBLE_DEVICES=0 CUDA_MODULE_LOADING=EAGER timeout 40 /tmp/arf-OLD/build/tests/test_gpu --gtest_filter='Ranks/LocalGroup.Soak*/0' > $R/soak1gpu-old-eager.txt 2>&1; ts "one GPU, soak 2 ranks, OLD, eager loading: rc=$?"
tar czf $OUT/r.tgz -C $OUT r
tail -14 $R/tests.txt; grep -h -E "^\[ +(OK|FAILED) +\]|soak at|queued" $R/queued-*.txt $R/soak1gpu-*.txt 2>/dev/null | head -30
head -60 $R/ab.txt; cat $R/times.txt
