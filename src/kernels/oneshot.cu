// One-shot fused allreduce + residual add + RMSNorm over peer memory: the decode kernel.
//
// Algorithm (n ranks, grid G, R rows per step; both derived from the shape, identical on all ranks)
//   Rows are cut into units of R consecutive rows; block b takes units b, b+G, ... For each unit,
//   at a fresh epoch e of block b (sync.cuh):
//     1. push: read the unit's R input rows once, store them into slot e%2 of block b's region on
//        every peer, at this rank's sender index: (n-1) * R * row bytes leave each rank per unit;
//     2. wait until every peer's rows arrived (one NVLink crossing);
//     3. reduce: for each row, sum the n contributions in rank order 0..n-1 in fp32 (own rows from
//        the input, peers' from the local region), round to T, and run the shared RowEpilogue
//        (residual add, RMSNorm) which writes residual_out / norm_out.
//     4. check each peer's call header (pushed after the rows): a peer in another call (shape,
//        dtype, op) fails the communicator (sync.cuh, "Call signatures"). The flag kernel checks
//        the signature in the flag instead.
//   Every rank computes the same sums in the same order: outputs are bitwise identical on all ranks.
//   Pushing (posted remote stores) rather than pulling keeps one crossing the only cross-GPU
//   latency on the critical path.
// Two kernels, one per sync mode (sync.cuh has both protocols):
//   GridDependency -> oneShotLamportKernel: the data is its own ready flag (Lamport area, all-ones
//     = not arrived, inputs sanitised); the reader polls the packs (pausing up to lamportPollPause
//     cycles between polls), sums them and writes all-ones back. No fence and no flag on the
//     critical path. cudaGridDependencySynchronize() before the first global access, trigger
//     once every thread wrote its outputs (before the header check).
//   FlagBarrier -> oneShotFlagKernel: plain stores into the data area, bar.sync, release flag to
//     every peer, acquire wait, .cg payload loads. No griddepcontrol.
// Rows over a cluster (the Lamport kernel's kCluster form; Plan::row_blocks S = 2 or 4, small
//   messages on the measured H200 pair, plan.cpp oneShotRowBlocks): the grid is clusters of S blocks
//   of kThreads / S threads, cluster k takes row k. Block p of a cluster plays threads
//   p * kThreads / S ... of the one-block layout (RowEpilogue::rowThread): it pushes, polls, clears
//   and reduces exactly those threads' vectors, in its own region (the peer's block of the same
//   index polls what it pushed), and the norm's sum of squares meets in distributed shared memory
//   (RowEpilogue::clusterScale: st.async counted by an mbarrier, no release fence). Same vectors
//   per thread, same warp sums, same order: the same bits as one block. What it buys: a decode
//   call's time grows with the bytes each SM pushes and polls (1 x 8192 on one block: 6.2 us; on 4: 5.5).
//   Limits: one row per cluster and launch (the mbarrier's one phase; launchOneShot refuses more),
//   every cluster resident at once (Topology::row_clusters).
//   Held operands: in a unit of one row (R == 1) whose row takes at most two vectors per thread
//   (kVpt <= 2), of an op that reads a residual, the kernel loads its input, residual and gamma
//   into registers before its NVLink stores and sums its own input from them. Why it pays: while
//   every SM pushes (128 blocks x 16 KB), a pushing SM's dependent L2 loads take ~790 ns instead
//   of ~185, in every PTX load form (session 21, lap.cu). One block's 8-16 KB push leaves them at
//   ~180, so the ~1 us that session 19's trace saw such a load take at 1 x 4096 has another cause
//   (open). The one-block form has a kernel of its own for it
//   (kHeld: 126 registers at bf16 8192, no spill; the branch in the general kernel spilled), the
//   cluster form a branch (its own kernel measured 0.1-0.2 us slower at 4-16 x 4096). H200 pair,
//   bf16 Auto, same call, 3 runs: 1 x 4096 3.7-3.8 -> 3.6-3.7 us, 1 x 8192 5.3-5.4 -> 5.0-5.1
//   (cluster, session 20 call 1); 16 x 8192 6.6 -> 6.0, 64 x 8192 9.8 -> 9.1, 128 x 8192
//   12.8-12.9 -> 12.2-12.4 (one block per row, call 3). The plain allreduce does not hold its
//   input: at 1-8 x 8192 that was 0.4-0.7 us slower (call 2).
// Code size is latency here: a decode call runs each instruction about once, on an SM whose caches
//   have not seen the kernel, so both kernels come per vectors-per-thread (1, 2, 4: dispatchVariant)
//   and the Lamport wait inlines only its first poll (sync.cuh lamportWaitSlow); session 8 in
//   docs/PERF-NOTES.md has the measurements.
// Two ranks: the Lamport kernel also comes compiled for a world of two (kWorld = 2: the pushes and
//   the rank-order sums unrolled twice instead of kMaxRanks = 8 times, each copy with its inlined
//   poll), launched whenever the communicator has two ranks (every rank alike; kWorld = 0 serves
//   the other sizes). Same protocol, order and bits; its PTX is 2.2-3x smaller. H200 pair, bf16,
//   Auto, same call, 3 runs (session 25 call 7): 1 x 4096 3.6-3.7 -> 3.3 us, 8 x 4096 4.2 -> 3.6,
//   1 x 8192 5.0-5.1 -> 4.2-4.3, 8 x 8192 5.6-5.7 -> 4.8, 64 x 8192 8.9 -> 8.4-8.5, 128 x 8192
//   11.8-12.0 -> 11.5-11.6, plain allreduce 128 x 8192 10.3 -> 9.6-9.7; bf16 sweeps to 1 MiB
//   geomean 0.88-0.91. A build with kMaxRanks = 2 everywhere had gained at 1-8 rows but lost
//   0.6-1.3 us at 32-128 (call 4); its PTX copies the two-entry DeviceComm arrays to local memory
//   for the dynamic peer index (likely cause: each peer address then comes from a local load that
//   may queue behind the NVLink stores; not measured). Here the arrays keep kMaxRanks entries and
//   the kernels have no local frame.
// Limits: R * (n-1) rows (and, in the Lamport area, kLamportHeaderBytes) must fit one region
//   (plan.cpp checks); n <= kMaxRanks; G <= max_blocks,
//   all G blocks must be co-resident (G <= SM count) because blocks wait on peers.
#include <climits>

