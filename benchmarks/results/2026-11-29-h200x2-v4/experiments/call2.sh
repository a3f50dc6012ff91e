#!/usr/bin/env bash
# Device call 2 of session 4: two-shot at 1 vs 2 blocks/SM and workspace sizes; add-RMSNorm variants.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
( cmake -S . -B build-b -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release -DARFUSION_BUILD_TESTS=OFF \
    -DCMAKE_CUDA_FLAGS="-DARF_TWOSHOT_MINB=2" -DCMAKE_CXX_FLAGS="-DARF_BLOCKS_PER_SM=2" && cmake --build build-b -j 12 ) > $R/build-b.log 2>&1 &
OUT=$R tools/device_check.sh build
nvcc -O3 -std=c++17 -arch=sm_90a -o /tmp/norm_exp exp/norm_exp.cu &
wait; ts builds done; tail -1 $R/build-b.log
/tmp/norm_exp > $R/norm_exp.txt 2>&1; ts norm_exp
F='run/(nccl_path_fused|twoshot_fused|twoshot_allreduce)/(128|512|2048|8192)/(8192|4096)/1/'
gb() { $1 --benchmark_filter="$F" --benchmark_out=$R/$2.json --benchmark_out_format=json > $R/$2.txt 2>&1; ts $2; }
A=build-h200/benchmarks/bench_arfusion; B=build-b/benchmarks/bench_arfusion
gb $A a-ws64; ARFUSION_WORKSPACE_MB=128 gb $A a-ws128; ARFUSION_WORKSPACE_MB=256 gb $A a-ws256; ARFUSION_WORKSPACE_MB=512 gb $A a-ws512
ARFUSION_WORKSPACE_MB=128 gb $B b-ws128; ARFUSION_WORKSPACE_MB=256 gb $B b-ws256; ARFUSION_WORKSPACE_MB=512 gb $B b-ws512
gb $A a-ws64-again; ARFUSION_WORKSPACE_MB=256 gb $A a-ws256-again; ARFUSION_WORKSPACE_MB=256 gb $B b-ws256-again
grep -E "regs" $R/norm_exp.txt | grep -v vpt4 | head -40
python3 - $R <<'PY'
import json, sys, glob, os
R = sys.argv[1]; d = {}; runs = []
for f in sorted(glob.glob(R + '/*-ws*.json')):
    r = os.path.basename(f)[:-5]; runs.append(r)
    for b in json.load(open(f))['benchmarks']:
        d.setdefault(b['name'].replace('run/', '').split('/iter')[0], {})[r] = b.get('us', float('nan'))
print('%-30s' % 'bench', ' '.join('%9s' % r[:9] for r in runs))
for n, v in d.items(): print('%-30s' % n, ' '.join('%9.1f' % v.get(r, float('nan')) for r in runs))
PY
grep -E "^shape|median" $R/norm_exp.txt | awk '{$1=$1};1' | cut -c1-100
tar czf $OUT/r.tgz -C $OUT r
