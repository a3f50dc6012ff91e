# Makes a traced copy of ../../src in $1/src: per-warp clock64 marks (lane 0 of each warp, block 0).
import sys, shutil, os
dst = sys.argv[1]
shutil.copytree('src', os.path.join(dst, 'src'), dirs_exist_ok=True)  # run from the repository root
p = os.path.join(dst, 'src/kernels/oneshot.cu'); s = open(p).read()
hdr = '''#include "sync.cuh"

extern "C" cudaError_t arfusionWarpTrace(long long* clk, unsigned long long* gt) {
  cudaError_t e = cudaMemcpyFromSymbol(clk, g_w_clk, sizeof g_w_clk);
  if (e == cudaSuccess) e = cudaMemcpyFromSymbol(gt, g_w_gt, sizeof g_w_gt);
  static long long zeros[192] = {};
  if (e == cudaSuccess) e = cudaMemcpyToSymbol(g_w_clk, zeros, sizeof g_w_clk);
  return e;
}
'''
s = s.replace('#include "sync.cuh"\n', hdr, 1)
def rep(old, new, count=1):
    global s
    assert s.count(old) >= 1, old
    s = s.replace(old, new, count)
# only in the Lamport kernel: it is the second kernel in the file; mark by unique strings
rep('''  __shared__ int give_up;
  if (threadIdx.x == 0) give_up = 0;
  gridDependencyWait<kSync>();
  __syncthreads();
''', '''  __shared__ int give_up;
  WT(0);
  if (threadIdx.x == 0) give_up = 0;
  gridDependencyWait<kSync>();
  __syncthreads();
  WT(1);
''')
rep('''  uint32_t epoch = c.epochs[b];

  // The header check''', '''  uint32_t epoch = c.epochs[b];
  { uint32_t x; asm volatile("add.u32 %0, %1, 0;" : "=r"(x) : "r"(epoch)); WT(10); }

  // The header check''')
rep('''      const P p = lamportSanitize(loadPack<T, VEC>(in + (row0 + j) * a.hidden + i * VEC));
''', '''      const P p = lamportSanitize(loadPack<T, VEC>(in + (row0 + j) * a.hidden + i * VEC));
      if (u == b && idx == int(threadIdx.x)) { uint32_t x, y; memcpy(&y, &p, 4); asm volatile("add.u32 %0, %1, 0;" : "=r"(x) : "r"(y)); WT(11); }
''')
rep('''    // Every warp's pushes leave before any warp waits.''', '''    if (u == b) WT(2);
    // Every warp's pushes leave before any warp waits.''')
rep('''    __syncthreads();

    // 2+3. Wait for each peer pack''', '''    __syncthreads();
    if (u == b) WT(3);

    // 2+3. Wait for each peer pack''')
rep('''              p = lamportWait<T, VEC, true>(c, slot, b, src, epoch, &give_up, a.sig);
''', '''              p = lamportWait<T, VEC, true>(c, slot, b, src, epoch, &give_up, a.sig);
              if (u == b && j == 0 && i == int64_t(threadIdx.x)) WT(4);
''')
rep('''        return s;
      });
    }
    // 4. The peer's header''', '''        return s;
      });
      if (u == b && j == 0) WT(8);
    }
    // 4. The peer's header''')
rep('''  if (threadIdx.x == 0) c.epochs[b] = epoch;
  gridDependencyTrigger<kSync>();
}

}  // namespace''', '''  if (threadIdx.x == 0) c.epochs[b] = epoch;
  WT(9);
  gridDependencyTrigger<kSync>();
}

}  // namespace''')
open(p, 'w').write(s)
p = os.path.join(dst, 'src/kernels/norm_epilogue.cuh'); s = open(p).read()
s = s.replace('namespace arfusion::detail {', '''static __device__ long long g_w_clk[16][12];
static __device__ unsigned long long g_w_gt[16][12];
#define WT(k) do { if ((threadIdx.x & 31) == 0 && blockIdx.x == 0) { g_w_clk[threadIdx.x >> 5][k] = clock64(); g_w_gt[threadIdx.x >> 5][k] = arfusion::detail::globalTimerNsT(); } } while (0)
namespace arfusion::detail {
__device__ __forceinline__ unsigned long long globalTimerNsT() { unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
''', 1)
rep('''      const float scale = blockScale(a, sh, ss);
#pragma unroll''', '''      WT(5);
      const float scale = blockScale(a, sh, ss);
      WT(7);
#pragma unroll''')
rep('''    const float total = BlockReduce(sh.reduce).Sum(ss);
''', '''    const float total = BlockReduce(sh.reduce).Sum(ss);
    WT(6);
''')
open(p, 'w').write(s)
