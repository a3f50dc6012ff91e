// Test-only device helpers: byte comparison and input perturbation inside CUDA graphs.
#include <cstddef>
#include <cstdint>

#include "gpu_harness.h"

namespace arftest {
namespace {
__global__ void countMismatchKernel(const uint32_t* a, const uint32_t* b, size_t words, unsigned long long* counter) {
  unsigned long long bad = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x)
    bad += a[i] != b[i];
  if (bad) atomicAdd(counter, bad);
}
// Flips the lowest mantissa bit of every 16-bit half-word: always a finite, different value for
// finite inputs, so a kernel that read the previous call's data gives a different result.
__global__ void perturbKernel(uint32_t* p, size_t words) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x)
    p[i] ^= 0x00010001u;
}
}  // namespace

void countMismatch(const void* a, const void* b, size_t bytes, unsigned long long* counter, cudaStream_t s) {
  countMismatchKernel<<<64, 256, 0, s>>>(static_cast<const uint32_t*>(a), static_cast<const uint32_t*>(b), bytes / 4, counter);
}
void perturb(void* p, size_t bytes, cudaStream_t s) {
  perturbKernel<<<64, 256, 0, s>>>(static_cast<uint32_t*>(p), bytes / 4);
}
}  // namespace arftest
