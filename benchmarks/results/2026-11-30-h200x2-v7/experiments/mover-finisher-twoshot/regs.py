import re, subprocess, sys
f = sys.argv[1]
out = subprocess.run(['nvcc','-c','-arch=sm_90a','-std=c++17','--expt-relaxed-constexpr','-O3','-I','include','-I','src',f,'-o','/tmp/x.o','-Xptxas','-v'],capture_output=True,text=True).stderr
cur=None; res={}
for line in out.splitlines():
    m=re.search(r"Function properties for (\S+)",line)
    if m: cur=m.group(1); continue
    m=re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores",line)
    if m and cur: res.setdefault(cur,{})['stack']=m.group(1); res[cur]['spill']=m.group(2)
    m=re.search(r"Compiling entry function '(\S+)'",line)
    if m: cur=m.group(1)
    m=re.search(r"Used (\d+) registers",line)
    if m and cur: res.setdefault(cur,{})['regs']=m.group(1)
for k,v in res.items():
    name=re.sub(r'^_ZN8arfusion6detail\w+?(\d+[a-zA-Z]+Kernel)', r'\1', k)
    print('%-70s regs %3s stack %4s spill %4s' % (name[:70], v.get('regs'), v.get('stack'), v.get('spill')))
