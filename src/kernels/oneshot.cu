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
//     4. check each peer's call header (pushed before the rows): a peer in another call (shape,
//        dtype, op) fails the communicator (sync.cuh, "Call signatures"). The flag kernel checks
//        the signature in the flag instead.
//   Every rank computes the same sums in the same order: outputs are bitwise identical on all ranks.
//   Pushing (posted remote stores) rather than pulling keeps one crossing the only cross-GPU
//   latency on the critical path.
// Two kernels, one per sync mode (sync.cuh has both protocols):
//   GridDependency -> oneShotLamportKernel: the data is its own ready flag (Lamport area, all-ones
//     = not arrived, inputs sanitised); the reader polls the packs, sums them and writes all-ones
//     back. No fence and no flag on the critical path. cudaGridDependencySynchronize() before the
//     first global access, trigger once every thread wrote its outputs (before the header check).
//   FlagBarrier -> oneShotFlagKernel: plain stores into the data area, bar.sync, release flag to
//     every peer, acquire wait, .cg payload loads. No griddepcontrol.
// Code size is latency here: a decode call runs each instruction about once, on an SM whose caches
//   have not seen the kernel, so both kernels come per vectors-per-thread (1, 2, 4: dispatchVariant)
//   and the Lamport wait inlines only its first poll (sync.cuh lamportWaitSlow); session 8 in
//   docs/PERF-NOTES.md has the measurements.
// Limits: R * (n-1) rows (and, in the Lamport area, kLamportHeaderBytes) must fit one region
//   (plan.cpp checks); n <= kMaxRanks; G <= max_blocks,
//   all G blocks must be co-resident (G <= SM count) because blocks wait on peers.
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


template <typename T, int VEC, int kVpt, SyncMode kSync>
// (kThreads, 1): without it ptxas held this kernel to 64 registers and spilled 156-364 bytes per
// thread (bf16); with it, 105 registers and no spill. 1 x 4096 4.8 -> 4.6 us, 16 x 8192 8.7 -> 8.3
// (H200 pair, session 4).
__global__ void __launch_bounds__(kThreads, 1) oneShotLamportKernel(DeviceComm c, RowArgs a, int rows_per_step) {
  static_assert(kSync == SyncMode::kGridDependency, "the Lamport one-shot is the GridDependency kernel");
  using Epi = RowEpilogue<T, VEC, kVpt, true>;
  using P = Pack<T, VEC>;
  __shared__ typename Epi::Shared sh;
  __shared__ int give_up;
  if (threadIdx.x == 0) give_up = 0;
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

  LamportHeaders headers(c);  // thread t < world-1 checks one peer's call header
  for (int64_t u = b; u < units; u += gridDim.x) {
    if (u != b) {
      lamportNextUnit();
      if (give_up) return;  // a failed header check of the previous unit
    }
    ++epoch;
    const int64_t row0 = u * R;
    const int rows = static_cast<int>(a.tokens - row0 < R ? a.tokens - row0 : R);

    // 1. Push this unit's header, then its rows, sanitised, to every peer.
    headers.push(c, b, epoch, a.sig);
    for (int idx = threadIdx.x; idx < rows * nv32; idx += kThreads) {
      const int j = idx / nv32;
      const int i = idx - j * nv32;
      storeToPeers(c, lamportSanitize(loadPack<T, VEC>(in + (row0 + j) * a.hidden + i * VEC)), [&](int peer) {
        return reinterpret_cast<T*>(lamportAddr(c, peer, b, epoch)) + (int64_t(senderIndex(c.rank, peer)) * R + j) * stride +
               i * VEC;
      });
    }

    // Every warp's pushes leave before any warp waits. The hardware runs a block's warps
    // together, but nothing in CUDA promises that a warp spinning on a peer's data lets the other
    // warps of its block run first. compute-sanitizer racecheck does not: there warp w waited for
    // rows that warp w' of the peer had not pushed yet, both ranks timed out, and the racecheck run
    // never finished (session 5). Measured free on H200 (1 x 4096 4.2 us with and without it).
    __syncthreads();

    // 2+3. Wait for each peer pack, reduce in rank order, clear, epilogue.
    T* region = reinterpret_cast<T*>(lamportAddr(c, c.rank, b, epoch));
    headers.watch(c, b, epoch);
    for (int j = 0; j < rows; ++j) {
      const T* own = in + (row0 + j) * a.hidden;
      Epi::run(a, row0 + j, sh, [&](int64_t i) {
        const P s = sumInRankOrder<T, VEC>(c.world, [&](int src) {
          if (src == c.rank) return lamportSanitize(loadPack<T, VEC>(own + i * VEC));
          T* slot = region + (int64_t(senderIndex(src, c.rank)) * R + j) * stride + i * VEC;
          const P p = lamportWait<T, VEC, true>(c, slot, b, src, epoch, &give_up, a.sig);
          lamportClear<T, VEC>(slot);
          return p;
        });
        // The thread's first rows are in: load the header now, check it after the epilogue.
        if (headers.checker && j == 0 && i == int64_t(threadIdx.x)) headers.peek();
        return s;
      });
    }
    // The block's last outputs are written: dependents may launch (before the header check, whose
    // load may still be in flight, and the epoch store, which only a later fused kernel reads,
    // after its grid-dependency wait, i.e. after this grid completed). Same-call A/B, H200 pair,
    // session 15, 3 runs: 1 x 4096 4.3-4.4 -> 4.2-4.3 us, plain allreduce 3.5 -> 3.4.
    if (u + gridDim.x >= units) gridDependencyTrigger<kSync>();
    // 4. The peer's header: the same call? The rows are written by now; a mismatch fails the
    // communicator like a timeout (reported at the next call or by commGetAsyncError).
    headers.check(c, b, epoch, a.sig, &give_up);
  }
  if (threadIdx.x == 0) c.epochs[b] = epoch;
  if (b >= units) gridDependencyTrigger<kSync>();  // a block without a unit
}

// The family's kernel of a variant and a sync mode (dispatch.cuh, launchFamily).
struct OneShot {
  template <typename T, int VEC, int kVpt>
  static auto kernel(SyncMode sync) {
    return sync == SyncMode::kGridDependency ? oneShotLamportKernel<T, VEC, kVpt, SyncMode::kGridDependency>
                                             : oneShotFlagKernel<T, VEC, kVpt, SyncMode::kFlagBarrier>;
  }
};

}  // namespace

// Vectors per thread of the in-register epilogue: the fewest the row needs (dispatchVariant). A
// kernel whose row takes 1 of 4 unrolled vectors jumps over the other 3 on every call, and at
// 1 x 4096 each such jump lands on code no cache of that SM holds yet (docs/PERF-NOTES.md, session 8).
cudaError_t launchOneShot(const DeviceComm& comm, const RowArgs& args, const FusedLaunch& launch,
                          cudaStream_t stream) {
  return launchFamily<OneShot>(comm, args, launch, stream);
}

cudaError_t forEachOneShotKernel(const KernelVisitor& visit) { return forEachFamilyKernel<OneShot>(visit); }

}  // namespace arfusion::detail