#include "dispatch.cuh"
#include "norm_epilogue.cuh"
#include "sync.cuh"

namespace arfusion::detail {
namespace {

template <typename T, int VEC, int kVpt, SyncMode kSync>
__global__ void __launch_bounds__(kThreads, 1) oneShotFlagKernel(DeviceComm c, RowArgs a, int rows_per_step) {
  using Epi = RowEpilogue<T, VEC, kVpt, true>;
  using P = Pack<T, VEC>;
  __shared__ typename Epi::Shared sh;
  gridDependencyWait<kSync>();

  const int b = blockIdx.x;
  const int R = rows_per_step;
  const int64_t nvec = a.hidden / VEC;
  const int nv32 = static_cast<int>(nvec);  // push-loop index in 32 bits: plan.cpp caps a step at 1 GiB
  const int64_t stride = strideElems<T>(a.hidden);
  const T* in = static_cast<const T*>(a.input);
  const int64_t units = (a.tokens + R - 1) / R;
  uint32_t epoch = c.epochs[b];

  for (int64_t u = b; u < units; u += gridDim.x) {
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
  gridDependencyTrigger<kSync>();
}


// kCluster: rows over a cluster. kHeld (one block per row only): the held-operand kernel (header
// comment), launched only for units of one row (R == 1) of an op that reads a residual
// (dispatch.cuh launchFamily); it has no other path. kWorld: 2 for the kernels of two-rank
// communicators, 0 for any world size (header comment, "Two ranks").
template <typename T, int VEC, int kVpt, SyncMode kSync, bool kCluster, bool kHeld, int kWorld>
// (kThreads, 1): without it ptxas held this kernel to 64 registers and spilled 156-364 bytes per
// thread (bf16); with it, 105 registers and no spill. 1 x 4096 4.8 -> 4.6 us, 16 x 8192 8.7 -> 8.3
// (H200 pair, session 4).
// A cluster kernel runs blocks of kThreads / row_blocks <= kThreads / 2 threads: twice the
// registers, and no spill (at kThreads its bf16 kernels spilled 4-20 bytes).
__global__ void __launch_bounds__(kCluster ? kThreads / 2 : kThreads, 1) oneShotLamportKernel(DeviceComm c, RowArgs a, int rows_per_step) {
  static_assert(kSync == SyncMode::kGridDependency, "the Lamport one-shot is the GridDependency kernel");
  static_assert(!kHeld || (kVpt <= 2 && !kCluster), "held operands: one block per row, at most two vectors per thread");
  using Epi = RowEpilogue<T, VEC, kVpt, true>;
  using P = Pack<T, VEC>;
  constexpr int kPollPause = lamportPollPause(kVpt, kWorld);
  __shared__ typename Epi::Shared sh;
  __shared__ int give_up;
  if (threadIdx.x == 0) give_up = 0;
  if (kCluster && a.op == Op::kAllReduceAddRMSNorm) Epi::clusterStart(sh);  // only the norm needs the cluster
  gridDependencyWait<kSync>();
  __syncthreads();

  const int b = blockIdx.x;
  const int R = rows_per_step;
  const int64_t nvec = a.hidden / VEC;
  const int nv32 = static_cast<int>(nvec);  // push-loop index in 32 bits: plan.cpp caps a step at 1 GiB
  const int64_t stride = strideElems<T>(a.hidden);
  const T* in = static_cast<const T*>(a.input);
  const int64_t units = (a.tokens + R - 1) / R;
  uint32_t epoch = c.epochs[b];
  // A row over a cluster: cluster k takes units k, k + clusters, ...; its blocks share each row.
  const int64_t first = kCluster ? b / (kThreads / blockDim.x) : b;         // this block's cluster
  const int64_t step = kCluster ? gridDim.x * blockDim.x / kThreads : gridDim.x;  // clusters in the grid
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
      // give up at once): one that left would strand the others in the norm's exchange. (Today a
      // cluster takes one unit per launch: launchOneShot.)
      if (give_up && !kCluster) return;
    }
    ++epoch;
    const int64_t row0 = u * R;
    const int rows = static_cast<int>(a.tokens - row0 < R ? a.tokens - row0 : R);

    // 1. Push this unit's rows, sanitised, then its header, to every peer. The header goes last:
    // before the rows, thread 0's store of it waited for the epoch load and held its warp's input
    // loads back (H200 pair, session 19, Auto, same call, 3 runs: 4 x 4096 4.1-4.4 -> 3.9-4.0 us,
    // 32 x 8192 7.2-7.6 -> 6.9-7.0; 1 x 4096 within noise, 3.8-4.0 -> 3.7-3.8).
    auto push = [&](int j, int i) {
      storeToPeers<kWorld>(c, lamportSanitize(loadPack<T, VEC>(in + (row0 + j) * a.hidden + i * VEC)),
                   [&](int peer) { return peerSlot(peer, j, i); });
    };
    // Held operands (header comment): the row's input, residual and gamma in registers before the
    // NVLink stores. Same vectors per thread as the loops below, so the peers see the same layout.
    // (The kHeld kernel's rows fit by dispatchVariant's choice of kVpt <= 2.)
    const bool held = kHeld || (kCluster && kVpt <= 2 && rows == 1 && nvec <= int64_t(kThreads) * kVpt && a.op != Op::kAllReduce);
    P mine[kVpt], hres[kVpt], hgam[kVpt];
    if (held) {
#pragma unroll
      for (int k = 0; k < kVpt; ++k) {
        const int64_t i = tid + int64_t(k) * kThreads;
        if (i < nvec) {
          mine[k] = lamportSanitize(loadPack<T, VEC>(in + row0 * a.hidden + i * VEC));
          hres[k] = loadPack<T, VEC>(static_cast<const T*>(a.residual_in) + row0 * a.hidden + i * VEC);
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

    // Every warp's pushes leave before any warp waits. The hardware runs a block's warps
    // together, but nothing in CUDA promises that a warp spinning on a peer's data lets the other
    // warps of its block run first. compute-sanitizer racecheck does not: there warp w waited for
    // rows that warp w' of the peer had not pushed yet, both ranks timed out, and the racecheck run
    // never finished (session 5). Measured free on H200 (1 x 4096 4.2 us with and without it).
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
    // after its grid-dependency wait, i.e. after this grid completed). Same-call A/B, H200 pair,
    // session 15, 3 runs: 1 x 4096 4.3-4.4 -> 4.2-4.3 us, plain allreduce 3.5 -> 3.4.
    if (u + step >= units) gridDependencyTrigger<kSync>();
    // 4. The peer's header: the same call? The rows are written by now; a mismatch fails the
    // communicator like a timeout (reported at the next call or by commGetAsyncError).
    headers.check(c, b, epoch, a.sig, &give_up);
  }
  if (threadIdx.x == 0) c.epochs[b] = epoch;
  if (first >= units) gridDependencyTrigger<kSync>();  // a block without a unit
}

// The family's kernel of a variant, a sync mode, a row layout and a world size (dispatch.cuh,
// launchFamily).
struct OneShot {
  static constexpr bool kClusterRows = true;  // the Lamport kernel can spread a row over a cluster
  static constexpr bool kHeldOperands = true;  // and hold a one-row unit's operands (header comment)
  static constexpr bool kWorldTwo = true;      // and has kernels for two ranks (header comment)
  template <typename T, int VEC, int kVpt, int kWorld>
  static auto lamport(bool cluster, bool held) {
    constexpr SyncMode G = SyncMode::kGridDependency;
    if (cluster) return oneShotLamportKernel<T, VEC, kVpt, G, true, false, kWorld>;  // holds by a branch (header comment)
    if constexpr (kVpt <= 2)
      if (held) return oneShotLamportKernel<T, VEC, kVpt, G, false, true, kWorld>;
    return oneShotLamportKernel<T, VEC, kVpt, G, false, false, kWorld>;
  }
  template <typename T, int VEC, int kVpt>
  static auto kernel(SyncMode sync, bool cluster, bool held, int world) {
    if (sync == SyncMode::kGridDependency)
      return kernelForWorld(world, [&](auto w) { return lamport<T, VEC, kVpt, decltype(w)::value>(cluster, held); });
    return oneShotFlagKernel<T, VEC, kVpt, SyncMode::kFlagBarrier>;
  }
};

}  // namespace

// Vectors per thread of the in-register epilogue: the fewest the row needs (dispatchVariant). A
// kernel whose row takes 1 of 4 unrolled vectors jumps over the other 3 on every call, and at
// 1 x 4096 each such jump lands on code no cache of that SM holds yet (docs/PERF-NOTES.md, session 8).
cudaError_t launchOneShot(const DeviceComm& comm, const RowArgs& args, const FusedLaunch& launch,
                          cudaStream_t stream) {
  // A row over a cluster: the Lamport kernel, a power of two of blocks up to kMaxRowBlocks, one
  // row per cluster and launch (the norm's mbarrier serves one row).
  const int rb = launch.row_blocks;
  if (rb > 1 && (!launch.lamport || rb > kMaxRowBlocks || (rb & (rb - 1)) != 0 || launch.rows_per_step != 1 ||
                 launch.blocks % rb != 0 || args.tokens > launch.blocks / rb))
    return cudaErrorInvalidConfiguration;
  return launchFamily<OneShot>(comm, args, launch, stream);
}

cudaError_t forEachOneShotKernel(const KernelVisitor& visit) { return forEachFamilyKernel<OneShot>(visit); }

cudaError_t oneShotMaxClusters(int row_blocks, int* clusters) {
  int fewest = INT_MAX;
  const cudaError_t e = forEachVariant([&](auto v) {
    using V = decltype(v);
    const FusedConfig c(false, row_blocks, row_blocks, nullptr);  // one cluster; no stream attribute
    for (int world : kKernelWorlds) {  // the two-rank kernels and the others
      int n = 0;
      const cudaError_t err = cudaOccupancyMaxActiveClusters(
          &n, OneShot::kernel<typename V::type, V::vec, V::vpt>(SyncMode::kGridDependency, true, false, world), &c.cfg);
      if (err != cudaSuccess) return err;
      fewest = n < fewest ? n : fewest;
    }
    return cudaSuccess;
  });
  *clusters = e == cudaSuccess ? fewest : 0;
  return e;
}

}  // namespace arfusion::detail
