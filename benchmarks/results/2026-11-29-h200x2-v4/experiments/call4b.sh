#!/usr/bin/env bash
# Device call 4 of session 4: why the small one-shot got 0.1-0.5 us slower; the one-shot step cap.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
rm -rf /tmp/old && mkdir -p /tmp/old && tar cf - --exclude=./build-h200 --exclude=./build-e --exclude=./exp . | tar xf - -C /tmp/old
cp exp/old/*.cu exp/old/*.cuh /tmp/old/src/kernels/
( cmake -S /tmp/old -B /tmp/old/b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF && cmake --build /tmp/old/b -j 12 ) > $R/build-old.log 2>&1 &
cmake -S . -B build-e -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF > $R/build-e.log 2>&1
build() { if [ -n "$2" ]; then printf "$2" > src/kernels/exp_knobs.h; else rm -f src/kernels/exp_knobs.h; fi; touch src/kernels/oneshot.cu
  cmake --build build-e -j 20 >> $R/build-e.log 2>&1 || echo "build $1 failed"; rm -rf /tmp/$1; cp -r build-e /tmp/$1; ts built $1; }
build v1 ""
build v2 '#define ARF_EXP_GE false\n'
build v3 '#define ARF_EXP_LBATTR __launch_bounds__(kThreads)\n'
build v4 '#define ARF_EXP_LBATTR __launch_bounds__(kThreads)\n#define ARF_EXP_GE false\n'
rm -f src/kernels/exp_knobs.h
wait; ts old built; tail -1 $R/build-old.log
F='run/(oneshot_fused)/(1|4|16|64|128|256)/(4096|8192)/(0|1)/'
gb() { $1/benchmarks/bench_arfusion --benchmark_filter="$F" --benchmark_out=$R/$2.json --benchmark_out_format=json > $R/$2.txt 2>&1; }
for rep in 1 2 3; do for ws in 64; do for v in v0 v1 v2 v3 v4; do
  B=/tmp/$v; [ $v = v0 ] && B=/tmp/old/b
  ARFUSION_WORKSPACE_MB=$ws gb $B $v-ws$ws-r$rep; done; done; ts rep $rep; done
python3 - $R <<'PY'
import json, sys, glob, os
R = sys.argv[1]; d = {}; runs = []
for f in sorted(glob.glob(R + '/v*.json')):
    r = os.path.basename(f)[:-5]; runs.append(r)
    for b in json.load(open(f))['benchmarks']:
        d.setdefault(b['name'].replace('run/', '').split('/iter')[0].replace('oneshot_', '1s_'), {})[r] = b.get('us', float('nan'))
print('%-24s' % 'bench', ' '.join('%8s' % r.replace('-ws', '/').replace('-r', '.') for r in runs))
for n, v in d.items(): print('%-24s' % n, ' '.join('%8.1f' % v.get(r, float('nan')) for r in runs))
PY
tar czf $OUT/r.tgz -C $OUT r
