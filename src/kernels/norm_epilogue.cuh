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
// block cluster, kThreads / S threads each (oneshot.cu). Thread t of cluster block p plays thread
// p * (kThreads / S) + t of the one-block layout (rowThread), so each thread holds the same
// vectors, and the warps' partial sums of squares, exchanged through distributed shared memory,
// are added in the same warp order: the same bits as one block.
#pragma once

#include <cooperative_groups.h>
#include <cub/warp/warp_reduce.cuh>

#include "kernels.h"
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
// registers, so only in the kernels that have them to spare (the one-shots and the flag two-shot;
// the Lamport two-shot spilled with it).
template <typename T, int VEC, int kVpt = kMaxVecPerThread, bool kAllGammaEarly = false>
struct RowEpilogue {
  using P = Pack<T, VEC>;
  using WarpReduce = cub::WarpReduce<float>;
  static constexpr int kWarps = kThreads / 32;
  struct Shared {
    typename WarpReduce::TempStorage warp[kWarps];
    float partial[kWarps];  // each warp's sum of z^2 (a row over a cluster: every block's warps)
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
        a, row, sh, [&](int, int64_t i) { return loadPack<T, VEC>(res_in + i * VEC); },
        [&](int, int64_t i) { return loadPack<T, VEC>(gamma + i * VEC); }, [&](int, int64_t i) { return sumFn(i); });
  }

  // The row in registers with residual_in (r[k]) and gamma (g[k], for the norm) of vector
  // tid + k * kThreads already loaded by the caller; sumFn(k, i) returns the reduced pack of that
  // vector i. Ops with a residual only; rows of at most kThreads * kVpt vectors.
  template <bool kCluster, typename SumFn>
  __device__ __forceinline__ static void runHeld(const RowArgs& a, int64_t row, Shared& sh, const P* r, const P* g,
                                                 SumFn&& sumFn) {
    inRegisters<kNormAtRuntime, kCluster, 0>(a, row, sh, [&](int k, int64_t) { return r[k]; },
                                             [&](int k, int64_t) { return g[k]; }, sumFn);
  }

  // The core of both: vector i = tid + k * kThreads of the row has its residual_in from
  // residualOf(k, i), its gamma from gammaOf(k, i) and its reduced sum from sumFn(k, i).
  // residual_in, and gamma of the first kEarly vectors, are asked for before sumFn (which, in the
  // fused kernels, waits for the peers), so their loads are in flight during the wait.
  template <int kNorm, bool kCluster, int kEarly, typename ResidualOf, typename GammaOf, typename SumFn>
  __device__ __forceinline__ static void inRegisters(const RowArgs& a, int64_t row, Shared& sh, ResidualOf&& residualOf,
                                                     GammaOf&& gammaOf, SumFn&& sumFn) {
    const int tid = rowThread<kCluster>();
    const int64_t nvec = a.hidden / VEC;
    const int64_t base = row * a.hidden;
    const bool norm = kNorm == 1 || (kNorm == kNormAtRuntime && a.op == Op::kAllReduceAddRMSNorm);
    // residual_out is kept as stored (T), not as fp32: half the registers, and z = float(ro) is
    // exactly what pass 2 of the wide path re-reads, so both paths give the same bits.
    P ro[kVpt];
    P g[kEarly > 0 ? kEarly : 1];
    float ss = 0.f;
#pragma unroll
    for (int k = 0; k < kVpt; ++k) {
      const int64_t i = tid + int64_t(k) * kThreads;
      if (i < nvec) {
        const P r = residualOf(k, i);
        if (k < kEarly && norm) g[k] = gammaOf(k, i);
        ro[k] = addResidual(sumFn(k, i), r, ss);
        storePackEvictFirst<T, VEC>(static_cast<T*>(a.residual_out) + base + i * VEC, ro[k]);
      }
    }
    if (!norm) return;
    const float scale = rowScale<kCluster>(a, sh, ss);
#pragma unroll
    for (int k = 0; k < kVpt; ++k) {
      const int64_t i = tid + int64_t(k) * kThreads;
      if (i < nvec) {
        const P gk = k < kEarly ? g[k] : gammaOf(k, i);
        storePack<T, VEC>(static_cast<T*>(a.out) + base + i * VEC, normalized(ro[k], scale, gk));
      }
    }
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
    P ro[2][kVpt];
    float ss[2] = {0.f, 0.f};
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int k = 0; k < kVpt; ++k) {
        const int64_t i = t + h * kHalf + int64_t(k) * kThreads;
        if (i < nvec) {
          const P r = loadPack<T, VEC>(static_cast<const T*>(a.residual_in) + base + i * VEC);
          ro[h][k] = addResidual(sumFn(i), r, ss[h]);
          storePackEvictFirst<T, VEC>(static_cast<T*>(a.residual_out) + base + i * VEC, ro[h][k]);
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
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int k = 0; k < kVpt; ++k) {
        const int64_t i = t + h * kHalf + int64_t(k) * kThreads;
        if (i < nvec) {
          storePack<T, VEC>(static_cast<T*>(a.out) + base + i * VEC, normalized(ro[h][k], scale, loadPack<T, VEC>(gamma + i * VEC)));
        }
      }
    }
  }

 private:
  // residual_out of one pack: z = T(sum + residual) per element; adds z^2 to ss in element order
  // (every path's per-thread order, so every path gives the same bits).
  __device__ __forceinline__ static P addResidual(const P& s, const P& r, float& ss) {
    P z;
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      z.v[e] = fromFloat<T>(toFloat(s.v[e]) + toFloat(r.v[e]));
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
