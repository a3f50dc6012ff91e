// Fused residual-add + RMSNorm on one GPU: the epilogue of the NCCL path (and the whole op at one
// rank).
//
// Algorithm: one block of kThreads per row (grid-stride over rows), the shared RowEpilogue:
// 16-byte loads, fp32 math, CUB BlockReduce for sum(z^2). With the row in registers each byte of
// x, residual_in and gamma is read once and residual_out and norm_out written once, the minimum.
// x may alias norm_out (the NCCL path reduces into norm_out): every element of x is read by the
// thread that later writes it, before it writes it.
// Memory ordering: none needed beyond the block barrier inside the epilogue.
// Limits: rows of any width (wider than kThreads * kMaxVecPerThread vectors take two passes).
#include "dispatch.cuh"
#include "norm_epilogue.cuh"

namespace arfusion::detail {
namespace {

template <typename T, int VEC>
__global__ void __launch_bounds__(kThreads) addRMSNormKernel(RowArgs a) {
  using Epi = RowEpilogue<T, VEC>;
  __shared__ typename Epi::Shared sh;
  const T* x = static_cast<const T*>(a.input);
  for (int64_t row = blockIdx.x; row < a.tokens; row += gridDim.x) {
    const T* xr = x + row * a.hidden;
    Epi::run(a, row, sh, [&](int64_t i) { return loadPack<T, VEC>(xr + i * VEC); });
  }
}

}  // namespace

cudaError_t launchAddRMSNorm(const RowArgs& args, DType dtype, bool vector, cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>(args.tokens < 65535 ? args.tokens : 65535);
  return dispatchType(dtype, vector, [&](auto tv) {
    using T = typename decltype(tv)::type;
    constexpr int VEC = decltype(tv)::vec;
    addRMSNormKernel<T, VEC><<<blocks, kThreads, 0, stream>>>(args);
    return cudaGetLastError();
  });
}

}  // namespace arfusion::detail
