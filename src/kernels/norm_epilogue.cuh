// The row epilogue every path shares: residual add and RMSNorm of one token row.
//
// Given the reduced sum s of a row (already rounded to T, exactly as an allreduce in T returns it):
//   kAllReduce           out          = s
//   kAllReduceAdd        residual_out = T(float(residual_in) + float(s))
//   kAllReduceAddRMSNorm residual_out as above, then with z = float(residual_out) (the stored value)
//                        norm_out     = T(z * rsqrt(sum(z^2) / hidden + eps) * float(gamma))
// All arithmetic is fp32. Because the NCCL path and the fused kernels call this same code with the
// same block shape, they agree bit for bit whenever their sums agree (always at 2 ranks).
//
// A row whose vectors fit kThreads * kVpt stays in registers (one HBM read of each
// input, one write of each output). A wider row takes two passes: pass 1 writes residual_out and
// accumulates sum(z^2); pass 2 re-reads residual_out (the thread's own writes) to write norm_out.
//
// Must be called by every thread of the block (it contains __syncthreads).
//
// A row over a cluster (kCluster): the one-shot may spread a row over the S blocks of a thread
// block cluster, kThreads / S threads each (oneshot.cuh). Thread t of cluster block p plays thread
// p * (kThreads / S) + t of the one-block layout (rowThread), so each thread holds the same
// vectors, and the warps' partial sums of squares, exchanged through distributed shared memory,
// are added in the same warp order: the same bits as one block.
#pragma once

#include <cooperative_groups.h>
#include <cub/warp/warp_reduce.cuh>

#include "kernels.h"
#include "quant.h"
#include "sync.cuh"
#include "vec.cuh"

namespace arfusion::detail {

// kVpt: vectors per thread a row may need and still stay in registers (a wider row takes the two
// passes). Kernels that want more resident blocks instantiate the smallest that fits the row.
// The result is the same bits for every kVpt.
// Loads before the wait: residual_in is loaded before sumFn (which, in the fused kernels, waits for
// the peers), and so is gamma of each thread's first vector; the other vectors' gamma comes after
// the block reduction (gamma of every vector early spilled the add-RMSNorm kernel at 3 blocks per SM).
// kAllGammaEarly: with kVpt <= 2, every vector's gamma is loaded before sumFn: 4-8 more live
// registers, so only in the kernels that have them to spare (the one-shots without a quantized
// output, the flag two-shot and the single-GPU kernel's extended kernels but NVFP4's; the Lamport
// two-shot spilled with it).
// kExt: the extended epilogue (RowArgs::ext): residual_in may be null (zero), residual_out and
// norm_out may be null, Gemma weights, and a quantized copy of the normalised row (quantizeRow).
// Rows in registers only (validate.cpp), one block or half a block per row, never a cluster.
// kOnlyFormat: the quantized output the extended epilogue is compiled for: kAnyQuant, the call's
// format at run time (the two-shot's quantizing kernel for fp32 rows or other world sizes than
// two: one for every format keeps its build time), or one QuantFormat value, kQuantNone included,
// which the call must have (every other extended kernel: one format's body needs fewer registers,
// so the fused kernels spill less and the single-GPU kernel keeps more rows resident per SM).
constexpr int kAnyQuant = -1;
template <typename T, int VEC, int kVpt = kMaxVecPerThread, bool kAllGammaEarly = false, bool kExt = false,
          int kOnlyFormat = kAnyQuant>
struct RowEpilogue {
  using P = Pack<T, VEC>;
  using WarpReduce = cub::WarpReduce<float>;
  static constexpr int kWarps = kThreads / 32;
  struct Shared {
    typename WarpReduce::TempStorage warp[kWarps];
    float partial[kWarps];  // each warp's sum of z^2 (a row over a cluster: every block's warps)
    float row_max[kWarps];  // each warp's largest magnitude (the per-token FP8 scale, blockMax)
    uint64_t arrived;       // a row over a cluster: mbarrier, complete once all kWarps partials arrived
    ClusterWait wait;       // a row over a cluster: the bound of the mbarrier wait (set by the kernel)
  };

