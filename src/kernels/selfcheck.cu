// Helper kernels of the creation-time self-check (src/host/selfcheck.cpp).
//
// delayedFill: triggers its dependents at once, then every thread spins for delay_ns of
// %globaltimer and writes a pattern that depends on (rank, generation). A GridDependency kernel
// launched right after it starts early and must see the new pattern; one that read its input
// before the grid dependency resolved would see the previous generation.
#include <cuda_bf16.h>

#include "dispatch.cuh"
#include "sync.cuh"

namespace arfusion::detail {
namespace {

__global__ void delayedFill(__nv_bfloat16* buf, int64_t n, int rank, uint32_t gen, unsigned long long delay_ns) {
  // Let a programmatic dependent launch right away, so that a GridDependency kernel after this one
  // runs concurrently and must rely on its grid-dependency wait to see the new input.
  cudaTriggerProgrammaticLaunchCompletion();
  const unsigned long long start = globalTimerNs();
  while (globalTimerNs() - start < delay_ns) {
  }
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    buf[i] = __float2bfloat16_rn(static_cast<float>((i * 7 + rank * 13 + gen * 31) % 17) * 0.25f - 2.0f);
}

}  // namespace

cudaError_t launchDelayedFill(void* buf, int64_t n, int rank, uint32_t gen, unsigned long long delay_ns,
                              cudaStream_t stream) {
  return launchPlain(delayedFill, 8, 256, stream, static_cast<__nv_bfloat16*>(buf), n, rank, gen, delay_ns);
}

cudaError_t forEachSelfCheckKernel(const KernelVisitor& visit) { return visitKernel(visit, delayedFill); }

}  // namespace arfusion::detail
