#!/usr/bin/env bash
# EXPERIMENT runner: applies exp/stall2.patch to a copy, builds stall_hunt, runs it.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-device-out}; mkdir -p "$OUT/hunt"
REPO=$PWD
rm -rf /tmp/exp && mkdir /tmp/exp && cp -r include src tests benchmarks tools cmake CMakeLists.txt CMakePresets.json /tmp/exp/ 2>/dev/null
cp exp/stall_hunt.cpp /tmp/exp/benchmarks/ && (cd /tmp/exp && patch -p1 < "$REPO/exp/stall2.patch") > "$OUT/hunt/patch.log" 2>&1 || { cat "$OUT/hunt/patch.log"; exit 1; }
cd /tmp/exp
{ cmake -S . -B b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release && cmake --build b -j16 --target stall_hunt; } > "$OUT/hunt/build.log" 2>&1 || { tail -30 "$OUT/hunt/build.log"; exit 1; }
echo "build ok"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$OUT/hunt/gpus.txt"
ARFUSION_TRACE=1 timeout ${HUNT_TIMEOUT:-420} b/benchmarks/stall_hunt ${HUNT_REPS:-10} ${HUNT_VARIANTS:-0,1,2,3,4,5,6} "$OUT/hunt" ${HUNT_PATHS:-oneshot,oneshot_flag,twoshot} > "$OUT/hunt/log.txt" 2>&1
echo "hunt rc=$?"
tail -30 "$OUT/hunt/log.txt"
grep -c STALL "$OUT/hunt/log.txt"
cd "$OUT" && tar czf hunt.tgz hunt && rm -rf hunt/traces.txt
