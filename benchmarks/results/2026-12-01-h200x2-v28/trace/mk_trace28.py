# Session 28: makes a traced copy of the tree in argv[1] (a copy of the repository): per-block
# %globaltimer marks (thread 0, and thread 256 for the second half's rows) of the flag two-shot,
# for calls whose blocks take one unit (2048 x 8192 at two ranks). Bench only.
import sys, os
dst = sys.argv[1]
def patch(rel, pairs):
    p = os.path.join(dst, rel); s = open(p).read()
    for old, new in pairs:
        assert s.count(old) == 1, (rel, old)
        s = s.replace(old, new)
    open(p, 'w').write(s)
patch('src/kernels/norm_epilogue.cuh', [
('namespace arfusion::detail {\n', '''static __device__ unsigned long long g_b_gt[160][24];
__device__ __forceinline__ unsigned long long btGlobalNs() { unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
#define BT(k) do { if (threadIdx.x == 0 && blockIdx.x < 160) g_b_gt[blockIdx.x][k] = btGlobalNs(); } while (0)
#define BTH(k) do { if (threadIdx.x == kThreads / 2 && blockIdx.x < 160) g_b_gt[blockIdx.x][k] = btGlobalNs(); } while (0)
namespace arfusion::detail {
'''),
])
patch('src/kernels/twoshot.cu', [
('#include "sync.cuh"\n', '''#include "sync.cuh"

extern "C" cudaError_t arfusionBlockTrace(unsigned long long* gt) {
  cudaError_t e = cudaMemcpyFromSymbol(gt, ::g_b_gt, sizeof ::g_b_gt);
  static unsigned long long zeros[160 * 24] = {};
  if (e == cudaSuccess) e = cudaMemcpyToSymbol(::g_b_gt, zeros, sizeof zeros);
  return e;
}
'''),
('''  if (threadIdx.x == 0) failed = 0;
  gridDependencyWait<kSync>();
''', '''  if (threadIdx.x == 0) failed = 0;
  BT(0);
  gridDependencyWait<kSync>();
  BT(1);
'''),
('''  if (b < units) pushScatter(b, epoch + 1, kThreads);
''', '''  if (b < units) pushScatter(b, epoch + 1, kThreads);
  BT(2);
'''),
('''    if (!waitPeers(c, 0, b, epoch, a.sig)) return''', '''    BT(3);
    if (!waitPeers(c, 0, b, epoch, a.sig)) return'''),
('''    const bool next = u + gridDim.x < units;
''', '''    BT(5);
    const bool next = u + gridDim.x < units;
'''),
('''    if (!waitPeers(c, 1, b, epoch, a.sig)) return''', '''    BT(6);
    if (!waitPeers(c, 1, b, epoch, a.sig)) return'''),
('''    } else {
      finishPeerRows(unit0, region, kWholeBlock, threadIdx.x);
    }
  }
''', '''    } else {
      finishPeerRows(unit0, region, kWholeBlock, threadIdx.x);
    }
    BT(8); BTH(9);
  }
'''),
('''      for (int j = mode == kLastUnitHalf1 ? 1 : 0; j < rows; j += step) {''', '''      for (int j = mode == kLastUnitHalf1 ? 1 : 0; j < rows; j += step) {
        if (j < 8) { BT(12 + j); BTH(12 + j); }'''),
])
# step 2 start (after the RS wait) and the RS wait's end
s = open(os.path.join(dst, 'src/kernels/twoshot.cu')).read()
i = s.index('    // 2. Reduce the owned rows, all-gather each sum as it is produced, epilogue locally.')
s = s[:i] + '    BT(4);\n' + s[i:]
i = s.index('    // 5. Epilogue of the peers\' rows from the gathered sums')
s = s[:i] + '    BT(7);\n' + s[i:]
open(os.path.join(dst, 'src/kernels/twoshot.cu'), 'w').write(s)
with open(os.path.join(dst, 'benchmarks/CMakeLists.txt'), 'a') as f:
    f.write('\nadd_executable(trace28 trace28.cpp)\ntarget_link_libraries(trace28 PRIVATE arfbench)\n')
