// Fused residual-add + RMSNorm on one GPU: the epilogue of the NCCL path (and the whole op at one
// rank).
//
// Algorithm: one block of kThreads per row (grid-stride over rows), the shared RowEpilogue with the
// fewest vectors per thread that hold the row (kVpt 1, 2 or 4):
// 16-byte loads, fp32 math, CUB WarpReduce for sum(z^2) (norm_epilogue.cuh). With the row in registers each byte of
// x, residual_in and gamma is read once and residual_out and norm_out written once, the minimum.
// x may alias norm_out (the NCCL path reduces into norm_out): every element of x is read by the
// thread that later writes it, before it writes it. An NVFP4 output with swizzled scales may add
// blocks without a row that write the scale tile's padding lines (planPaddingLines, dispatch.cuh).
// bf16 rows of the extended epilogue have a second kernel for calls of many rows (kManyRows below).
// Memory ordering: none needed beyond the block barrier inside the epilogue.
// Limits: rows of any width (wider than kThreads * kMaxVecPerThread vectors take two passes).
#include "dispatch.cuh"
#include "norm_epilogue.cuh"

namespace arfusion::detail {
namespace {

// Rows of up to 2 vectors per thread (bf16/fp16 hidden <= 8192, fp32 <= 4096) compile for 3
// resident blocks per SM (40 registers): the kernel is latency-bound per row (load, block
// reduction, store), and a third block per SM took 8192 x 8192 bf16 from 141 to 133 us on H200.
// The extended epilogue compiles one kernel per quantized format (RowEpilogue's kOnlyFormat): one
// format's body fits 64 registers at up to 2 vectors per thread (2 blocks per SM; a kernel for
// every format needed ~104 at 2 vectors, one block per SM, and its rows waited on each other).
// Its kernels load every vector's gamma with x and residual_in (RowEpilogue's kAllGammaEarly):
// the 64 registers hold it, and a row's second vector no longer waits for its gamma after the
// first vector's quantization. Not NVFP4's: it gained nothing at 16 rows and lost 3% at 128 (H100).
// bf16 extended rows also compile for 3 blocks per SM (kManyRows; 40 registers, at most 12 bytes
// of spills), taken from kManyRowsMin rows on: with rows for several waves of blocks, a third
// block per SM keeps more rows in flight (quantized calls 5-16% faster at 2048 and 8192 x 8192 on
// H200); with fewer, the 64-register kernels are as fast or faster (up to 10% at 512 rows). fp16's
// spill 4-64 bytes at 40 registers (per-token calls up to 1.7x slower), fp32 rows need more.
template <int kVpt, bool kExt, bool kManyRows>
constexpr int normMinBlocks() { return kVpt > 2 ? 1 : !kExt || kManyRows ? 3 : 2; }
template <typename T, int kVpt, bool kExt>
constexpr bool hasManyRowsKernel() { return kExt && kVpt <= 2 && std::is_same_v<T, __nv_bfloat16>; }
constexpr int64_t kManyRowsMin = 1024;  // between 512 rows (3 blocks lost) and 2048 (3 blocks won)

// kNorm: 1 norm, 0 add only; the kVpt = kMaxVecPerThread kernel (kNormAtRuntime) takes the op at
// run time (RowEpilogue::run: every op, rows of any width). kFormat: the extended epilogue's
// quantized format (RowEpilogue).
template <typename T, int VEC, int kVpt, int kNorm, bool kExt, int kFormat, bool kManyRows = false>
__global__ void __launch_bounds__(kThreads, normMinBlocks<kVpt, kExt, kManyRows>()) addRMSNormKernel(RowArgs a) {
  using Epi = RowEpilogue<T, VEC, kVpt, kExt && kFormat != kQuantNvfp4, kExt, kFormat>;
  __shared__ typename Epi::Shared sh;
  const T* x = static_cast<const T*>(a.input);
  auto rows = [&](int64_t row_blocks) {
    for (int64_t row = blockIdx.x; row < a.tokens; row += row_blocks) {
      const T* xr = x + row * a.hidden;
      auto load = [xr](int64_t i) { return loadPack<T, VEC>(xr + i * VEC); };
      if constexpr (kVpt < kMaxVecPerThread) Epi::template runInRegisters<kNorm>(a, row, sh, load);
      else Epi::run(a, row, sh, load);
    }
  };
  if constexpr (kExt) {  // the grid's last a.pad_blocks blocks take no rows, only padding (RowArgs)
    const int row_blocks = int(gridDim.x) - a.pad_blocks;
    if (int(blockIdx.x) < row_blocks) rows(row_blocks);
    Epi::paddingLines(a);
  } else {
    rows(gridDim.x);
  }
}

// The kernel of a variant and an op: rows of 16-byte vectors that fit 1 or 2 per thread get the
// lean kernels; everything else, including a one-rank group's plain allreduce (out = x), the
// general one; the extended epilogue (the norm op only) one per vectors per thread and quantized
// format (kFormat), and for bf16 one for many rows (hasManyRowsKernel). The launch and the
// preloading share it.
template <typename T, int VEC, int kVpt, bool kExt, int kFormat>
auto addRMSNormKernelFor(Op op, bool many_rows) {
  if constexpr (kExt) {
    (void)op;
    if constexpr (hasManyRowsKernel<T, kVpt, kExt>())
      if (many_rows) return addRMSNormKernel<T, VEC, kVpt, 1, true, kFormat, true>;
    return addRMSNormKernel<T, VEC, kVpt, 1, true, kFormat>;
  } else {
    (void)many_rows;
    if constexpr (kVpt < kMaxVecPerThread) {
      if (op == Op::kAllReduceAddRMSNorm) return addRMSNormKernel<T, VEC, kVpt, 1, false, kQuantNone>;
      if (op == Op::kAllReduceAdd) return addRMSNormKernel<T, VEC, kVpt, 0, false, kQuantNone>;
    }
    return addRMSNormKernel<T, VEC, kMaxVecPerThread, RowEpilogue<T, VEC>::kNormAtRuntime, false, kQuantNone>;
  }
}

}  // namespace

cudaError_t launchAddRMSNorm(const RowArgs& args, DType dtype, bool vector, cudaStream_t stream) {
  RowArgs a = args;
  const unsigned row_blocks = static_cast<unsigned>(a.tokens < 65535 ? a.tokens : 65535);
  const unsigned blocks = row_blocks + (a.ext ? planPaddingLines(a, row_blocks) : 0);
  return dispatchVariant(dtype, vector, a.hidden, a.ext, a.quant, [&](auto v) {
    using V = decltype(v);
    const auto kernel = addRMSNormKernelFor<typename V::type, V::vec, V::vpt, V::ext, V::format>(a.op, a.tokens >= kManyRowsMin);
    return launchPlain(kernel, blocks, kThreads, stream, a);
  });
}

cudaError_t forEachAddRMSNormKernel(const KernelVisitor& visit) {
  return forEachVariant([&](auto v) {
    using V = decltype(v);
    for (Op op : {Op::kAllReduce, Op::kAllReduceAdd, Op::kAllReduceAddRMSNorm})
      for (bool many_rows : {false, true}) {
        const cudaError_t e = visitKernel(visit, addRMSNormKernelFor<typename V::type, V::vec, V::vpt, V::ext, V::format>(op, many_rows));
        if (e != cudaSuccess) return e;
      }
    return cudaSuccess;
  });
}

}  // namespace arfusion::detail
