// Session 14 microtest: which part of the split two-shot makes racecheck report hazards at the
// block-wide exchange after the join? Base = mode 1 of named-bar-red.cu (clean in session 14 call 1):
// finishers broadcast a poll through a shared word + barrier.sync 2, exchange on barrier 2;
// pushers barrier.sync 1; join __syncthreads; full-block exchange.
//   mode 1: base.
//   mode 3: base + __syncthreads_and(1) at the start of each unit (waitPeers, step 1).
//   mode 4: base + finisher lane 0 spins 3 us (divergent loop) before its atomicOr and barrier 2.
//   mode 5: mode 4 + __syncwarp() before barrier 2.
//   mode 6: base + pusher lane 0 spins 3 us after barrier 1 (signalPeer-like divergence) before the join.
//   mode 7: base, the last unit not split (full-block rows with __syncthreads exchanges).
//   mode 8: modes 3+4+6+7.   mode 9: modes 3+5+6+7.
#include <cstdio>
#include <cstdlib>
__device__ int g_aligned;  // argv[2] == 1: the .aligned form (bar.sync id, count), __syncwarp first
__device__ __forceinline__ void groupBarrier(int id, int threads) {
  if (g_aligned) {
    __syncwarp();
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
  } else {
    asm volatile("barrier.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
  }
}
__device__ __forceinline__ unsigned long long gt() {
  unsigned long long t; asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t)); return t;
}
__device__ __noinline__ bool spin(const volatile int* flag) {
  const unsigned long long s = gt();
  while (gt() - s < 3000) {}
  return *flag != 0;
}
__global__ void k(const volatile int* flag, float* out, int mode) {
  const bool m3 = mode == 3 || mode >= 8, m4 = mode == 4 || mode == 8, m5 = mode == 5 || mode == 9;
  const bool m6 = mode == 6 || mode >= 8, m7 = mode == 7 || mode >= 8;
  __shared__ float partial[16];
  __shared__ int failed;
  if (threadIdx.x == 0) failed = 0;
  __syncthreads();
  float acc = 0.f;
  for (int unit = 0; unit < 3; ++unit) {
    if (m3 && !__syncthreads_and(threadIdx.x < 1 ? *flag != 0 : 1)) return;
    if (!(m7 && unit == 2)) {
      if (threadIdx.x < 256) {
        groupBarrier(1, 256);
        if (m6 && threadIdx.x == 0 && !spin(flag)) out[0] = 1.f;
      } else {
        const int t = threadIdx.x - 256, w = t / 32;
        if (t == 0 && ((m4 || m5) ? !spin(flag) : *flag == 0)) atomicOr(&failed, 1);
        if (m5) __syncwarp();
        groupBarrier(2, 256);
        if (failed == 0) {
          for (int row = 0; row < 4; ++row) {
            if (t % 32 == 0) { partial[w] = row + w; partial[w + 8] = row * w; }
            groupBarrier(2, 256);
            float s = partial[0];
            for (int q = 1; q < 16; ++q) s += partial[q];
            groupBarrier(2, 256);
            acc += s;
          }
        }
      }
      __syncthreads();  // the join
      if (failed) return;
    } else {
      for (int row = 0; row < 4; ++row) {
        const int w = threadIdx.x / 32;
        if (threadIdx.x % 32 == 0) partial[w] = row * unit + w;
        __syncthreads();
        float s = partial[0];
        for (int q = 1; q < 16; ++q) s += partial[q];
        __syncthreads();
        acc += s;
      }
    }
    const int w = threadIdx.x / 32;  // the next unit's full-block exchange (blockScale)
    if (threadIdx.x % 32 == 0) partial[w] = unit + w;
    __syncthreads();
    float s = partial[0];
    for (int q = 1; q < 16; ++q) s += partial[q];
    __syncthreads();
    acc += s;
  }
  out[blockIdx.x * 512 + threadIdx.x] = acc;
}
int main(int argc, char** argv) {
  const int mode = argc > 1 ? atoi(argv[1]) : 1;
  const int aligned = argc > 2 ? atoi(argv[2]) : 0;
  cudaMemcpyToSymbol(g_aligned, &aligned, sizeof(int));
  int* flag; cudaMalloc(&flag, sizeof(int)); cudaMemset(flag, 0xff, sizeof(int));
  float* out; cudaMalloc(&out, 4 * 512 * sizeof(float));
  k<<<4, 512>>>(flag, out, mode);
  const cudaError_t e = cudaDeviceSynchronize();
  std::printf("mode %d aligned %d: %s\n", mode, aligned, cudaGetErrorString(e));
  return 0;
}
