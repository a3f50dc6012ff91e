// Does racecheck model bar.sync with an id and a thread count? Two halves of a 512-thread block:
// warps 0-7 sync on barrier 1, warps 8-15 exchange per-warp partials through shared memory on
// barrier 2 (write, bar 2, read all, bar 2, repeat), as RowEpilogue::runOnHalf. mode 0: as said;
// mode 1: the same exchange by all 512 threads on __syncthreads (control).
#include <cstdio>
__device__ __forceinline__ void groupBarrier(int id, int threads) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory"); }
__global__ void k(float* out, int mode) {
  __shared__ float partial[16];
  float acc = 0.f;
  if (mode == 0) {
    if (threadIdx.x < 256) {
      groupBarrier(1, 256);
    } else {
      const int t = threadIdx.x - 256, w = t / 32;
      for (int row = 0; row < 4; ++row) {
        if (t % 32 == 0) { partial[w] = row + w; partial[w + 8] = row * w; }
        groupBarrier(2, 256);
        float s = partial[0];
        for (int q = 1; q < 16; ++q) s += partial[q];
        groupBarrier(2, 256);
        acc += s;
      }
    }
    __syncthreads();
  } else {
    const int w = threadIdx.x / 32;
    for (int row = 0; row < 4; ++row) {
      if (threadIdx.x % 32 == 0) partial[w] = row + w;
      __syncthreads();
      float s = partial[0];
      for (int q = 1; q < 16; ++q) s += partial[q];
      __syncthreads();
      acc += s;
    }
  }
  out[blockIdx.x * 512 + threadIdx.x] = acc;
}
int main(int argc, char** argv) {
  const int mode = argc > 1 ? atoi(argv[1]) : 0;
  float* out; cudaMalloc(&out, 4 * 512 * sizeof(float));
  k<<<4, 512>>>(out, mode);
  const cudaError_t e = cudaDeviceSynchronize();
  std::printf("mode %d: %s\n", mode, cudaGetErrorString(e));
  return 0;
}
