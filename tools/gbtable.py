#!/usr/bin/env python3
# A/B table of Google Benchmark JSON files (bench_arfusion --benchmark_out): gbtable.py label=file [label=file ...]
# Repeating a label collects several runs into one cell; the last column is min(last label) / min(first label).
import json, sys, collections
runs = collections.OrderedDict()
order = []
for arg in sys.argv[1:]:
    label, path = arg.split('=', 1)
    for b in json.load(open(path))['benchmarks']:
        if b.get('run_type') != 'iteration': continue
        key = b['name'].split('/iterations')[0].replace('run/', '')
        if key not in runs: runs[key] = collections.OrderedDict(); order.append(key)
        runs[key].setdefault(label, []).append(b.get('us', b['real_time']))
labels = []
for arg in sys.argv[1:]:
    l = arg.split('=', 1)[0]
    if l not in labels: labels.append(l)
print('%-40s' % 'bench/T/H/bf16' + ''.join('%22s' % l for l in labels) + '   ratio(last/first, min)')
for k in order:
    r = runs[k]
    cells = ['/'.join('%.1f' % v for v in r.get(l, [])) for l in labels]
    mins = [min(r[l]) for l in labels if l in r]
    ratio = mins[-1] / mins[0] if len(mins) >= 2 else float('nan')
    print('%-40s' % k + ''.join('%22s' % c for c in cells) + '   %.3f' % ratio)
