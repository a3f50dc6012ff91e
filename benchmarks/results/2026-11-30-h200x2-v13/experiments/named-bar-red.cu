// Written in session 13, run in session 14 call 1 (modes 0/1/2: 4/0/4 hazards, ../../2026-11-30-h200x2-v14/): the next step of call6/named.cu. Does racecheck follow barrier.red with a
// non-zero id and a thread count, and a flag poll by one lane in front of it? The split steps of
// twoShotKernel (split-steps-call7.patch) have both and racecheck reports hazards there; the
// microtest without them is clean.
//   mode 0: finishers = one lane polls a global word, then barrier.red.and on barrier 2, then the
//           partial-sum exchange of RowEpilogue::runOnHalf (barrier 2, twice per row); pushers =
//           barrier 1; both halves then __syncthreads() and a full-block exchange (blockScale).
//   mode 1: the same with the poll result broadcast through shared memory and barrier.sync
//           (split-steps-next.patch).
//   mode 2: mode 0 without the poll (barrier.red on barrier 2 with a constant predicate): separates
//           the barrier.red from the divergent poll.
// Hypothesis (a second review, session 13): racecheck counts a barrier.red on a named barrier as an
// arrival on barrier 0, so the two halves are one barrier-0 generation apart afterwards and every
// later block-wide exchange looks unordered: then modes 0 and 2 report hazards at the exchange
// after the join (writer and reader in different halves) and mode 1 is clean.
// Build and run: nvcc -arch=sm_90a -lineinfo -o /tmp/nbr named-bar-red.cu &&
//   for m in 0 1 2; do compute-sanitizer --tool racecheck --racecheck-report hazard /tmp/nbr $m; done
#include <cstdio>
#include <cstdlib>
__device__ __forceinline__ void groupBarrier(int id, int threads) {
  asm volatile("barrier.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ bool groupBarrierAnd(int id, int threads, bool pred) {
  int all;
  asm volatile("{ .reg .pred p, q; setp.ne.s32 p, %1, 0; barrier.red.and.pred q, %2, %3, p; selp.s32 %0, 1, 0, q; }"
               : "=r"(all) : "r"(int(pred)), "r"(id), "r"(threads) : "memory");
  return all != 0;
}
__global__ void k(const volatile int* flag, float* out, int mode) {
  __shared__ float partial[16];
  __shared__ int failed;
  if (threadIdx.x == 0) failed = 0;
  __syncthreads();
  float acc = 0.f;
  for (int unit = 0; unit < 3; ++unit) {
    if (threadIdx.x < 256) {
      groupBarrier(1, 256);
    } else {
      const int t = threadIdx.x - 256, w = t / 32;
      bool go;
      if (mode == 0) {
        bool ok = true;
        if (t == 0) ok = *flag != 0;  // one lane polls (the flag is already set: no spin needed)
        go = groupBarrierAnd(2, 256, ok);
      } else if (mode == 2) {
        go = groupBarrierAnd(2, 256, true);
      } else {
        if (t == 0 && *flag == 0) atomicOr(&failed, 1);
        groupBarrier(2, 256);
        go = atomicOr(&failed, 0) == 0;
      }
      for (int row = 0; go && row < 4; ++row) {
        if (t % 32 == 0) { partial[w] = row + w; partial[w + 8] = row * w; }
        groupBarrier(2, 256);
        float s = partial[0];
        for (int q = 1; q < 16; ++q) s += partial[q];
        groupBarrier(2, 256);
        acc += s;
      }
    }
    __syncthreads();  // the join
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
  const int mode = argc > 1 ? atoi(argv[1]) : 0;
  int* flag; cudaMalloc(&flag, sizeof(int)); cudaMemset(flag, 0xff, sizeof(int));
  float* out; cudaMalloc(&out, 4 * 512 * sizeof(float));
  k<<<4, 512>>>(flag, out, mode);
  const cudaError_t e = cudaDeviceSynchronize();
  std::printf("mode %d: %s\n", mode, cudaGetErrorString(e));
  return 0;
}
