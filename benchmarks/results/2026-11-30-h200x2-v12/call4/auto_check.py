#!/usr/bin/env python3
# Auto's pick against the faster fused strategy per sweep size, and what the session-11 rule
# (one-shot up to 2 MiB, two-shot above) would have picked, from the same run's one-shot and
# two-shot timings: auto_check.py sweep/results.csv
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
new_off, old_off = [], []
for r in rows:
    o, w, n = float(r['oneshot_us']), float(r['twoshot_us']), float(r['nccl_path_us'])
    f = min(o, w)
    pick = r['auto_pick'].split('/')[0]
    pv = {'oneshot': o, 'twoshot': w}.get(pick, n)
    old = 'oneshot' if int(r['bytes']) <= 2 << 20 or int(r['tokens']) < 4 else 'twoshot'
    ov = o if old == 'oneshot' else w
    new_off.append(pv / f); old_off.append(ov / f)
    print(f"{r['dtype']} {r['hidden']:>5} {r['tokens']:>5} {int(r['bytes'])/2**20:6.2f} MB  one-shot {o:6.1f}  two-shot {w:6.1f}  "
          f"NCCL path {n:6.1f}  Auto {float(r['auto_us']):6.1f} ({pick}, {pv/f:.3f} of the faster)  2 MiB rule: {old} ({ov/f:.3f})  "
          f"pick vs NCCL path {n/pv:.2f}x")
for name, offs in (('token floor (landed)', new_off), ('2 MiB rule (session 11)', old_off)):
    print(f"{name}: {sum(x > 1.05 for x in offs)} of {len(offs)} sizes more than 5% off the faster fused strategy, worst {max(offs):.3f}")
