// One-shot fused allreduce + residual add + RMSNorm over peer memory: the decode kernel.
// docs/design.md, "One-shot", has the reasoning and the measurements behind each choice.
//
// Algorithm (n ranks, grid G, R rows per step; both derived from the shape, identical on all ranks).
//   Rows are cut into units of R rows; block b takes units b, b+G, ...; each unit is one epoch e of
//   block b (sync.cuh):
//     1. push: store the unit's input rows into slot e%2 of block b's region on every peer, at this
//        rank's sender index ((n-1) * R rows leave each rank per unit);
//     2. wait until every peer's rows arrived;
//     3. reduce each row in rank order 0..n-1 in fp32, round to T, run the shared RowEpilogue;
//     4. Lamport kernel: check each peer's call header (the flag kernel checks the flag's signature).
//   Same sums, same order on every rank: outputs are bitwise identical on all ranks.
// Two kernels, one per sync mode:
//   GridDependency -> oneShotLamportKernel: the data is its own ready flag (no fence, no flag on the
//     critical path); grid-dependency wait before the first global access, trigger once every
//     thread wrote its outputs. Variants: rows over a thread block cluster (kCluster: S = 2 or 4
//     blocks of kThreads / S threads share a row, each pushing, polling and reducing the vectors of
//     its threads in the one-block layout, the norm's sum of squares meeting in distributed shared
//     memory: the same bits as one block); a one-row unit's operands held in registers before the
//     NVLink stores (kHeld); kernels compiled for two ranks (kWorld = 2).
//   FlagBarrier -> oneShotFlagKernel: plain stores into the data area, bar.sync, release flag to
//     every peer, acquire wait, .cg payload loads. No griddepcontrol.
// Memory ordering: sync.cuh (flag protocol; Lamport protocol: relaxed system-scope stores and polls,
//   the kernel boundary orders a call's clears before the next call's stores, lamportNextUnit
//   between two units of one call).
// Limits: R * (n-1) rows (plus the Lamport headers) fit one region (plan.cpp); n <= kMaxRanks;
//   G <= max_blocks, and all G blocks co-resident (they wait on peers); a cluster kernel takes one
//   row per cluster and launch (its mbarrier serves one row). An extended call with NVFP4 swizzled
//   scales may add blocks after the G that take no unit and wait for nothing: they write the
//   scale tile's padding lines (planPaddingLines, dispatch.cuh), or, where the G blocks are enough,
//   the last of those do after their units.
// Instantiated by oneshot.cu (the plain epilogue) and oneshot_ext.cu (the extended one).
#pragma once

#include <climits>

#include "dispatch.cuh"
#include "norm_epilogue.cuh"
#include "sync.cuh"

