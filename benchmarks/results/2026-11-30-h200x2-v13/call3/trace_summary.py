# Summarises the per-block %globaltimer traces of call 3 (TR lines printed by the -DARF_EXP_TRACE build
# of experiments/lamport-ag-trace-split.patch): python3 trace_summary.py FILE [traces]. Marks are us from
# the block start; min/median/max over the blocks of both ranks. Marks 38/39 (signal1, wait1) exist
# only in the flag kernel; lines printed by concurrently tracing blocks interleave, so a few marks
# land in the wrong block (the max column), and the printing slows the traced call (the medians
# are the timeline).
import re,sys,collections,statistics as st
f=sys.argv[1]
occ=collections.defaultdict(int)
traces=collections.defaultdict(dict)  # trace idx -> (r,b) -> marks[80]
bad=0
for line in re.findall(r"TR r\d+ b\d+ R\d+ q\d+: (?:-?\d+ ){9}-?\d+(?!\d)", open(f).read()):
    m=re.match(r"TR r(\d+) b(\d+) R(\d+) q(\d+): (.*)",line)
    if not m: bad+=1; continue
    r,b,R,q=map(int,m.groups()[:4]); vals=list(map(int,m.group(5).split()))
    key=(r,b,q); k=occ[key]; occ[key]+=1
    d=traces[k].setdefault((r,b),[None]*80)
    for i,v in enumerate(vals): d[q+i]=None if v<0 else v/100.0  # us
    traces[k][(r,b)]=d
    traces[k]['R']=R
def summ(xs):
    xs=[x for x in xs if x is not None]
    if not xs: return '-'
    xs.sort(); return "%6.1f/%6.1f/%6.1f"%(xs[0],xs[len(xs)//2],xs[-1])
print(f, "traces:",len(traces))
for k in list(traces)[:int(sys.argv[2]) if len(sys.argv) > 2 else 3]:
    t=traces[k]; R=t.pop('R')
    blocks=[v for kk,v in t.items()]
    print(" trace",k,"blocks",len(blocks),"R",R, "  (min/median/max over blocks, us from block start)")
    names=[(1,'wait0 done')]+[(2+j,'own row %d start'%j) for j in range(R)]+[(38,'after signal1+RS'),(39,'wait1 done')]+[(40+j,'peer row %d start'%j) for j in range(R)]+[(78,'AG loop end'),(79,'end')]
    for idx,nm in names:
        s=summ([bl[idx] for bl in blocks])
        if s!='-': print("   %-20s %s"%(nm,s))
