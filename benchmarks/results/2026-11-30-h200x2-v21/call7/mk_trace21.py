# Session 21: makes a traced copy of the tree in argv[1] (a copy of the repository): thread 0 of
# every block of the Lamport one-shot keeps %globaltimer at 8 points in shared memory and stores them
# at the end into g_bt[epoch & 1][block], so the last two calls of a graph replay can be read back
# (arfusionBlockTrace). Marks: 0 entry, 1 grid-dependency wait done, 2 pushes issued, 3 push
# barrier passed, 4 thread 0's last vector summed (held path: its last poll returned), 5 the row's
# epilogue done (norm_out stored), 6 trigger issued, 7 end.
import sys, os
dst = sys.argv[1]
def patch(rel, pairs):
    p = os.path.join(dst, rel); s = open(p).read()
    for old, new in pairs:
        assert s.count(old) == 1, (rel, old)
        s = s.replace(old, new)
    open(p, 'w').write(s)
patch('src/kernels/oneshot.cu', [
('#include "sync.cuh"\n', '''#include "sync.cuh"

static __device__ unsigned long long g_bt[2][256][8];
__device__ __forceinline__ unsigned long long btNow() { unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t) :: "memory"); return t; }
#define BT(k) do { if (threadIdx.x == 0) bt_[k] = btNow(); } while (0)  // bt_: shared (no registers held)
extern "C" cudaError_t arfusionBlockTrace(unsigned long long* out) {
  return cudaMemcpyFromSymbol(out, g_bt, sizeof g_bt);
}
'''),
('''  __shared__ int give_up;
  if (threadIdx.x == 0) give_up = 0;
  if (kCluster''', '''  __shared__ int give_up;
  __shared__ unsigned long long bt_[8];
  if (threadIdx.x == 0) for (int k_ = 0; k_ < 8; ++k_) bt_[k_] = 0;
  BT(0);
  if (threadIdx.x == 0) give_up = 0;
  if (kCluster'''),
('''  gridDependencyWait<kSync>();
  __syncthreads();

  const int b = blockIdx.x;
  const int R = rows_per_step;
  const int64_t nvec = a.hidden / VEC;
  const int nv32''', '''  gridDependencyWait<kSync>();
  __syncthreads();
  BT(1);

  const int b = blockIdx.x;
  const int R = rows_per_step;
  const int64_t nvec = a.hidden / VEC;
  const int nv32'''),
('''    headers.push(c, b, epoch, a.sig);

    // Every warp's pushes leave''', '''    headers.push(c, b, epoch, a.sig);
    BT(2);

    // Every warp's pushes leave'''),
('''    __syncthreads();

    // 2+3. Wait for each peer pack''', '''    __syncthreads();
    BT(3);

    // 2+3. Wait for each peer pack'''),
('''        if (headers.checker && k == 0) headers.peek();
        return s;
      });
    }''', '''        if (headers.checker && k == 0) headers.peek();
        if (k == kVpt - 1 || i + kThreads >= nvec) { unsigned short w_, x_; memcpy(&w_, &s, 2); asm volatile("mov.b16 %0, %1;" : "=h"(x_) : "h"(w_) : "memory"); BT(4); }
        return s;
      });
      BT(5);
    }'''),
('''    if (u + step >= units) gridDependencyTrigger<kSync>();
''', '''    if (u + step >= units) gridDependencyTrigger<kSync>();
    BT(6);
'''),
('''  if (threadIdx.x == 0) c.epochs[b] = epoch;
  if (first >= units) gridDependencyTrigger<kSync>();  // a block without a unit
}''', '''  if (threadIdx.x == 0) c.epochs[b] = epoch;
  if (first >= units) gridDependencyTrigger<kSync>();  // a block without a unit
  BT(7);
  if (threadIdx.x == 0 && blockIdx.x < 256)
    for (int k = 0; k < 8; ++k) g_bt[epoch & 1][blockIdx.x][k] = bt_[k];
}'''),
])
with open(os.path.join(dst, 'benchmarks/CMakeLists.txt'), 'a') as f:
    f.write('\nadd_executable(trace21 trace21.cpp)\ntarget_link_libraries(trace21 PRIVATE arfbench)\n')
