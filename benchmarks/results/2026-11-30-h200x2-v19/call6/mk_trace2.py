# Session 19 call 6 (marks 14, 15 added to call 1's): makes a traced copy of the tree in argv[1] (already a copy of the repository):
# per-warp %globaltimer and clock64 marks (lane 0) of the first 16 warps of the grid (block 0 of a
# one-block row, or the 4 blocks x 4 warps of cluster 0 of a row over 4 blocks) in the Lamport one-shot.
import sys, os
dst = sys.argv[1]
def patch(rel, pairs):
    p = os.path.join(dst, rel); s = open(p).read()
    for old, new in pairs:
        assert s.count(old) == 1, (rel, old)
        s = s.replace(old, new)
    open(p, 'w').write(s)
patch('src/kernels/norm_epilogue.cuh', [
('namespace arfusion::detail {\n', '''static __device__ long long g_w_clk[16][16];
static __device__ unsigned long long g_w_gt[16][16];
__device__ __forceinline__ unsigned long long wtGlobalNs() { unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
#define WT(k) do { const unsigned s_ = (blockIdx.x * blockDim.x + threadIdx.x) / 32; if ((threadIdx.x & 31) == 0 && s_ < 16) { g_w_clk[s_][k] = clock64(); g_w_gt[s_][k] = wtGlobalNs(); } } while (0)
namespace arfusion::detail {
'''),
('''        ro[k] = addResidual(sumFn(i), r, ss);
        storePack<T, VEC>(static_cast<T*>(a.residual_out) + base + i * VEC, ro[k]);
      }
    }
''', '''        ro[k] = addResidual(sumFn(i), r, ss);
        storePack<T, VEC>(static_cast<T*>(a.residual_out) + base + i * VEC, ro[k]);
      }
    }
    WT(6);
'''),
('''          storePack<T, VEC>(static_cast<T*>(a.out) + base + i * VEC, normalized(ro[k], scale, gk));
        }
      }
    }
''', '''          storePack<T, VEC>(static_cast<T*>(a.out) + base + i * VEC, normalized(ro[k], scale, gk));
        }
      }
      WT(10);
    }
'''),
('''    const float w = __shfl_sync(0xffffffffu, WarpReduce(sh.warp[warp]).Sum(ss), 0);
''', '''    const float w = __shfl_sync(0xffffffffu, WarpReduce(sh.warp[warp]).Sum(ss), 0);
    WT(7);
'''),
('''                   : "r"(smemAddr(&sh.arrived))
                   : "memory");
    return scaleOf(a, [&](int k) { return sh.partial[k]; });''', '''                   : "r"(smemAddr(&sh.arrived))
                   : "memory");
    WT(8);
    const float sc_ = scaleOf(a, [&](int k) { return sh.partial[k]; });
    { uint32_t x; asm volatile("mov.b32 %0, %1;" : "=r"(x) : "r"(__float_as_uint(sc_))); WT(9); }
    return sc_;'''),
('''    const float w = WarpReduce(sh.warp[warp]).Sum(ss);
    if (threadIdx.x % 32 == 0) sh.partial[warp] = w;
    __syncthreads();
    const float scale = scaleOf(a, [&](int k) { return sh.partial[k]; });
''', '''    const float w = WarpReduce(sh.warp[warp]).Sum(ss);
    WT(7);
    if (threadIdx.x % 32 == 0) sh.partial[warp] = w;
    __syncthreads();
    WT(8);
    const float scale = scaleOf(a, [&](int k) { return sh.partial[k]; });
    { uint32_t x; asm volatile("mov.b32 %0, %1;" : "=r"(x) : "r"(__float_as_uint(scale))); WT(9); }
'''),
])
patch('src/kernels/oneshot.cu', [
('#include "sync.cuh"\n', '''#include "sync.cuh"

extern "C" cudaError_t arfusionWarpTrace(long long* clk, unsigned long long* gt) {
  cudaError_t e = cudaMemcpyFromSymbol(clk, g_w_clk, sizeof g_w_clk);
  if (e == cudaSuccess) e = cudaMemcpyFromSymbol(gt, g_w_gt, sizeof g_w_gt);
  static long long zeros[256] = {};
  if (e == cudaSuccess) e = cudaMemcpyToSymbol(g_w_clk, zeros, sizeof g_w_clk);
  return e;
}
'''),
('''  __shared__ int give_up;
  if (threadIdx.x == 0) give_up = 0;
  if (kCluster''', '''  __shared__ int give_up;
  WT(0);
  if (threadIdx.x == 0) give_up = 0;
  if (kCluster'''),
('''  gridDependencyWait<kSync>();
  __syncthreads();

  const int b = blockIdx.x;''', '''  gridDependencyWait<kSync>();
  __syncthreads();
  WT(1);

  const int b = blockIdx.x;'''),
('''  uint32_t epoch = c.epochs[b];
  // A row over a cluster''', '''  uint32_t epoch = c.epochs[b];
  { uint32_t x; asm volatile("add.u32 %0, %1, 0;" : "=r"(x) : "r"(epoch)); WT(2); }
  // A row over a cluster'''),
('''    // Every warp's pushes leave before any warp waits. The hardware''', '''    WT(3);
    // Every warp's pushes leave before any warp waits. The hardware'''),
('''    __syncthreads();

    // 2+3. Wait for each peer pack''', '''    __syncthreads();
    WT(4);

    // 2+3. Wait for each peer pack'''),
('''          const P p = lamportWait<T, VEC, true>(c, slot, b, src, epoch, &give_up, a.sig);
''', '''          const P p = lamportWait<T, VEC, true>(c, slot, b, src, epoch, &give_up, a.sig);
          if (j == 0 && i == tid) WT(5);
'''),
('''    if (u + step >= units) gridDependencyTrigger<kSync>();
''', '''    if (u + step >= units) gridDependencyTrigger<kSync>();
    WT(11);
'''),
('''    headers.check(c, b, epoch, a.sig, &give_up);
  }
  if (threadIdx.x == 0) c.epochs[b] = epoch;
''', '''    headers.check(c, b, epoch, a.sig, &give_up);
    WT(12);
  }
  if (threadIdx.x == 0) c.epochs[b] = epoch;
  WT(13);
'''),
])

patch('src/kernels/norm_epilogue.cuh', [
('''        ro[k] = addResidual(sumFn(i), r, ss);
        storePack<T, VEC>(static_cast<T*>(a.residual_out) + base + i * VEC, ro[k]);
      }
    }
    WT(6);''', '''        const P s14 = sumFn(i);
        if (k == 0) { uint32_t x, y; memcpy(&y, &s14, 4); asm volatile("mov.b32 %0, %1;" : "=r"(x) : "r"(y)); WT(14); }
        if (k == 0) { uint32_t x, y; memcpy(&y, &r, 4); asm volatile("mov.b32 %0, %1;" : "=r"(x) : "r"(y)); WT(15); }
        ro[k] = addResidual(s14, r, ss);
        storePack<T, VEC>(static_cast<T*>(a.residual_out) + base + i * VEC, ro[k]);
      }
    }
    WT(6);'''),
])
with open(os.path.join(dst, 'benchmarks/CMakeLists.txt'), 'a') as f:
    f.write('\nadd_executable(trace19 trace19.cpp)\ntarget_link_libraries(trace19 PRIVATE arfbench)\n')
