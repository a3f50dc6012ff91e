// Maps runtime (dtype, vector, sync mode) onto kernel template instantiations. Only kernels files
// include it.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <utility>

#include "kernels.h"

namespace arfusion::detail {

template <typename T, int VEC>
struct TypeVec {
  using type = T;
  static constexpr int vec = VEC;
};

// Calls f(TypeVec<T, VEC>{}) for the runtime dtype and vector flag: 16-byte packs on the vector
// path, single elements otherwise.
template <typename F>
cudaError_t dispatchType(DType dtype, bool vector, F&& f) {
  switch (dtype) {
    case DType::kFloat16:
      return vector ? f(TypeVec<__half, 8>{}) : f(TypeVec<__half, 1>{});
    case DType::kBFloat16:
      return vector ? f(TypeVec<__nv_bfloat16, 8>{}) : f(TypeVec<__nv_bfloat16, 1>{});
    case DType::kFloat32:
      return vector ? f(TypeVec<float, 4>{}) : f(TypeVec<float, 1>{});
  }
  return cudaErrorInvalidValue;
}

// Vectors per thread of the in-register row epilogue (RowEpilogue's kVpt) for a row of nvec
// vectors: the fewest that hold it, 1 or 2, else kMaxVecPerThread (which also takes wider rows, in
// two passes). Kernels instantiated per kVpt run no unrolled body for vectors the row lacks.
inline int fewestVectorsPerThread(int64_t nvec) {
  return nvec <= kThreads ? 1 : nvec <= 2 * kThreads ? 2 : kMaxVecPerThread;
}

// Launches a fused kernel; GridDependency kernels get the programmatic-serialization attribute.
template <typename... KArgs, typename... Args>
cudaError_t launchFused(void (*kernel)(KArgs...), SyncMode sync, int blocks, cudaStream_t stream,
                        Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(kThreads);
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = sync == SyncMode::kGridDependency ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

}  // namespace arfusion::detail