namespace arfusion::detail {
namespace {

// The extended epilogue's grid: blocks 0 .. padBlocksStart - 1 take units, the last a.pad_blocks
// only a share of the NVFP4 swizzled padding lines (RowArgs::padding_by_blocks), which the last
// a.pad_workers blocks write, after their units (RowEpilogue::paddingLines).
template <bool kExt>
__device__ __forceinline__ unsigned padBlocksStart(const RowArgs& a) {
  return kExt ? gridDim.x - unsigned(a.pad_blocks) : gridDim.x;
}

template <typename T, int VEC, int kVpt, SyncMode kSync, bool kExt, int kFormat>
__global__ void __launch_bounds__(kThreads, 1) oneShotFlagKernel(DeviceComm c, RowArgs a, int rows_per_step) {
  using Epi = RowEpilogue<T, VEC, kVpt, kFormat == kQuantNone, kExt, kFormat>;  // as the Lamport kernel's
  using P = Pack<T, VEC>;
  __shared__ typename Epi::Shared sh;
  gridDependencyWait<kSync>();

  const int b = blockIdx.x;
  const unsigned G = padBlocksStart<kExt>(a);  // the blocks with rows; the others only pad
  if constexpr (kExt)
    if (blockIdx.x >= G) return Epi::paddingLines(a);
  const int R = rows_per_step;
  const int64_t nvec = a.hidden / VEC;
  const int nv32 = static_cast<int>(nvec);  // push-loop index in 32 bits: plan.cpp caps a step at 1 GiB
  const int64_t stride = strideElems<T>(a.hidden);
  const T* in = static_cast<const T*>(a.input);
  const int64_t units = (a.tokens + R - 1) / R;
  uint32_t epoch = c.epochs[b];

  for (int64_t u = b; u < units; u += G) {
    ++epoch;
    const int64_t row0 = u * R;
    const int rows = static_cast<int>(a.tokens - row0 < R ? a.tokens - row0 : R);

    // 1. Push this unit's rows to every peer.
    for (int idx = threadIdx.x; idx < rows * nv32; idx += kThreads) {
      const int j = idx / nv32;
      const int i = idx - j * nv32;
      storeToPeers(c, loadPack<T, VEC>(in + (row0 + j) * a.hidden + i * VEC), [&](int peer) {
        return reinterpret_cast<T*>(regionAddr(c, peer, b, epoch)) + (int64_t(senderIndex(c.rank, peer)) * R + j) * stride +
               i * VEC;
      });
    }
    // 2. One flag round trip.
    signalPeers(c, 0, b, epoch, a.sig);
    if (!waitPeers(c, 0, b, epoch, a.sig)) return;

    // 3. Reduce in rank order and run the epilogue, row by row.
    const T* region = reinterpret_cast<const T*>(regionAddr(c, c.rank, b, epoch));
    for (int j = 0; j < rows; ++j) {
      const T* own = in + (row0 + j) * a.hidden;
      Epi::run(a, row0 + j, sh, [&](int64_t i) {
        return sumInRankOrder<T, VEC>(c.world, [&](int src) {
          return src == c.rank ? loadPack<T, VEC>(own + i * VEC)
                               : loadPackCg<T, VEC>(region + (int64_t(senderIndex(src, c.rank)) * R + j) * stride + i * VEC);
        });
      });
    }
  }
  if (threadIdx.x == 0) c.epochs[b] = epoch;
  if constexpr (kExt) Epi::paddingLines(a);
  gridDependencyTrigger<kSync>();
}


// kCluster: rows over a cluster. kHeld (one block per row only): the held-operand kernel, launched
// only for units of one row (R == 1) of an op that reads a residual (dispatch.cuh launchFamily).
// kWorld: 2 for the kernels of two-rank communicators, 0 for any world size. kExt: the extended
// epilogue (one block per row), kFormat its quantized output (kQuantNone or one format).
template <typename T, int VEC, int kVpt, SyncMode kSync, bool kCluster, bool kHeld, int kWorld, bool kExt, int kFormat>
// One block per SM, so ptxas may use every register (at its default it spilled 156-364 bytes per
// thread); a cluster kernel's blocks have half the threads or fewer, hence twice the registers.
__global__ void __launch_bounds__(kCluster ? kThreads / 2 : kThreads, 1) oneShotLamportKernel(DeviceComm c, RowArgs a, int rows_per_step) {
  static_assert(kSync == SyncMode::kGridDependency, "the Lamport one-shot is the GridDependency kernel");
  static_assert(!kHeld || (kVpt <= 2 && !kCluster), "held operands: one block per row, at most two vectors per thread");
  static_assert(!kExt || !kCluster, "the extended epilogue: one block per row");
  // Every vector's gamma before the waits (kAllGammaEarly) except with a quantized output, whose
  // conversions need those registers (with it, ptxas spilled more in the two-rank kernels).
  using Epi = RowEpilogue<T, VEC, kVpt, kFormat == kQuantNone, kExt, kFormat>;
  using P = Pack<T, VEC>;
  constexpr int kPollPause = lamportPollPause(kVpt, kWorld);
  __shared__ typename Epi::Shared sh;
  __shared__ int give_up;
  if (threadIdx.x == 0) give_up = 0;
  if (kCluster && a.op == Op::kAllReduceAddRMSNorm) Epi::clusterStart(sh);  // only the norm needs the cluster
  gridDependencyWait<kSync>();
  __syncthreads();

  const int b = blockIdx.x;
  const unsigned G = padBlocksStart<kExt>(a);  // the blocks with rows; the others only pad
  if constexpr (kExt) {
    if (blockIdx.x >= G) {
      Epi::paddingLines(a);
      gridDependencyTrigger<kSync>();
      return;
    }
  }

  const int R = rows_per_step;
  const int64_t nvec = a.hidden / VEC;
  const int nv32 = static_cast<int>(nvec);  // push-loop index in 32 bits: plan.cpp caps a step at 1 GiB
  const int64_t stride = strideElems<T>(a.hidden);
  const T* in = static_cast<const T*>(a.input);
  const int64_t units = (a.tokens + R - 1) / R;
  uint32_t epoch = c.epochs[b];
  // A row over a cluster: cluster k takes units k, k + clusters, ...; its blocks share each row.
  const int64_t first = kCluster ? b / (kThreads / blockDim.x) : b;         // this block's cluster
  const int64_t step = kCluster ? gridDim.x * blockDim.x / kThreads : G;  // clusters in the grid
  const int tid = Epi::template rowThread<kCluster>();

  LamportHeaders headers(c);  // thread t < world-1 checks one peer's call header
  // Where this rank's vector i of the unit's row j goes in a peer's region, at the unit's epoch.
  auto peerSlot = [&](int peer, int j, auto i) {
    return reinterpret_cast<T*>(lamportAddr(c, peer, b, epoch)) + (int64_t(senderIndex(c.rank, peer)) * R + j) * stride +
           i * VEC;
  };
  for (int64_t u = first; u < units; u += step) {
    if (u != first) {
      lamportNextUnit();
      // A failed header check of the previous unit. A cluster's blocks would go on (their waits
      // give up at once): one that left would strand the others in the norm's exchange. (A cluster
      // takes one unit per launch: launchOneShot.)
      if (give_up && !kCluster) return;
    }
    ++epoch;
    const int64_t row0 = u * R;
    const int rows = static_cast<int>(a.tokens - row0 < R ? a.tokens - row0 : R);
    // The bound of the norm's exchange over the cluster (read after the barrier below).
    if (kCluster && threadIdx.x == 0)
      sh.wait = ClusterWait{c.error, c.abort_flag, c.timeout_ns, b, epoch, c.test_cluster_skip_partial};

    // 1. Push this unit's rows, sanitised, then its header, to every peer. The header goes last:
    // stored first, it held its warp's input loads back behind the epoch load.
    auto push = [&](int j, int i) {
      storeToPeers<kWorld>(c, lamportSanitize(loadPack<T, VEC>(in + (row0 + j) * a.hidden + i * VEC)),
                   [&](int peer) { return peerSlot(peer, j, i); });
    };
    // Held operands: the row's input, residual and gamma in registers before the NVLink stores
    // (while every SM pushes, an SM's later dependent loads wait several times longer). Same
    // vectors per thread as the loops below, so the peers see the same layout.
    // (The kHeld kernel's rows fit by dispatchVariant's choice of kVpt <= 2.)
    const bool held = kHeld || (kCluster && kVpt <= 2 && rows == 1 && nvec <= int64_t(kThreads) * kVpt && a.op != Op::kAllReduce);
    P mine[kVpt], hres[kVpt], hgam[kVpt];
    if (held) {
#pragma unroll
      for (int k = 0; k < kVpt; ++k) {
        const int64_t i = tid + int64_t(k) * kThreads;
        if (i < nvec) {
          mine[k] = lamportSanitize(loadPack<T, VEC>(in + row0 * a.hidden + i * VEC));
          // (An extended call's null residual_in is not loaded: zeros instead.)
          hres[k] = loadPackOrZero<T, VEC>(static_cast<const T*>(a.residual_in) + row0 * a.hidden + i * VEC, !kExt || a.residual_in);
          if (a.op == Op::kAllReduceAddRMSNorm) hgam[k] = loadPack<T, VEC>(static_cast<const T*>(a.gamma) + i * VEC);
        }
      }
#pragma unroll
      for (int k = 0; k < kVpt; ++k) {
        const int64_t i = tid + int64_t(k) * kThreads;
        if (i < nvec) storeToPeers<kWorld>(c, mine[k], [&](int peer) { return peerSlot(peer, 0, i); });
      }
    } else if constexpr (kCluster) {
      // Exactly the vectors this block's threads reduce (RowEpilogue layout): the peer's block b,
      // which polls them, shares the row with the same blocks.
      for (int j = 0; j < rows; ++j)
        for (int i = tid; i < nv32; i += kThreads) push(j, i);
    } else {
      for (int idx = threadIdx.x; idx < rows * nv32; idx += kThreads) {
        const int j = idx / nv32;
        push(j, idx - j * nv32);
      }
    }
    headers.push(c, b, epoch, a.sig);

    // Every warp's pushes leave before any warp waits: nothing in CUDA promises that a warp
    // spinning on a peer's data lets the other warps of its block run first (compute-sanitizer
    // racecheck runs them one at a time, and without this barrier both ranks timed out there).
    __syncthreads();

    // 2+3. Wait for each peer pack, reduce in rank order, clear, epilogue.
    T* region = reinterpret_cast<T*>(lamportAddr(c, c.rank, b, epoch));
    auto mySlot = [&](int src, int j, int64_t i) {  // where src's vector i of row j lands here
      return region + (int64_t(senderIndex(src, c.rank)) * R + j) * stride + i * VEC;
    };
    headers.watch(c, b, epoch);
    if (held) {
      Epi::template runHeld<kCluster>(a, row0, sh, hres, hgam, [&](int k, int64_t i) {
        const P s = sumInRankOrder<T, VEC, kWorld>(c.world, [&](int src) {
          if (src == c.rank) return mine[k];
          T* slot = mySlot(src, 0, i);
          const P p = lamportWait<T, VEC, true, kPollPause>(c, slot, b, src, epoch, &give_up, a.sig);
          lamportClear<T, VEC>(slot);
          return p;
        });
        if (headers.checker && k == 0) headers.peek();
        return s;
      });
    }
    for (int j = 0; j < (held ? 0 : rows); ++j) {
      const T* own = in + (row0 + j) * a.hidden;
      Epi::template run<kCluster>(a, row0 + j, sh, [&](int64_t i) {
        const P s = sumInRankOrder<T, VEC, kWorld>(c.world, [&](int src) {
          if (src == c.rank) return lamportSanitize(loadPack<T, VEC>(own + i * VEC));
          T* slot = mySlot(src, j, i);
          const P p = lamportWait<T, VEC, true, kPollPause>(c, slot, b, src, epoch, &give_up, a.sig);
          lamportClear<T, VEC>(slot);
          return p;
        });
        // The thread's first rows are in: load the header now, check it after the epilogue.
        if (headers.checker && j == 0 && i == tid) headers.peek();
        return s;
      });
    }
    // The block's last outputs are written: dependents may launch (before the header check, whose
    // load may still be in flight, and the epoch store, which only a later fused kernel reads,
    // after its grid-dependency wait, i.e. after this grid completed).
    if (u + step >= units) gridDependencyTrigger<kSync>();
    // 4. The peer's header: the same call? The rows are written by now; a mismatch fails the
    // communicator like a timeout (reported at the next call or by commGetAsyncError).
    headers.check(c, b, epoch, a.sig, &give_up);
  }
  if (threadIdx.x == 0) c.epochs[b] = epoch;
  if (first >= units) gridDependencyTrigger<kSync>();  // a block without a unit
  if constexpr (kExt) Epi::paddingLines(a);
}

// The family's kernel of a variant, a sync mode, a row layout and a world size (dispatch.cuh,
// launchFamily).
struct OneShot {
  static constexpr bool kClusterRows = true;  // the Lamport kernel can spread a row over a cluster
  static constexpr bool kHeldOperands = true;  // and hold a one-row unit's operands
  static constexpr bool kWorldTwo = true;      // and has kernels for two ranks
  template <typename T, int VEC, int kVpt, int kWorld, bool kExt, int kFormat>
  static auto lamport(bool cluster, bool held) {
    constexpr SyncMode G = SyncMode::kGridDependency;
    if constexpr (!kExt)
      if (cluster) return oneShotLamportKernel<T, VEC, kVpt, G, true, false, kWorld, false, kQuantNone>;  // holds operands by a branch
    // The extended epilogue holds a one-row unit's operands as the plain one does (rows of up to two
    // vectors per thread), but with an NVFP4 output at one vector only: at two, its two-rank kernel
    // spills 52 bytes (bf16) and ran no faster held than not (16 x 8192, H100, a local group of
    // two), where per-group FP8, spilling nothing held, ran 7% faster.
    constexpr bool kHeavyFormat = kFormat == kQuantNvfp4;
    if constexpr (kVpt <= (kHeavyFormat ? 1 : 2))
      if (held) return oneShotLamportKernel<T, VEC, kVpt, G, false, true, kWorld, kExt, kFormat>;
    return oneShotLamportKernel<T, VEC, kVpt, G, false, false, kWorld, kExt, kFormat>;
  }
  template <typename T, int VEC, int kVpt, bool kExt = false, int kFormat = kQuantNone>
  static auto kernel(SyncMode sync, bool cluster, bool held, int world) {
    if (sync == SyncMode::kGridDependency)
      return kernelForWorld(world, [&](auto w) { return lamport<T, VEC, kVpt, decltype(w)::value, kExt, kFormat>(cluster, held); });
    return oneShotFlagKernel<T, VEC, kVpt, SyncMode::kFlagBarrier, kExt, kFormat>;
  }
};

}  // namespace
}  // namespace arfusion::detail
