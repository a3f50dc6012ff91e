#!/usr/bin/env bash
# Session 5, device call 3: the candidate (256 MiB default workspace, Lamport area capped, data area
# zeroed at creation): GPU tests, Google Benchmark x2, sweep, decode; initcheck on processes.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
T0=$(date +%s); ts() { echo "[$(( $(date +%s) - T0 )) s] $*" | tee -a $R/times.txt; }
main() {
  OUT=$R tools/device_check.sh build; ts build
  ctest --test-dir build-h200 --output-on-failure --timeout 250 -L gpu > $R/ctest.log 2>&1; ts ctest
  grep -E "tests passed|Test +#|soak|FAILED|Failure|Which is" $R/ctest.log | head -30
  for rep in 1 2; do build-h200/benchmarks/bench_arfusion --benchmark_out=$R/gbench-r$rep.json --benchmark_out_format=json > $R/gbench-r$rep.txt 2>&1; done; ts gbench
  build-h200/benchmarks/arfusion-bench --out $R/sweep > $R/sweep.txt 2>&1; ts sweep
  grep -E "auto slower|auto >" $R/sweep.txt
  build-h200/benchmarks/arfusion-decode-bench > $R/decode.txt 2>&1; ts decode
  tail -7 $R/decode.txt
  SAN_TOOLS=initcheck SAN_SELF_CHECK=0 SAN_WAIT_S=80 SAN_LIMIT_S=100 OUT=$R tools/device_check.sh sanitize; ts initcheck
}
export -f main ts; export R T0
timeout 560 bash -c main
python3 - $R/gbench-r1.json $R/gbench-r2.json <<'PY'
import json, sys
rows = {}
for f in sys.argv[1:]:
  for b in json.load(open(f))['benchmarks']:
    p = b['name'].split('/')
    rows.setdefault((p[2], p[3], p[4]), {}).setdefault(p[1], []).append(b.get('us', float('nan')))
cols = ['nccl_allreduce', 'add_rmsnorm', 'nccl_path_fused', 'oneshot_fused', 'oneshot_flag_fused', 'twoshot_fused', 'auto_fused', 'oneshot_allreduce', 'twoshot_allreduce']
print('shape', *[c[:10] for c in cols])
for k, v in rows.items(): print('x'.join(k), *['/'.join('%.1f' % x for x in v.get(c, [])) for c in cols])
PY
tar czf $OUT/r.tgz -C $OUT r
