#!/usr/bin/env bash
# Device call 3 of session 4: the candidate (pipelined two-shot, kVpt add-RMSNorm, 256 MiB default):
# GPU tests, Google Benchmark, sanitizers, sweep, decode.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
main() {
  OUT=$R tools/device_check.sh build; ts build
  ctest --test-dir build-h200 --output-on-failure --timeout 200 -L gpu > $R/ctest.log 2>&1; ts ctest
  grep -E "tests passed|Test +#|soak|FAILED|Failure" $R/ctest.log | head -30
  build-h200/benchmarks/bench_arfusion --benchmark_out=$R/gbench.json --benchmark_out_format=json > $R/gbench.txt 2>&1; ts gbench
  SAN_TOOLS="memcheck racecheck synccheck" SAN_WAIT_S=60 SAN_LIMIT_S=75 OUT=$R tools/device_check.sh sanitize; ts sanitize
  build-h200/benchmarks/arfusion-bench --out $R/sweep > $R/sweep.txt 2>&1; ts sweep
  tail -25 $R/sweep.txt
  build-h200/benchmarks/arfusion-decode-bench > $R/decode.txt 2>&1; ts decode
  tail -12 $R/decode.txt
}
export -f main ts; export R T0
timeout 560 bash -c main
python3 - $R/gbench.json <<'PY'
import json, sys
rows = {}
for b in json.load(open(sys.argv[1]))['benchmarks']:
    p = b['name'].split('/')
    rows.setdefault((p[2], p[3], p[4]), {})[p[1]] = b.get('us', float('nan'))
cols = ['nccl_allreduce', 'add_rmsnorm', 'nccl_path_fused', 'oneshot_fused', 'oneshot_flag_fused', 'twoshot_fused', 'auto_fused', 'oneshot_allreduce', 'twoshot_allreduce']
print('shape', *[c[:10] for c in cols])
for k, v in rows.items(): print('x'.join(k), *['%.1f' % v.get(c, float('nan')) for c in cols])
PY
tar czf $OUT/r.tgz -C $OUT r
