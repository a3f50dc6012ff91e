#!/usr/bin/env bash
# Builds for sm_90a and runs the chosen stages on a GPU machine, logs under $OUT (default
# ./device-out). Stages: build tests sanitize gbench sweep sass (default: build tests gbench).
# Never enables NVLink multicast.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-device-out}
mkdir -p "$OUT"
stages=${*:-build tests gbench}
has() { [[ " $stages " == *" $1 "* ]]; }
B=build-h200
if has build; then
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$OUT/gpus.txt" 2>&1
  nvidia-smi topo -m >> "$OUT/gpus.txt" 2>&1
  { cmake -S . -B $B -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release && cmake --build $B -j "$(nproc)"; } > "$OUT/build.log" 2>&1 \
    || { tail -40 "$OUT/build.log"; exit 1; }
  echo "build ok"
fi
if has tests; then
  ctest --test-dir $B --output-on-failure --timeout 300 ${CTEST_ARGS:-} 2>&1 | tee "$OUT/ctest.log" | grep -E "Test +#|tests passed|soak|timeout reported|FAIL|Failure|error" | head -60
  grep -h -E "^(soak|process soak|timeout)" "$OUT/ctest.log" || true
fi
if has sanitize; then
  # NCCL's kernels are excluded (--kernel-name-exclude): the checks are about arfusion's kernels.
  # Two targets: the process test (ranks as processes, so each rank's kernels are instrumented
  # without being serialised against its peer's; under one process a tool that serialises kernels
  # lets a waiting rank time out) and the single-process tests whose kernels do not wait on a
  # peer at once (racecheck: the add-RMSNorm only). The creation-time self-check (timing loops that
  # take minutes under racecheck) is skipped where SAN_SELF_CHECK=0 (the default for racecheck).
  # SAN_BLOCKS (default 8) caps the fused grid of the process test. Racecheck runs with the
  # two-shot's split off (ARFUSION_TWO_SHOT_SPLIT=0): it reports hazards across __syncthreads once
  # named barriers ran, in a microtest too (docs/PERF-NOTES.md, session 14; SAN_SPLIT=1 runs it
  # with the split, to see that again); memcheck, synccheck and initcheck run the split.
  for tool in ${SAN_TOOLS:-memcheck racecheck synccheck initcheck}; do
    SAN="compute-sanitizer --tool $tool --error-exitcode 9 --report-api-errors no --print-limit 20 --kernel-name-exclude kns=nccl --target-processes all"
    lim=${SAN_LIMIT_S:-150}; [ $tool = racecheck ] && lim=${SAN_RACE_LIMIT_S:-$lim}
    blocks=${SAN_BLOCKS:-8}; self_check=${SAN_SELF_CHECK:-1}
    split=1; [ $tool = racecheck ] && self_check=${SAN_SELF_CHECK:-0} && split=${SAN_SPLIT:-0}
    ARFUSION_TWO_SHOT_SPLIT=$split ARFTEST_SAN_BLOCKS=$blocks ARFTEST_SELF_CHECK=$self_check ARFTEST_TIMEOUT_S=${SAN_WAIT_S:-100} timeout $lim $SAN $B/tests/test_gpu_procs \
      --gtest_filter='Processes.SanitizeSmallShapes' > "$OUT/sanitize-$tool-procs.log" 2>&1
    echo "compute-sanitizer $tool, processes (ARFUSION_TWO_SHOT_SPLIT=$split): rc=$? $(grep -E '(ERROR|RACECHECK) SUMMARY' "$OUT/sanitize-$tool-procs.log" | tr '\n' ' ')"
    filter='ThreadsNccl2.BadInput*:AddRMSNorm.*'; [ $tool = racecheck ] && filter='AddRMSNorm.*'
    ARFTEST_TIMEOUT_S=${SAN_WAIT_S:-100} timeout $lim $SAN $B/tests/test_gpu --gtest_filter="$filter" > "$OUT/sanitize-$tool.log" 2>&1
    echo "compute-sanitizer $tool, threads ($filter): rc=$? $(grep -E '(ERROR|RACECHECK) SUMMARY' "$OUT/sanitize-$tool.log" | tail -1)"
  done
fi
if has gbench; then
  $B/benchmarks/bench_arfusion --benchmark_out="$OUT/gbench.json" --benchmark_out_format=json ${GBENCH_ARGS:-} 2>&1 \
    | tee "$OUT/gbench.txt" | grep -v "^---" | awk '{print $1, $2, $4, $6, $7, $8, $9, $10}' | head -120
fi
if has sweep; then
  $B/benchmarks/arfusion-bench --out "$OUT/sweep" ${SWEEP_ARGS:-} 2>&1 | tee "$OUT/sweep.txt" | tail -80
fi
if has sass; then
  for o in $B/CMakeFiles/arfusion_objects.dir/src/kernels/oneshot.cu.o; do
    cuobjdump -sass "$o" > "$OUT/oneshot.sass" 2>&1
  done
  python3 - "$OUT/oneshot.sass" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
funcs = re.split(r"\n\s*Function : ", text)[1:]
for f in funcs:
    name = f.split("\n", 1)[0]
    mode = "griddep" if "SyncModeE1E" in name else "flag" if "SyncModeE2E" in name else "?"
    ops = sorted({m for m in re.findall(r"\b(ACQBULK|PREEXIT|[A-Z]+DEPBAR\S*|CCTL\S*)\b", f)})
    print(mode, name[:90], ops)
PY
fi
