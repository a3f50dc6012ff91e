import json, sys
# usage: gbt.py label=file.json ... -> per (bench, shape): value per label (mean over files of a label)
rows = {}
labels = []
for arg in sys.argv[1:]:
  lab, f = arg.split('=')
  if lab not in labels: labels.append(lab)
  try: data = json.load(open(f))['benchmarks']
  except Exception as e: print('skip', f, e); continue
  for b in data:
    p = b['name'].split('/')
    rows.setdefault((p[1], 'x'.join(p[2:4]), p[4]), {}).setdefault(lab, []).append(b.get('us', float('nan')))
print('%-22s %-10s' % ('bench', 'shape'), ' '.join('%14s' % l for l in labels))
for k in sorted(rows, key=lambda k: (k[0], int(k[1].split('x')[1]), int(k[1].split('x')[0]))):
  v = rows[k]
  print('%-22s %-10s' % (k[0][:22], k[1]), ' '.join('%14s' % ('/'.join('%.1f' % x for x in v[l]) if l in v else '-') for l in labels))
