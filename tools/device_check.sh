#!/usr/bin/env bash
# Builds for sm_90a and runs the chosen stages on a GPU machine, logs under $OUT (default
# ./device-out). Stages: build tests sanitize gbench sweep sass variants ab (default: build tests
# gbench). Never enables NVLink multicast.
# A/B of bench-only variants: VARIANTS="base=a.patch:R v1=b.patch" names each variant and the patch
# that makes it from this tree (":R" applies it reversed, e.g. the base of a change under test;
# "name=" is the tree as it is). `variants` builds them in parallel (copies of the tracked files,
# /tmp/arf-NAME; VARIANT_TARGETS, default the two bench targets; naming test_gpu or
# test_gpu_procs there configures the tests too, to check a variant before an A/B). `ab` runs
# AB_RUNS (3) rounds of bench_arfusion over main (build-h200, from `build`, if present) and every
# variant, AB_FILTER selecting the benchmarks,
# and writes $OUT/ab.txt (tools/gbtable.py: the last column compares the last label with the first,
# so list the base first and main comes last).
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
if has variants; then
  targets=${VARIANT_TARGETS:-bench_arfusion arfusion-bench}
  tests=OFF; [[ " $targets " == *" test_gpu"* ]] && tests=ON
  for v in ${VARIANTS:-}; do
    name=${v%%=*}; spec=${v#*=}; patch_file=${spec%:R}; reverse=""; [ "$spec" != "$patch_file" ] && reverse=-R
    [ -n "$patch_file" ] && patch_file=$(realpath "$patch_file")
    ( dir=/tmp/arf-$name && rm -rf $dir && mkdir -p $dir && git ls-files -z | xargs -0 cp --parents -t $dir \
      && { [ -z "$patch_file" ] || (cd $dir && patch $reverse -p1 < "$patch_file" > "$OUT/patch-$name.log"); } \
      && cmake -S $dir -B $dir/build -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=$tests > /dev/null \
      && cmake --build $dir/build -j 8 --target $targets > "$OUT/build-$name.log" 2>&1
      echo "variant $name: build rc=$?" ) &
  done
  wait
fi
if has ab; then
  labels=""
  for v in ${VARIANTS:-}; do labels="$labels ${v%%=*}"; done
  [ -x $B/benchmarks/bench_arfusion ] && labels="$labels main"
  args=""
  for i in $(seq 1 ${AB_RUNS:-3}); do
    for l in $labels; do
      bin=/tmp/arf-$l/build/benchmarks/bench_arfusion; [ $l = main ] && bin=$B/benchmarks/bench_arfusion
      timeout 120 $bin --benchmark_filter="${AB_FILTER:-.}" --benchmark_out="$OUT/gb-$l-$i.json" --benchmark_out_format=json > "$OUT/gb-$l-$i.txt" 2>&1
      args="$args $l=$OUT/gb-$l-$i.json"
    done
  done
  python3 tools/gbtable.py $args > "$OUT/ab.txt" 2>&1
  echo "ab: $(echo $labels | wc -w) labels x ${AB_RUNS:-3} runs -> $OUT/ab.txt"
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