  // A row over a cluster with the norm (kCluster kernels, op kAllReduceAddRMSNorm; one row per
  // block and launch): every thread of every block calls clusterStart at the kernel's start, and
  // the norm (clusterScale) waits for the cluster barrier it arrives at before the blocks send each
  // other their partial sums: by then every block's mbarrier was initialised. The barrier is
  // relaxed: it orders nothing but the mbarrier's initialisation (the PTX ISA's
  // fence.mbarrier_init pattern). Waited for at the norm, where it has long completed.
  __device__ __forceinline__ static void clusterStart(Shared& sh) {
    if (threadIdx.x == 0) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smemAddr(&sh.arrived)) : "memory");
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  }

  // This thread's place in the one-block layout: threadIdx.x, or for a row over a cluster, its
  // block's rank in the cluster times the block size plus threadIdx.x.
  template <bool kCluster = false>
  __device__ __forceinline__ static int rowThread() {
    if constexpr (kCluster) return int(cooperative_groups::this_cluster().block_rank() * blockDim.x + threadIdx.x);
    return int(threadIdx.x);
  }

  // sumFn(i) returns the reduced pack of vector i of the row (and may have side effects, e.g. the
  // two-shot owner pushes it to its peers); it is called exactly once per vector.
  template <bool kCluster = false, typename SumFn>
  __device__ __forceinline__ static void run(const RowArgs& a, int64_t row, Shared& sh, SumFn&& sumFn) {
    const int tid = rowThread<kCluster>();
    const int64_t nvec = a.hidden / VEC;
    const int64_t base = row * a.hidden;
    const T* res_in = static_cast<const T*>(a.residual_in) + base;
    T* res_out = static_cast<T*>(a.residual_out) + base;
    T* out = static_cast<T*>(a.out) + base;
    const bool norm = a.op == Op::kAllReduceAddRMSNorm;
    if (a.op == Op::kAllReduce) {
      for (int64_t i = tid; i < nvec; i += kThreads) storePack<T, VEC>(out + i * VEC, sumFn(i));
      return;
    }

    if (nvec <= int64_t(kThreads) * kVpt) {
      runInRegisters<kNormAtRuntime, kCluster>(a, row, sh, sumFn);
      return;
    }

    // Wide rows: two passes.
    float ss = 0.f;
    for (int64_t i = tid; i < nvec; i += kThreads) {
      const P r = loadPack<T, VEC>(res_in + i * VEC);
      const P s = sumFn(i);
      const P ro = addResidual(s, r, ss);
      storePack<T, VEC>(res_out + i * VEC, ro);
    }
    if (!norm) return;
    const float scale = rowScale<kCluster>(a, sh, ss);
    const T* gamma = static_cast<const T*>(a.gamma);
    for (int64_t i = tid; i < nvec; i += kThreads) {
      const P zr = loadPack<T, VEC>(res_out + i * VEC);
      storePack<T, VEC>(out + i * VEC, normalized(zr, scale, loadPack<T, VEC>(gamma + i * VEC)));
    }
  }

  // The row in registers: residual_out, and norm_out if kNorm says so, of a row of at most
  // kThreads * kVpt vectors, which the caller guarantees. kNorm: 1 norm, 0 no norm, kNormAtRuntime
  // (a.op decides). Kernels that know the op call it directly: fewer live registers than run(),
  // which keeps every op's path.
  static constexpr int kNormAtRuntime = -1;
  template <int kNorm, bool kCluster = false, typename SumFn>
  __device__ __forceinline__ static void runInRegisters(const RowArgs& a, int64_t row, Shared& sh, SumFn&& sumFn) {
    const int64_t base = row * a.hidden;
    const T* res_in = static_cast<const T*>(a.residual_in) + base;
    const T* gamma = static_cast<const T*>(a.gamma);
    constexpr int kEarly = kAllGammaEarly && kVpt <= 2 ? kVpt : 1;  // the note above the struct
    inRegisters<kNorm, kCluster, kEarly>(
        a, row, sh, [&](int, int64_t i, bool has) { return loadPackOrZero<T, VEC>(res_in + i * VEC, has); },
        [&](int, int64_t i) { return loadPack<T, VEC>(gamma + i * VEC); }, [&](int, int64_t i) { return sumFn(i); });
  }

  // The row in registers with residual_in (r[k], zeros for an extended call without one) and gamma
  // (g[k], for the norm) of vector tid + k * kThreads already loaded by the caller; sumFn(k, i)
  // returns the reduced pack of that vector i. Ops with a residual only; rows of at most
  // kThreads * kVpt vectors.
  template <bool kCluster, typename SumFn>
  __device__ __forceinline__ static void runHeld(const RowArgs& a, int64_t row, Shared& sh, const P* r, const P* g,
                                                 SumFn&& sumFn) {
    inRegisters<kNormAtRuntime, kCluster, 0>(a, row, sh, [&](int k, int64_t, bool) { return r[k]; },
                                             [&](int k, int64_t) { return g[k]; }, sumFn);
  }

  // The core of both: vector i = tid + k * kThreads of the row has its residual_in from
  // residualOf(k, i, has_residual) (zeros where has_residual is false), its gamma from
  // gammaOf(k, i) and its reduced sum from sumFn(k, i).
  // residual_in, and gamma of the first kEarly vectors, are asked for before sumFn (which, in the
  // fused kernels, waits for the peers), so their loads are in flight during the wait.
  template <int kNorm, bool kCluster, int kEarly, typename ResidualOf, typename GammaOf, typename SumFn>
  __device__ __forceinline__ static void inRegisters(const RowArgs& a, int64_t row, Shared& sh, ResidualOf&& residualOf,
                                                     GammaOf&& gammaOf, SumFn&& sumFn) {
    const int tid = rowThread<kCluster>();
    const int64_t nvec = a.hidden / VEC;
    const int64_t base = row * a.hidden;
    const bool norm = kNorm == 1 || (kNorm == kNormAtRuntime && a.op == Op::kAllReduceAddRMSNorm);
    static_assert(!(kExt && kCluster), "the extended epilogue has no cluster kernels");
    // The extended epilogue's optional tensors, and its quantization scale read before the waits.
    const bool has_residual = !kExt || a.residual_in != nullptr;
    const bool store_residual = !kExt || a.residual_out != nullptr;
    const float q_scale = kExt ? quantScaleIn(a) : 0.f;
    // residual_out is kept as stored (T), not as fp32: half the registers, and z = float(ro) is
    // exactly what pass 2 of the wide path re-reads, so both paths give the same bits.
    P ro[kVpt];
    P g[kEarly > 0 ? kEarly : 1];
    float ss = 0.f;
#pragma unroll
    for (int k = 0; k < kVpt; ++k) {
      const int64_t i = tid + int64_t(k) * kThreads;
      if (i < nvec) {
        const P r = residualOf(k, i, has_residual);
        if (k < kEarly && norm) g[k] = gammaOf(k, i);
        ro[k] = addResidual(sumFn(k, i), r, ss);
        if (store_residual) storePackEvictFirst<T, VEC>(static_cast<T*>(a.residual_out) + base + i * VEC, ro[k]);
      }
    }
    if (!norm) return;
    const float scale = rowScale<kCluster>(a, sh, ss);
    auto normOf = [&](int k, int64_t i) {
      const P gk = k < kEarly ? g[k] : gammaOf(k, i);
      return kExt ? normalizedExt(ro[k], scale, gk, gammaOffset(a)) : normalized(ro[k], scale, gk);
    };
    // A per-token quantized output needs the row's maximum before any conversion: a first pass
    // over the normalised packs. A kernel of that format alone keeps them (kKeep) and stores
    // norm_out in that pass; the kernel of every format recomputes them below rather than keep them
    // live: its other formats convert pack by pack with no copy of the row (FP8 per-group and
    // NVFP4 ran 4-12% faster at 16-512 rows than when they converted a kept row).
    constexpr bool kKeep = kOnlyFormat == kQuantFp8PerToken;
    P kept[kKeep ? kVpt : 1];
    // A kernel of FP8 static or per-token output converts a pack inside the branch that computes
    // it: those formats need no other lane's pack, and a pack chosen between zeros and the
    // normalised values after the branch costs a select per element.
    constexpr bool kInBranch = kOnlyFormat == kQuantFp8 || kOnlyFormat == kQuantFp8PerToken;
    const RowQuant rq = rowQuant(a, row, q_scale, tid, [&](float& m) {
#pragma unroll
      for (int k = 0; k < kVpt; ++k) {
        const int64_t i = tid + int64_t(k) * kThreads;
        if (i < nvec) {
          if constexpr (kKeep) {
            kept[k] = normOf(k, i);
            storeNorm(a, base, i, kept[k]);
            m = fmaxf(m, packAbsMax(kept[k]));
          } else {
            m = fmaxf(m, packAbsMax(normOf(k, i)));
          }
        }
      }
    }, [&](float m) { return blockMax(sh, m); });
#pragma unroll
    for (int k = 0; k < kVpt; ++k) {
      const int64_t i = tid + int64_t(k) * kThreads;
      const bool active = i < nvec;
      P o = {};
      if (active) {
        if constexpr (kKeep) {
          o = kept[k];
        } else {
          o = normOf(k, i);
          storeNorm(a, base, i, o);
        }
        if constexpr (kInBranch) quantizePack(a, rq, o, int(i), true);
      }
      if constexpr (!kInBranch) quantizePack(a, rq, o, int(i), active);  // every lane: the group maxima shuffle
    }
    finishRowQuant(a, rq, tid, kThreads);
  }

  // The row on half a block: threads t = 0 .. kThreads/2 - 1 of a group that synchronises on
  // groupBarrier(barrier_id) (sync.cuh), while the other half of the block does something else.
  // Thread t plays threads t and t + kThreads/2 of the full layout above: the same vectors, the
  // same per-thread order of the sum of squares, the warp sums of warps w and w + kWarps/2 from the
  // same lanes, added in warp order: the same bits as run() and the add-RMSNorm kernel. Rows of at
  // most kThreads * kVpt vectors, all ops.
  template <typename SumFn>
  __device__ __forceinline__ static void runOnHalf(const RowArgs& a, int64_t row, Shared& sh, int t, int barrier_id,
                                                   SumFn&& sumFn) {
    constexpr int kHalf = kThreads / 2;
    const int64_t nvec = a.hidden / VEC;
    const int64_t base = row * a.hidden;
    if (a.op == Op::kAllReduce) {
      for (int64_t i = t; i < nvec; i += kHalf) storePack<T, VEC>(static_cast<T*>(a.out) + base + i * VEC, sumFn(i));
      return;
    }
    const bool has_residual = !kExt || a.residual_in != nullptr;
    const bool store_residual = !kExt || a.residual_out != nullptr;
    const float q_scale = kExt ? quantScaleIn(a) : 0.f;
    P ro[2][kVpt];
    float ss[2] = {0.f, 0.f};
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int k = 0; k < kVpt; ++k) {
        const int64_t i = t + h * kHalf + int64_t(k) * kThreads;
        if (i < nvec) {
          const P r = loadPackOrZero<T, VEC>(static_cast<const T*>(a.residual_in) + base + i * VEC, has_residual);
          ro[h][k] = addResidual(sumFn(i), r, ss[h]);
          if (store_residual) storePackEvictFirst<T, VEC>(static_cast<T*>(a.residual_out) + base + i * VEC, ro[h][k]);
        }
      }
    }
    if (a.op != Op::kAllReduceAddRMSNorm) return;
    const int w = t / 32;
    const float w0 = WarpReduce(sh.warp[w]).Sum(ss[0]);
    const float w1 = WarpReduce(sh.warp[w + kWarps / 2]).Sum(ss[1]);
    if (t % 32 == 0) {
      sh.partial[w] = w0;
      sh.partial[w + kWarps / 2] = w1;
    }
    groupBarrier(barrier_id, kHalf);
    const float scale = scaleOf(a, sh);
    groupBarrier(barrier_id, kHalf);  // the next row rewrites sh.partial
    const T* gamma = static_cast<const T*>(a.gamma);
    auto normOf = [&](int h, int k, int64_t i) {
      const P gk = loadPack<T, VEC>(gamma + i * VEC);
      return kExt ? normalizedExt(ro[h][k], scale, gk, gammaOffset(a)) : normalized(ro[h][k], scale, gk);
    };
    const RowQuant rq = rowQuant(a, row, q_scale, t, [&](float& m) {
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int k = 0; k < kVpt; ++k) {
          const int64_t i = t + h * kHalf + int64_t(k) * kThreads;
          if (i < nvec) m = fmaxf(m, packAbsMax(normOf(h, k, i)));
        }
    }, [&](float m) { return halfMax(sh, m, barrier_id); });
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int k = 0; k < kVpt; ++k) {
        const int64_t i = t + h * kHalf + int64_t(k) * kThreads;
        const bool active = i < nvec;
        P o = {};
        if (active) {
          o = normOf(h, k, i);
          storeNorm(a, base, i, o);
        }
        quantizePack(a, rq, o, int(i), active);
      }
    }
    finishRowQuant(a, rq, t, kHalf);
  }

 private:
  // ---- the extended epilogue's pieces (kExt) --------------------------------------------------
  // x / D of a non-negative x, D a power of two: a shift (signed division, which rounds toward
  // zero, costs two or three more instructions: the index math below runs once per row or block).
  template <int D, typename I>
  __device__ __forceinline__ static I quotient(I x) {
    static_assert(D > 0 && (D & (D - 1)) == 0, "a power of two");
    return static_cast<I>(static_cast<std::make_unsigned_t<I>>(x) / D);
  }
  // norm_out pack i of the row at element `base` (an extended call may leave norm_out out).
  __device__ __forceinline__ static void storeNorm(const RowArgs& a, int64_t base, int64_t i, const P& o) {
    if (!kExt || a.out) storePack<T, VEC>(static_cast<T*>(a.out) + base + i * VEC, o);
  }
  // Whether the call's quantized format is f: false at compile time in a kernel of another format
  // (kOnlyFormat), so its code for f is left out.
  __device__ __forceinline__ static bool isFormat(const RowArgs& a, int f) {
    return (kOnlyFormat == kAnyQuant || kOnlyFormat == f) && a.quant == f;
  }
  // The FP8 static scale or the NVFP4 global scale (device memory), 0 for the other formats.
  __device__ __forceinline__ static float quantScaleIn(const RowArgs& a) {
    return isFormat(a, kQuantFp8) || isFormat(a, kQuantNvfp4) ? *a.q_scale_in : 0.f;
  }
  // norm_out of one pack with the option of Gemma weights: T(z * scale * (gamma + w)), w the
  // weight offset (gammaOffset): 1 for Gemma weights, -0.0 otherwise, which gives gamma itself for
  // every gamma, -0.0 and NaN included (x + -0.0 == x in IEEE arithmetic), so the plain weights'
  // bits without a select per element.
  __device__ __forceinline__ static P normalizedExt(const P& z, float scale, const P& g, float w) {
    P o;
#pragma unroll
    for (int e = 0; e < VEC; ++e) o.v[e] = fromFloat<T>(elementOf(z, e) * scale * (elementOf(g, e) + w));
    return o;
  }
  __device__ __forceinline__ static float gammaOffset(const RowArgs& a) { return a.gemma ? 1.f : -0.f; }
  // The maximum of unsigned bits over the L consecutive lanes of a group (L a power of two,
  // aligned), on every lane: log2(L) shuffles (NVFP4's blocks span 2 or 4 lanes).
  template <int L>
  __device__ __forceinline__ static uint32_t groupMaxBits(uint32_t m) {
#pragma unroll
    for (int off = L / 2; off >= 1; off /= 2) m = max(m, __shfl_xor_sync(0xffffffffu, m, off));
    return m;
  }
  // The same of magnitudes (floats >= 0, never NaN: every caller's maximum starts at 0 and takes
  // fmaxf of magnitudes, which a NaN loses), whose bits order as their values do. A group of 16 or
  // 32 lanes takes the warp's integer maximum (redux.sync, SM80 on), once or once per half-warp,
  // where shuffles took 4-5 dependent steps.
  template <int L>
  __device__ __forceinline__ static float groupMagnitudeMax(float m) {
    static_assert(L == 16 || L == 32, "FP8 groups and rows span 16 or 32 lanes");
    const uint32_t b = floatBits(m);
    if constexpr (L == 32) {
      return bitsFloat(__reduce_max_sync(0xffffffffu, b));
    } else {
      const bool upper = threadIdx.x & 16;
      const uint32_t lower_max = __reduce_max_sync(0xffffffffu, upper ? 0u : b);
      const uint32_t upper_max = __reduce_max_sync(0xffffffffu, upper ? b : 0u);
      return bitsFloat(upper ? upper_max : lower_max);
    }
  }
  // The largest magnitude over the block (or over half of it, on its own barrier), on every thread.
  // sh.row_max is written again only by the next row's maximum, after that row's norm barriers:
  // no barrier after the reads.
  __device__ __forceinline__ static float blockMax(Shared& sh, float m) {
    static_assert(kWarps <= 32, "one lane per warp's maximum");
    const float w = groupMagnitudeMax<32>(m);
    const int lane = threadIdx.x % 32;
    if (lane == 0) sh.row_max[threadIdx.x / 32] = w;
    __syncthreads();
    return groupMagnitudeMax<32>(lane < kWarps ? sh.row_max[lane] : 0.f);
  }
  __device__ __forceinline__ static float halfMax(Shared& sh, float m, int barrier_id) {
    const int t = threadIdx.x % (kThreads / 2), lane = t % 32;
    const float w = groupMagnitudeMax<32>(m);
    if (lane == 0) sh.row_max[t / 32] = w;
    groupBarrier(barrier_id, kThreads / 2);
    return groupMagnitudeMax<32>(lane < kWarps / 2 ? sh.row_max[lane] : 0.f);
  }
  // VEC / D bytes of quantized values (a pack's FP8 bytes, D = 1, or its E2M1 nibbles, D = 2), from
  // an array of codes of any width (E4M3 pairs come as 16-bit words), one store.
  template <typename C, int M>
  __device__ __forceinline__ static void storeBytes(uint8_t* p, const C (&b)[M]) {
    constexpr int N = M * int(sizeof(C));
    if constexpr (N == 8) {
      uint2 w;
      memcpy(&w, b, 8);
      *reinterpret_cast<uint2*>(p) = w;
    } else if constexpr (N == 4) {
      uint32_t w;
      memcpy(&w, b, 4);
      *reinterpret_cast<uint32_t*>(p) = w;
    } else if constexpr (N == 2) {
      uint16_t w;
      memcpy(&w, b, 2);
      *reinterpret_cast<uint16_t*>(p) = w;
    } else {
      static_assert(N == 1, "a pack is 1-8 bytes once quantized");
      memcpy(p, b, 1);
    }
  }
  // The scale of FP8 group g of `row` (per-group formats), in the call's layout.
  __device__ __forceinline__ static void storeGroupScale(const RowArgs& a, int64_t row, int64_t g, float s) {
    const int64_t groups = a.hidden / kFp8GroupSize;
    if (a.scale_layout == kLayoutUE8M0Packed)
      static_cast<uint8_t*>(a.q_scales)[4 * (quotient<4>(g) * a.scale_rows + row) + (g & 3)] = ue8m0Byte(s);
    else if (a.scale_layout == kLayoutColumnMajor)
      static_cast<float*>(a.q_scales)[g * a.scale_rows + row] = s;
    else
      static_cast<float*>(a.q_scales)[row * groups + g] = s;
  }
  // Where the E4M3 scale of NVFP4 block 0 of `row` lies in the scale buffer (bytes), in the call's
  // layout; blockScaleAt adds block c's place, in 32 bits (c < hidden / 16).
  __device__ __forceinline__ static int64_t blockScaleRow(const RowArgs& a, int64_t row) {
    return a.scale_layout == kLayoutSwizzled128x4 ? swizzledRowPart(row, a.scale_cols) : row * quotient<kNvfp4BlockSize>(a.hidden);
  }
  __device__ __forceinline__ static int blockScaleAt(const RowArgs& a, int c) {
    return a.scale_layout == kLayoutSwizzled128x4 ? swizzledColumnPart(c) : c;
  }
  // The padding of a tiled scale layout, as zeros, so that every byte of the buffer is written
  // once: this row's scale columns past the last group or block, and a share of the padding rows
  // (rows tokens .. scaleRows - 1). Threads t of `threads`.
  //   column-major, UE8M0: row r0 writes the padding rows r0 + j * tokens (j >= 1), at most 3.
  //   swizzled 128x4: the padding rows all lie in the last 128-row tile; its real rows share it,
  //     a warp writing a column tile's padding lines in 16-byte stores (one token's 127 padding
  //     rows, written by rows of words scattered over every tile, took one block several
  //     microseconds of uncoalesced stores; one token's block writes the whole tile).
  __device__ __forceinline__ static void writeScalePadding(const RowArgs& a, int64_t row, int t, int threads) {
    const bool ue8m0 = isFormat(a, kQuantFp8PerGroup) && a.scale_layout == kLayoutUE8M0Packed;
    const bool colmajor = isFormat(a, kQuantFp8PerGroup) && a.scale_layout == kLayoutColumnMajor;
    const bool swizzled = isFormat(a, kQuantNvfp4) && a.scale_layout == kLayoutSwizzled128x4;
    if (!ue8m0 && !colmajor && !swizzled) return;
    // 32-bit arithmetic: a scale buffer's rows and words are far below 2^31.
    const int r0 = static_cast<int>(row), tokens = static_cast<int>(a.q_tokens), rows = static_cast<int>(a.scale_rows);
    const int scale_cols = static_cast<int>(a.scale_cols);
    const int cols = static_cast<int>(swizzled ? quotient<kNvfp4BlockSize>(a.hidden) : quotient<kFp8GroupSize>(a.hidden));
    const int words = ue8m0 ? quotient<4>(cols + 3) : swizzled ? quotient<4>(scale_cols) : cols;  // entries per row
    if (t == 0) {  // this row's columns past the last one, up to a whole word
      for (int c = cols; c < words * 4 && (ue8m0 || swizzled); ++c) {
        if (ue8m0) static_cast<uint8_t*>(a.q_scales)[4 * ((c / 4) * rows + r0) + c % 4] = 0;
        else static_cast<uint8_t*>(a.q_scales)[swizzled128x4(r0, c, scale_cols)] = 0;
      }
    }
    if (swizzled) {
      // Padding rows lie in the last 128-row tile only. Line l of a 512-byte column tile holds rows
      // first + l + 32 s in its words s = 0..3. Lines l >= real are padding whole: the kernel's
      // blocks write them (padding_by_blocks, paddingLines), or the tile's real rows (j = r0 -
      // first, of `real`) do here, row j in the column tiles w = j, j + real, ..., a warp per
      // column tile, lane l its line. Lines l < real hold real rows and padding: row j = l writes
      // its own line's padding words (s >= 1 with j + 32 s >= real) in every column tile. Which
      // lanes store depends on the lane or the row alone: no warp runs both kinds.
      const int first = rows - 128, real = tokens - first, j = r0 - first;
      if (real == 128 || j < 0) return;
      uint8_t* tile = static_cast<uint8_t*>(a.q_scales) + size_t(first) * words * 4;
      const int lane = t & 31;
      if (lane >= real && !a.padding_by_blocks) zeroLines(tile + lane * 16, j + real * quotient<32>(t), real * quotient<32>(threads), words);
      if (j < 32)
        for (int w = t; w < words; w += threads) {
          uint32_t* line = reinterpret_cast<uint32_t*>(tile + size_t(w) * 512 + j * 16);
#pragma unroll
          for (int s = 1; s < 4; ++s)
            if (j + 32 * s >= real) line[s] = 0;
        }
      return;
    }
    const int shadows = (rows - r0 - 1) / tokens;  // padding rows this row writes
    for (int n = t; n < shadows * words; n += threads) {
      const int j = n / words, w = n - j * words;
      const int r = r0 + (j + 1) * tokens;
      if (colmajor) static_cast<float*>(a.q_scales)[w * rows + r] = 0.f;
      else static_cast<uint32_t*>(a.q_scales)[w * rows + r] = 0;
    }
  }
  // Line `lines` (a 16-byte line of the swizzled layout's first column tile) of column tiles
  // w0, w0 + step, ... < words, as zeros: one 16-byte store each where the buffer's alignment allows
  // it (a loop per kind of store: no line issues both). Loops not unrolled: a warp has one or two
  // lines, and an unrolled loop's trip count cost an integer division.
  __device__ __forceinline__ static void zeroLines(uint8_t* lines, int w0, int step, int words) {
    if (reinterpret_cast<uintptr_t>(lines) % 16 == 0)
#pragma unroll 1
      for (int w = w0; w < words; w += step) *reinterpret_cast<uint4*>(lines + size_t(w) * 512) = make_uint4(0, 0, 0, 0);
    else
#pragma unroll 1
      for (int w = w0; w < words; w += step) {
        uint32_t* line = reinterpret_cast<uint32_t*>(lines + size_t(w) * 512);
        line[0] = line[1] = line[2] = line[3] = 0;
      }
  }

 public:
  // The NVFP4 swizzled layout's lines that hold no real row (writeScalePadding) where the kernel's
  // blocks write them (RowArgs::padding_by_blocks): this block's share if it is one of the grid's
  // last a.pad_workers blocks, called after its rows. Warp v of worker k (its place among them)
  // takes the column tiles w = v * workers + k, + kWarps * workers, ..., lane l its line l of each
  // if l >= real. With several blocks the zeros leave from several SMs at once, beside the rows
  // (one token's block alone, writing 31 lines per column tile after its row, made an NVFP4 call
  // of 1 x 4096 take 3.10 us instead of 2.75 on an H100).
  __device__ __forceinline__ static void paddingLines(const RowArgs& a) {
    if constexpr (kQuantizes) {
      const int workers = a.pad_workers, worker = int(blockIdx.x) - (int(gridDim.x) - workers);
      if (!isFormat(a, kQuantNvfp4) || a.scale_layout != kLayoutSwizzled128x4 || worker < 0) return;
      const int rows = static_cast<int>(a.scale_rows), first = rows - 128, real = static_cast<int>(a.q_tokens) - first;
      const int lane = threadIdx.x & 31, words = quotient<4>(static_cast<int>(a.scale_cols));
      if (lane < real) return;
      uint8_t* tile = static_cast<uint8_t*>(a.q_scales) + size_t(first) * words * 4;
      zeroLines(tile + lane * 16, quotient<32>(int(threadIdx.x)) * workers + worker, quotient<32>(int(blockDim.x)) * workers, words);
    }
  }

 private:
  // The quantized copy of the normalised row (docs/design.md, "Quantized outputs"), pack by pack as
  // each norm_out pack is computed, so that no copy of the row stays live: rowQuant before the
  // packs (the row's scale), quantizePack for each (every thread of the row's group, for every
  // vector slot, active or not: the group maxima shuffle over lanes; a group's lanes are all
  // active or all inactive, since the row is whole groups of vectors), finishRowQuant after them.
  // Compiled out where the epilogue has no quantized output (plain epilogue, kOnlyFormat none).
  static constexpr bool kQuantizes = kExt && kOnlyFormat != kQuantNone;
  struct RowQuant {
    int64_t row;     // the row of the quantized outputs
    float scale;     // the static or per-token FP8 scale, or the NVFP4 global scale
    float inv;       // FP8: the scale's reciprocal
    int64_t sf_row;  // NVFP4: blockScaleRow (once per row: the layouts' 64-bit arithmetic)
  };
  // The row's quantization scale: q_scale (static FP8, NVFP4), or for per-token FP8 the row's
  // maximum (maxOver(m) folds this thread's packs into m, rowMax reduces over the row's threads),
  // its scale stored by thread t == 0.
  template <typename MaxOver, typename RowMax>
  __device__ __forceinline__ static RowQuant rowQuant(const RowArgs& a, int64_t local_row, float q_scale, int t, MaxOver&& maxOver,
                                                      RowMax&& rowMax) {
    RowQuant rq{local_row + a.q_row0, q_scale, 0.f, 0};
    if constexpr (kQuantizes) {
      if (isFormat(a, kQuantNvfp4)) rq.sf_row = blockScaleRow(a, rq.row);
      if (isFormat(a, kQuantFp8PerToken)) {
        float m = 0.f;
        maxOver(m);
        rq.scale = fp8Scale(rowMax(m), false);
        if (t == 0) static_cast<float*>(a.q_scales)[rq.row] = rq.scale;
      }
      if (isFormat(a, kQuantFp8) || isFormat(a, kQuantFp8PerToken)) rq.inv = fp8Inverse(rq.scale);
    }
    return rq;
  }
  // The bits of pack o's largest magnitude as fp32 (magnitudes' bits order as the values do, every
  // NaN above infinity: one integer maximum gives the absmax and whether there is a NaN). 16-bit
  // elements two at a time (maxU16x2).
  __device__ __forceinline__ static uint32_t packMagnitudeBits(const P& o) {
    if constexpr (sizeof(T) == 2) {
      uint32_t m = 0;
#pragma unroll
      for (int e = 0; e < VEC; e += 2) m = maxU16x2(m, pairWord(o, e) & 0x7fff7fffu);
      const uint32_t h = max(m & 0xffffu, m >> 16);
      if constexpr (std::is_same_v<T, __nv_bfloat16>) return h << 16;
      else return floatBits(__half2float(__ushort_as_half(static_cast<unsigned short>(h))));
    } else {
      uint32_t m = 0;
#pragma unroll
      for (int e = 0; e < VEC; ++e) m = max(m, floatBits(toFloat(o.v[e])) & 0x7fffffffu);
      return m;
    }
  }
  // The sign bits of elements e and e + 1 at bits 15 and 31 (e2m1PairSigns; a pair of 16-bit
  // elements as it is).
  __device__ __forceinline__ static uint32_t pairSigns(const P& o, int e) {
    if constexpr (sizeof(T) == 2) return pairWord(o, e);
    else return e2m1PairSigns(o.v[e], o.v[e + 1]);
  }
  __device__ __forceinline__ static float packAbsMax(const P& o) {
    float m = 0.f;
#pragma unroll
    for (int e = 0; e < VEC; ++e) m = fmaxf(m, fabsf(elementOf(o, e)));
    return m;
  }
  // Pack o (norm_out as stored, T) of vector i, if active, in the call's format. One body per
  // format, chosen per pack: only the chosen body's temporaries are live.
  __device__ __forceinline__ static void quantizePack(const RowArgs& a, const RowQuant& rq, const P& o, int i, bool active) {
    if constexpr (kQuantizes) {
      if constexpr (kOnlyFormat != kAnyQuant) {
        quantizePackAs<kOnlyFormat>(a, rq, o, i, active);
      } else {
        switch (a.quant) {
          case kQuantNone: break;
          case kQuantFp8: quantizePackAs<kQuantFp8>(a, rq, o, i, active); break;
          case kQuantFp8PerToken: quantizePackAs<kQuantFp8PerToken>(a, rq, o, i, active); break;
          case kQuantFp8PerGroup: quantizePackAs<kQuantFp8PerGroup>(a, rq, o, i, active); break;
          default: quantizePackAs<kQuantNvfp4>(a, rq, o, i, active); break;
        }
      }
    }
  }
  // After the row's packs: the scale buffer's padding (t of `threads`).
  __device__ __forceinline__ static void finishRowQuant(const RowArgs& a, const RowQuant& rq, int t, int threads) {
    if constexpr (kQuantizes)
      if (a.quant != kQuantNone) writeScalePadding(a, rq.row, t, threads);
  }
  template <uint8_t kFormat>
  __device__ __forceinline__ static void quantizePackAs(const RowArgs& a, const RowQuant& rq, const P& o, int i, bool active) {
    uint8_t* q = static_cast<uint8_t*>(a.q_out) + (kFormat == kQuantNvfp4 ? rq.row * quotient<2>(a.hidden) : rq.row * a.hidden);
    // Straight from the pack as stored (T), element by element (an inactive pack is zeros).
    auto x = [&](int e) { return elementOf(o, e); };
    if constexpr (kFormat == kQuantNvfp4) {
      constexpr int L = kNvfp4BlockSize / VEC;  // lanes per 16-element block
      // The block's absolute maximum and whether it holds a NaN.
      const uint32_t mbits = groupMaxBits<L>(packMagnitudeBits(o));
      const float amax = bitsFloat(mbits);
      const Nvfp4Block blk = nvfp4Block(amax, mbits > 0x7f800000u, rq.scale);
      if (active) {
        if (i % L == 0) static_cast<uint8_t*>(a.q_scales)[rq.sf_row + blockScaleAt(a, quotient<L>(i))] = blk.sf;
        // Two values at once (e2m1MagnitudeLanes) where every scaled magnitude is finite and below
        // 7: the block's values finite and amax * inv < 7 (so inv is finite too, and no product
        // is NaN: each value's code takes its own sign). Otherwise (a NaN or infinity in the
        // block, a saturated scale, an infinite or NaN inv) value by value. One branch per pack:
        // the pack's four-value groups all take the same conversion.
        static_assert(VEC % 4 == 0, "the extended epilogue's packs hold 4 or 8 values");
        uint16_t b[VEC / 4];  // E2M1 bytes of values e .. e + 3, in memory order
        if (mbits < 0x7f800000u && amax * blk.inv < kE2M1LanesLimit) {
          const auto lanes = [&](int e) { return e2m1MagnitudeLanes(fabsf(x(e)) * blk.inv, fabsf(x(e + 1)) * blk.inv); };
#pragma unroll
          for (int e = 0; e < VEC; e += 4) b[e / 4] = e2m1Bytes(lanes(e), lanes(e + 2), pairSigns(o, e), pairSigns(o, e + 2));
        } else {
#pragma unroll
          for (int e = 0; e < VEC; e += 4)
            b[e / 4] = static_cast<uint16_t>(e2m1x2FromFloat(x(e) * blk.inv, x(e + 1) * blk.inv) |
                                             e2m1x2FromFloat(x(e + 2) * blk.inv, x(e + 3) * blk.inv) << 8);
        }
        storeBytes(q + i * (VEC / 2), b);
      }
    } else {
      float inv = rq.inv;
      if constexpr (kFormat == kQuantFp8PerGroup) {
        constexpr int L = kFp8GroupSize / VEC;  // lanes per 128-element group
        float m = 0.f;
#pragma unroll
        for (int e = 0; e < VEC; ++e) m = fmaxf(m, fabsf(x(e)));
        const float s = fp8Scale(groupMagnitudeMax<L>(m), a.pow2_scales || a.scale_layout == kLayoutUE8M0Packed);
        inv = fp8Inverse(s);
        if (active && i % L == 0) storeGroupScale(a, rq.row, quotient<L>(i), s);
      }
      if (active) {
        uint16_t b[VEC / 2];  // two E4M3 values each, the lower element in the low byte
#pragma unroll
        for (int e = 0; e < VEC; e += 2) b[e / 2] = e4m3x2FromFloat(x(e) * inv, x(e + 1) * inv);
        storeBytes(q + i * VEC, b);
      }
    }
  }

  // residual_out of one pack: z = T(sum + residual) per element; adds z^2 to ss in element order
  // (every path's per-thread order, so every path gives the same bits). The extended epilogue reads
  // the inputs pair by pair (elementOf: the same values, fewer instructions); the plain kernels
  // keep the element reads they were measured with.
  __device__ __forceinline__ static P addResidual(const P& s, const P& r, float& ss) {
    const auto in = [](const P& p, int e) {
      if constexpr (kExt) return elementOf(p, e);
      else return toFloat(p.v[e]);
    };
    P z;
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      z.v[e] = fromFloat<T>(in(s, e) + in(r, e));
      const float f = toFloat(z.v[e]);
      ss += f * f;
    }
    return z;
  }
  // norm_out of one pack: T(z * scale * gamma) per element.
  __device__ __forceinline__ static P normalized(const P& z, float scale, const P& g) {
    P o;
#pragma unroll
    for (int e = 0; e < VEC; ++e) o.v[e] = fromFloat<T>(toFloat(z.v[e]) * scale * toFloat(g.v[e]));
    return o;
  }

  // rsqrt(mean(z^2) + eps) of the row, on every thread. Leaves `sh` free for the next row.
  // The order of cub::BlockReduce (warp reductions, then warp 0's sum plus warps 1.. in order), so
  // the same bits; but every thread adds the warps' sums itself: two barriers per row instead of
  // BlockReduce's one plus two for broadcasting thread 0's result.
  __device__ __forceinline__ static float blockScale(const RowArgs& a, Shared& sh, float ss) {
    const int warp = threadIdx.x / 32;
    const float w = WarpReduce(sh.warp[warp]).Sum(ss);
    if (threadIdx.x % 32 == 0) sh.partial[warp] = w;
    __syncthreads();
    const float scale = scaleOf(a, sh);
    __syncthreads();  // the next row rewrites sh.partial
    return scale;
  }

  // The same for a row over a cluster: lanes 0 .. S-1 of warp w send its sum to block 0 .. S-1 of
  // the cluster (st.async into sh.partial at the warp's place in the one-block layout, counted by
  // that block's mbarrier), and every block adds the kWarps sums it received in warp order. No
  // cluster barrier: one with release semantics (cluster.sync) waits for every store the block
  // has in flight, the norm's residual_out and the peers' NVLink stores among them (~1 us at
  // 1 x 4096). Each block's wait ends once the cluster's blocks reached
  // their norm, which they do within their bounded waits; after it no block writes into this
  // block's shared memory, so it may leave. One row per launch: the mbarrier's phase 0 only.
  // The cluster barrier waits only for the arrival every block makes as its first instruction
  // (clusterStart; the hardware launches a cluster's blocks together). The mbarrier wait completes
  // once every block reached its norm, which it does within its own bounded waits (cluster kernels
  // take one unit and never leave early: a give-up runs on through the epilogue); it is bounded
  // all the same, by the timer and the abort word (sh.wait), and acquires at cluster scope (the
  // partial sums arrive by remote stores).
  __device__ __forceinline__ static float clusterScale(const RowArgs& a, Shared& sh, float ss) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const float w = __shfl_sync(0xffffffffu, WarpReduce(sh.warp[warp]).Sum(ss), 0);
    const uint32_t blocks = kThreads / blockDim.x;
    const uint32_t rank = cooperative_groups::this_cluster().block_rank();
    asm volatile("barrier.cluster.wait.aligned;" ::: "memory");  // clusterStart's: the mbarriers exist
    if (threadIdx.x == 0)
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smemAddr(&sh.arrived)),
                   "r"(uint32_t(sizeof(float) * kWarps))
                   : "memory");
    if (uint32_t(lane) < blocks && !(sh.wait.test_skip_partial && rank == 1)) {  // (the test hook: kernels.h)
      uint32_t dst, bar;
      asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(dst) : "r"(smemAddr(&sh.partial[rank * (blockDim.x / 32) + warp])), "r"(uint32_t(lane)));
      asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(bar) : "r"(smemAddr(&sh.arrived)), "r"(uint32_t(lane)));
      asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(dst), "r"(__float_as_uint(w)),
                   "r"(bar)
                   : "memory");
    }
    unsigned long long start = 0;
    for (uint32_t done = 0, polls = 1; !done; ++polls) {
      asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
                   : "=r"(done)
                   : "r"(smemAddr(&sh.arrived))
                   : "memory");
      if (!done && (polls & 255u) == 0 &&
          mustGiveUp(sh.wait.error, sh.wait.stop, sh.wait.timeout_ns, start, sh.wait.block, kPeerOwnCluster, sh.wait.epoch))
        break;  // the communicator is failed (recorded); this row's norm_out is not valid
    }
    return scaleOf(a, sh);
  }
  template <bool kCluster>
  __device__ __forceinline__ static float rowScale(const RowArgs& a, Shared& sh, float ss) {
    if constexpr (kCluster) return clusterScale(a, sh, ss);
    return blockScale(a, sh, ss);
  }
  __device__ __forceinline__ static uint32_t smemAddr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }
  // rsqrt(mean(z^2) + eps) from the kWarps warps' sums of z^2 in sh.partial, added in warp order:
  // the one order every block shape above keeps.
  __device__ __forceinline__ static float scaleOf(const RowArgs& a, const Shared& sh) {
    float total = sh.partial[0];
#pragma unroll
    for (int k = 1; k < kWarps; ++k) total += sh.partial[k];
    return rsqrtf(total / static_cast<float>(a.hidden) + a.eps);
  }
};

}  // namespace arfusion::detail
