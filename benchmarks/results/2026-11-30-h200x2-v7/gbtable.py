import json, sys
# usage: gbtable.py label=file.json ...  -> per shape, per column, values of every file
rows = {}
labels = []
for arg in sys.argv[1:]:
  lab, f = arg.split('=')
  labels.append(lab)
  try: data = json.load(open(f))['benchmarks']
  except Exception as e: print('skip', f, e); continue
  for b in data:
    p = b['name'].split('/')
    rows.setdefault((p[2], p[3], p[4]), {}).setdefault(p[1], {}).setdefault(lab, []).append(b.get('us', float('nan')))
cols = ['nccl_allreduce', 'add_rmsnorm', 'nccl_path_fused', 'oneshot_fused', 'oneshot_flag_fused', 'twoshot_fused', 'auto_fused', 'oneshot_allreduce', 'twoshot_allreduce']
print('labels:', ' '.join(labels))
print('shape', *[c[:12] for c in cols])
for k, v in rows.items():
  print('x'.join(k), *[' '.join('%s:%s' % (l, '/'.join('%.1f' % x for x in v.get(c, {}).get(l, []))) for l in dict.fromkeys(labels)) if c in v else '-' for c in cols])
