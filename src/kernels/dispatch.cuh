// Maps runtime (dtype, vector, row width) onto kernel template instantiations. The kernels files
// include it (and test_cpu, which checks that the enumeration covers what the launches pick).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>
#include <utility>

#include "kernels.h"
#include "quant.h"

namespace arfusion::detail {

// One kernel variant: element type T, VEC elements per 16-byte pack (1 off the vector path), kVpt
// vectors per thread in the in-register row epilogue (RowEpilogue), kExt: the extended epilogue
// (RowArgs::ext: optional residual and outputs, Gemma weights, quantized outputs), compiled apart
// so that the plain calls' kernels are exactly as measured, and kFormat: an extended call's
// quantized output (kQuantNone or one format, quant.h). The one-shot and the single-GPU kernel
// compile a kernel per format: a format's body alone fits the registers the rest of the kernel
// needs, where one body for every format spilled (by up to 1.7x slower calls); the two-shot
// compiles one per format for 16-bit rows up to 8192 on two ranks and one for every format otherwise
// (twoshot.cuh, perFormatTwoShot: its build time). Extended calls take the vector path with rows
// in registers (validate.cpp).
template <typename T, int VEC, int kVpt, bool kExt = false, int kFormat = kQuantNone>
struct Variant {
  using type = T;
  static constexpr int vec = VEC;
  static constexpr int vpt = kVpt;
  static constexpr bool ext = kExt;
  static constexpr int format = kFormat;
};

// Vectors per thread of the in-register row epilogue for a row of nvec vectors: the fewest that
// hold it, 1 or 2, else kMaxVecPerThread (which also takes wider rows, in two passes). Kernels
// instantiated per kVpt run no unrolled body for vectors the row lacks.
inline int fewestVectorsPerThread(int64_t nvec) {
  return nvec <= kThreads ? 1 : nvec <= 2 * kThreads ? 2 : kMaxVecPerThread;
}

// Elements of a 16-byte vector of dtype: the VEC of dispatchVariant's vector path.
constexpr int elementsPerVector(DType dtype) { return dtype == DType::kFloat32 ? 4 : 8; }

// The epilogues a translation unit instantiates kernels for: the fused kernels compile their plain
// and extended halves in separate files (oneshot.cu / oneshot_ext.cu, twoshot.cu / twoshot_ext.cu)
// so that the two build in parallel; the single-GPU kernel compiles both.
enum class Epilogues { kPlain, kExtended, kBoth };

// Calls f(Variant<T, VEC, kVpt, kExt, kFormat>{}) for the runtime dtype, vector flag (16-byte
// packs, or single elements), row width, epilogue and quantized format (quant, kQuant* of quant.h:
// an extended call's; a plain call has none): the one place that maps a call onto template
// instantiations. An extended call (ext) off the vector path is refused before it gets here; a call
// whose epilogue kParts leaves out returns cudaErrorInvalidValue.
template <Epilogues kParts = Epilogues::kBoth, typename F>
cudaError_t dispatchVariant(DType dtype, bool vector, int64_t hidden, bool ext, uint8_t quant, F&& f) {
  constexpr bool kPlain = kParts != Epilogues::kExtended, kExtended = kParts != Epilogues::kPlain;
  auto withVpt = [&](auto tv) -> cudaError_t {
    using T = typename decltype(tv)::type;
    constexpr int VEC = decltype(tv)::vec;
    if (ext) {
      if constexpr (VEC > 1 && kExtended) {
        auto extended = [&](auto q) -> cudaError_t {
          constexpr int Q = decltype(q)::value;
          const int vpt = fewestVectorsPerThread(hidden / VEC);
          if (vpt == 1) return f(Variant<T, VEC, 1, true, Q>{});
          if (vpt == 2) return f(Variant<T, VEC, 2, true, Q>{});
          return f(Variant<T, VEC, kMaxVecPerThread, true, Q>{});
        };
        switch (quant) {
          case kQuantNone: return extended(std::integral_constant<int, kQuantNone>{});
          case kQuantFp8: return extended(std::integral_constant<int, kQuantFp8>{});
          case kQuantFp8PerToken: return extended(std::integral_constant<int, kQuantFp8PerToken>{});
          case kQuantFp8PerGroup: return extended(std::integral_constant<int, kQuantFp8PerGroup>{});
          case kQuantNvfp4: return extended(std::integral_constant<int, kQuantNvfp4>{});
        }
      }
      return cudaErrorInvalidValue;
    }
    if constexpr (kPlain) {
      if constexpr (VEC > 1) {
        const int vpt = fewestVectorsPerThread(hidden / VEC);
        if (vpt == 1) return f(Variant<T, VEC, 1>{});
        if (vpt == 2) return f(Variant<T, VEC, 2>{});
      }
      return f(Variant<T, VEC, kMaxVecPerThread>{});
    }
    return cudaErrorInvalidValue;
  };
  switch (dtype) {
    case DType::kFloat16:
      return vector ? withVpt(Variant<__half, 8, 0>{}) : withVpt(Variant<__half, 1, 0>{});
    case DType::kBFloat16:
      return vector ? withVpt(Variant<__nv_bfloat16, 8, 0>{}) : withVpt(Variant<__nv_bfloat16, 1, 0>{});
    case DType::kFloat32:
      return vector ? withVpt(Variant<float, 4, 0>{}) : withVpt(Variant<float, 1, 0>{});
  }
  return cudaErrorInvalidValue;
}

// Calls f for every Variant of the epilogues kParts that dispatchVariant can choose (kernel
// preloading, kernels.h), and stops at the first error.
template <Epilogues kParts = Epilogues::kBoth, typename F>
cudaError_t forEachVariant(F&& f) {
  for (DType d : {DType::kFloat16, DType::kBFloat16, DType::kFloat32}) {
    const int64_t per_vector = elementsPerVector(d);
    // Row widths that select kVpt 1, 2 and kMaxVecPerThread on the vector path; the scalar path
    // has the last only, and the plain epilogue only.
    for (bool ext : {false, true}) {
      if (ext ? kParts == Epilogues::kPlain : kParts == Epilogues::kExtended) continue;
      for (uint8_t quant = kQuantNone; quant <= kQuantNvfp4; ++quant) {
        if (quant != kQuantNone && !ext) continue;  // a quantized output is an extended call's
        for (int64_t vectors : {int64_t(kThreads), int64_t(2) * kThreads, int64_t(kMaxVecPerThread) * kThreads + 1}) {
          const cudaError_t e = dispatchVariant<kParts>(d, true, vectors * per_vector, ext, quant, f);
          if (e != cudaSuccess) return e;
        }
      }
    }
    if (kParts == Epilogues::kExtended) continue;
    const cudaError_t e = dispatchVariant<kParts>(d, false, 1, false, false, f);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

// Hands a kernel to a visitor as the `const void*` the CUDA runtime takes for it.
template <typename... KArgs>
cudaError_t visitKernel(const KernelVisitor& visit, void (*kernel)(KArgs...)) {
  return visit(reinterpret_cast<const void*>(kernel));
}

// The launch configuration of a fused grid: `blocks` blocks of kThreads / row_blocks threads, in
// clusters of row_blocks sharing their rows when that is > 1 (FusedLaunch::row_blocks), with
// programmatic stream serialization when `pdl` (GridDependency kernels). The launch and the
// clusters' occupancy query (oneShotMaxClusters) both use it. Not copyable: cfg points at attrs.
struct FusedConfig {
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attrs[2] = {};
  FusedConfig(bool pdl, int blocks, int row_blocks, cudaStream_t stream) {
    cfg.gridDim = dim3(blocks);
    cfg.blockDim = dim3(kThreads / row_blocks);
    cfg.stream = stream;
    unsigned n = 0;
    if (pdl) {
      attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attrs[n++].val.programmaticStreamSerializationAllowed = 1;
    }
    if (row_blocks > 1) {
      attrs[n].id = cudaLaunchAttributeClusterDimension;
      attrs[n++].val.clusterDim = {unsigned(row_blocks), 1, 1};
    }
    cfg.attrs = attrs;
    cfg.numAttrs = n;
  }
  FusedConfig(const FusedConfig&) = delete;
  FusedConfig& operator=(const FusedConfig&) = delete;
};

// Launches a fused kernel (FusedConfig: GridDependency kernels get the programmatic-serialization
// attribute, row_blocks > 1 clusters).
template <typename... KArgs, typename... Args>
cudaError_t launchFused(void (*kernel)(KArgs...), SyncMode sync, int blocks, int row_blocks, cudaStream_t stream,
                        Args&&... args) {
  FusedConfig c(sync == SyncMode::kGridDependency, blocks, row_blocks, stream);
  return cudaLaunchKernelEx(&c.cfg, kernel, std::forward<Args>(args)...);
}

// Launches kernel<<<blocks, threads, 0, stream>>>(args...) and returns this launch's own status:
// cudaGetLastError() after a <<<>>> launch also returns an earlier, unchecked error of the calling
// thread (the caller's, say), which would make a call that did launch report a failure.
template <typename... KArgs, typename... Args>
cudaError_t launchPlain(void (*kernel)(KArgs...), unsigned blocks, unsigned threads, cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(threads);
  cfg.stream = stream;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

// Most blocks that share the NVFP4 swizzled layout's padding lines: one column tile (4 scale
// columns, 64 elements of the row) per warp up to rows of 16 * 16 * 64 = 16384 elements.
constexpr int kMaxPaddingBlocks = 16;

// Who writes the NVFP4 swizzled layout's padding lines in a launch of the single-GPU kernel or the
// one-shot whose rows take `row_blocks` blocks (RowArgs::padding_by_blocks, RowEpilogue::paddingLines):
// the grid's last blocks, enough for one column tile per warp (at most kMaxPaddingBlocks): where
// the rows take at least that many blocks, the last of them, after their rows; where they take
// fewer, as many blocks without a row, added at the grid's end, and the rows' blocks write none
// (docs/design.md has the measurements of both). Sets a's fields and returns the blocks to add.
// Only the launch that holds the call's last row writes them, and only where the last 128-row tile
// has fewer than 32 real rows (only then is a line padding whole). Derived from the shape: the
// same on every rank.
inline int planPaddingLines(RowArgs& a, int64_t row_blocks) {
  a.padding_by_blocks = true;
  a.pad_workers = a.pad_blocks = 0;
  if (!a.ext || a.quant != kQuantNvfp4 || a.scale_layout != kLayoutSwizzled128x4 || a.q_row0 + a.tokens != a.q_tokens) return 0;
  const int64_t real = a.q_tokens - (a.scale_rows - 128);
  if (real >= 32) return 0;
  const int64_t warps = kThreads / 32, tiles = a.scale_cols / 4;
  a.pad_workers = static_cast<int>(std::min<int64_t>((tiles + warps - 1) / warps, kMaxPaddingBlocks));
  a.pad_blocks = row_blocks < a.pad_workers ? a.pad_workers : 0;
  return a.pad_blocks;
}

// World sizes that pick distinct kernels of a family: 2 (the two-rank kernels, where the family has
// them) and any other size, which kMaxRanks stands for here.
constexpr int kKernelWorlds[] = {2, kMaxRanks};

// The one place a world size becomes a kernel's kWorld: pick(std::integral_constant<int, 2>) for a
// two-rank communicator, pick(std::integral_constant<int, 0>) (any world size) otherwise. Families
// with kernels for two ranks (kWorldTwo) choose theirs through it.
template <typename Pick>
auto kernelForWorld(int world, Pick&& pick) {
  return world == 2 ? pick(std::integral_constant<int, 2>{}) : pick(std::integral_constant<int, 0>{});
}

// A fused kernel family (one-shot, two-shot) is a type with
//   template <typename T, int VEC, int kVpt, bool kExt, int kFormat> static auto kernel(SyncMode sync, bool cluster, bool held, int world);
//   static constexpr bool kClusterRows;  // whether it has kernels that share a row over a cluster
//   static constexpr bool kHeldOperands; // whether it has kernels that hold a one-row unit's operands
//   static constexpr bool kWorldTwo;     // whether it has kernels compiled for two ranks
// giving the kernel of a variant, sync mode, row layout (one block per row, or a cluster) and world
// size (kernels for two ranks where kWorldTwo, else one for every size), or null where another
// translation unit compiles it; extended-epilogue variants (kExt) have no clusters; kFormat, an
// extended variant's quantized output.
// Its launch and its enumeration come from here, so that the preloading (kernels.h) sees exactly
// the kernels the launches use; kParts, the epilogues of the calling translation unit.
template <typename Family, Epilogues kParts>
cudaError_t launchFamily(const DeviceComm& comm, const RowArgs& args, const FusedLaunch& launch, cudaStream_t stream) {
  if (launch.row_blocks > 1 && (!Family::kClusterRows || args.ext)) return cudaErrorInvalidConfiguration;
  return dispatchVariant<kParts>(launch.dtype, launch.vector, args.hidden, args.ext, args.quant, [&](auto v) {
    using V = decltype(v);
    // One row per unit of an op with a residual: the one-shot's kernel that holds the row's
    // operands (oneshot.cuh). The same vectors, order and protocol as the other, so it changes no
    // wait: ranks need not agree on it.
    const bool held = Family::kHeldOperands && launch.lamport && launch.rows_per_step == 1 && args.op != Op::kAllReduce;
    // The world size is the communicator's: every rank launches the same kind of kernel.
    const auto kernel =
        Family::template kernel<typename V::type, V::vec, V::vpt, V::ext, V::format>(launch.sync, launch.row_blocks > 1, held, comm.world);
    if (!kernel) return cudaErrorInvalidDeviceFunction;  // another file's kernel: the caller routes it there
    return launchFused(kernel, launch.sync, launch.blocks, launch.row_blocks, stream, comm, args, launch.rows_per_step);
  });
}

template <typename Family, Epilogues kParts>
cudaError_t forEachFamilyKernel(const KernelVisitor& visit) {
  return forEachVariant<kParts>([&](auto v) {
    using V = decltype(v);
    for (SyncMode sync : {SyncMode::kGridDependency, SyncMode::kFlagBarrier}) {
      for (bool cluster : {false, true}) {
        if (cluster && !Family::kClusterRows) continue;
        if (cluster && V::ext) continue;
        for (bool held : {false, true}) {
          if (held && !Family::kHeldOperands) continue;
          for (int world : kKernelWorlds) {
            if (world == 2 && !Family::kWorldTwo) continue;
            const auto kernel = Family::template kernel<typename V::type, V::vec, V::vpt, V::ext, V::format>(sync, cluster, held, world);
            if (!kernel) continue;  // another file's (the family's kernels over several files)
            const cudaError_t e = visitKernel(visit, kernel);
            if (e != cudaSuccess) return e;
          }
        }
      }
    }
    return cudaSuccess;
  });
}

}  // namespace arfusion::detail
