// Two-shot fused allreduce + residual add + RMSNorm over peer memory: the prefill kernel.
// docs/design.md, "Two-shot", has the reasoning, the slot-reuse proof and the measurements.
//
// Algorithm (n ranks, grid G, R rows per rank per step; derived from the shape, identical on all
// ranks). Rows are cut into units of n*R rows; in a unit, rank r owns rows [r*R, (r+1)*R). Block b
// takes units b, b+G, ...; each unit is one epoch e of block b (sync.cuh). Slot e%2 of its region
// has an RS part (rows peers send to their owner) and an AG part (sums owners send back).
//   twoShotKernel (flag protocol: every FlagBarrier call, and GridDependency calls whose blocks take
//   several units or whose unit does not fit a Lamport region), per unit:
//     1. wait phase 0 (the unit's reduce-scatter, pushed one unit ahead);
//     2. reduce the owned rows in rank order (fp32), push each sum to every peer's AG part as it is
//        produced, run the RowEpilogue on it; signal phase 1;
//     3. push the next unit's reduce-scatter, so that it overlaps steps 4-5;
//     4. wait phase 1;  5. run the RowEpilogue on the peer-owned rows from the gathered sums.
//   Steps 3-5 split between the block's halves where the row fits (warps 0-7 push, warps 8-15 wait
//   and finish, each half on its own named barrier); the last unit's peer rows go two at a time.
//   ARFUSION_TWO_SHOT_SPLIT=0 turns the split off (compute-sanitizer racecheck misreads it).
//   twoShotLamportKernel (GridDependency, one unit per block that fits a Lamport region): the same
//   rows, owners and sums, the data its own flag, no fence and no flag crossing (comment below).
// Gathering sums, not outputs, moves 2(n-1)/n * S bytes per rank; every rank runs the epilogue on
// its own residual. One owner reduces each row, so results are bitwise identical on all ranks.
// Memory ordering: as the one-shot (sync.cuh), once per phase; two slots per block, and a phase-0
//   flag of e also frees the peer's RS part of slot (e+1)%2, its phase-1 wait the AG part.
// Limits: 2 (n-1) R rows fit one region (plan.cpp); G <= SM count (co-residency). Tokens < n, or
//   not a multiple of n*R: owners of missing rows only take part in the flags.
// Instantiated by twoshot.cu (the plain epilogue), twoshot_ext.cu and twoshot_ext_formats.cu (the
// extended one: a kernel without a quantized output, one per format, one for every format,
// kOnlyFormat; perFormatTwoShot below).
#pragma once

#include "dispatch.cuh"
#include "norm_epilogue.cuh"
#include "sync.cuh"

namespace arfusion::detail {
namespace {

// residual_in's row `row`, or null when the op reads no residual.
template <typename T>
__device__ __forceinline__ const T* residualRow(const RowArgs& a, int64_t row) {
  return a.op == Op::kAllReduce ? nullptr : static_cast<const T*>(a.residual_in) + row * a.hidden;
}

// Rows of a unit's part that starts at row `first`: R, fewer in the last unit, 0 past the end.
__device__ __forceinline__ int partRows(int64_t tokens, int64_t first, int R) {
  const int64_t left = tokens - first;
  return left <= 0 ? 0 : static_cast<int>(left < R ? left : R);
}

// The reduce-scatter of the unit starting at row unit0: each peer's R owned rows go from the input
// into this rank's part of `regionOf(peer)` (a region of that peer; sanitised for the Lamport
// protocol), by threads tid = 0 .. threads-1. Push-loop index math in 32 bits (a 64-bit division
// is a long software routine): R rows fit a region of at most 1 GiB (plan.cpp), so R * vectors per
// row < 2^31.
template <typename T, int VEC, bool kLamport, int kWorld = 0, typename RegionOf>
__device__ __forceinline__ void pushToOwners(const DeviceComm& c, const RowArgs& a, int64_t unit0, int R,
                                             int64_t stride, RegionOf regionOf, int tid = threadIdx.x,
                                             int threads = kThreads) {
  const int n = worldOf<kWorld>(c);
  const int nv32 = static_cast<int>(a.hidden / VEC);
  const T* in = static_cast<const T*>(a.input);
  for (int d = 1; d < n; ++d) {
    const int peer = (c.rank + d) % n;
    const int64_t first = unit0 + int64_t(peer) * R;
    const int rows = partRows(a.tokens, first, R);
    T* dst = regionOf(peer) + int64_t(senderIndex(c.rank, peer)) * R * stride;
    for (int idx = tid; idx < rows * nv32; idx += threads) {
      const int j = idx / nv32;
      const int i = idx - j * nv32;
      const Pack<T, VEC> v = loadPack<T, VEC>(in + (first + j) * a.hidden + i * VEC);
      storePackPeer<T, VEC>(dst + j * stride + i * VEC, kLamport ? lamportSanitize(v) : v);
    }
  }
}

template <typename T, int VEC, int kVpt, SyncMode kSync, int kWorld, bool kExt, int kOnlyFormat = kAnyQuant>
__global__ void __launch_bounds__(kThreads, 1) twoShotKernel(DeviceComm c, RowArgs a, int rows_per_step) {
  using Epi = RowEpilogue<T, VEC, kVpt, true, kExt, kOnlyFormat>;
  using P = Pack<T, VEC>;
  // The split of steps 3-5 (header), in the kernels whose half-block epilogue fits the registers:
  // two vectors per thread at most (kVpt 4 spilled), or the scalar path (four scalars per thread).
  constexpr bool kSplit = kVpt <= 2 || VEC == 1;
  constexpr int kPushBarrier = 1, kFinishBarrier = 2, kHalf = kThreads / 2;
  __shared__ typename Epi::Shared sh;
  __shared__ typename Epi::Shared sh2;  // the second half's, when both halves finish rows (last unit)
  __shared__ int failed;  // the finishing half of a split block saw a wait fail
  if (threadIdx.x == 0) failed = 0;
  gridDependencyWait<kSync>();

  const int b = blockIdx.x;
  const int R = rows_per_step;
  const int n = worldOf<kWorld>(c);
  const int64_t stride = strideElems<T>(a.hidden);
  const int64_t ag_offset = int64_t(n - 1) * R * stride;  // AG part after the RS part
  const T* in = static_cast<const T*>(a.input);
  const int64_t units = (a.tokens + int64_t(n) * R - 1) / (int64_t(n) * R);
  // Steps 3-5 split in this call (header): the kernel can (kSplit), the communicator lets it, and
  // the row fits the half-block epilogue's vectors per thread.
  const bool split = kSplit && c.two_shot_split && a.hidden / VEC <= int64_t(kThreads) * kVpt;
  uint32_t epoch = c.epochs[b];

  // RS(u, e) by threads 0 .. threads-1: the whole block, or the pushing half of a split block (on
  // barrier 1). Each peer's rows of unit u go to that peer (slot e%2, RS part); signal phase 0.
  auto pushScatter = [&](int64_t u, uint32_t e, int threads) {
    pushToOwners<T, VEC, false, kWorld>(c, a, u * n * R, R, stride,
                                [&](int peer) { return reinterpret_cast<T*>(regionAddr(c, peer, b, e)); },
                                threadIdx.x, threads);
    if (threads == kThreads) __syncthreads();  // as signalPeers
    else groupBarrier(kPushBarrier, threads);
    if (threadIdx.x < unsigned(n - 1)) signalPeer(c, 0, b, e, a.sig, threadIdx.x);
  };
  // Step 5 for the peers' rows of the unit at unit0 (region: this rank's slot of its epoch), by
  // the whole block (mode 0), by the finishing half of a split block (mode 1: every row, barrier 2),
  // or by half 0 / 1 of the block (modes 2 / 3: every other row, barrier 1 / 2; the last unit,
  // two rows in flight). Thread t of the group.
  enum Finish { kWholeBlock, kSplitHalf, kLastUnitHalf0, kLastUnitHalf1 };  // the modes above
  auto finishPeerRows = [&](int64_t unit0, const T* region, int mode, int t) {
    const int step = mode >= kLastUnitHalf0 ? 2 : 1;
    for (int d = 1; d < n; ++d) {
      const int owner = (c.rank + d) % n;
      const int64_t first = unit0 + int64_t(owner) * R;
      const int rows = partRows(a.tokens, first, R);
      const T* sums = region + ag_offset + int64_t(senderIndex(owner, c.rank)) * R * stride;
      for (int j = mode == kLastUnitHalf1 ? 1 : 0; j < rows; j += step) {
        if (j + step < rows && t < 2)  // the group's next row's sum and residual into L2
          prefetchRowL2<T, VEC>(t == 0 ? sums + (j + step) * stride : residualRow<T>(a, first + j + step), a.hidden);
        auto sum = [&](int64_t i) { return loadPackCg<T, VEC>(sums + j * stride + i * VEC); };
        if constexpr (kSplit) {
          if (mode != kWholeBlock) {
            Epi::runOnHalf(a, first + j, mode == kLastUnitHalf1 ? sh2 : sh, t,
                           mode == kLastUnitHalf0 ? kPushBarrier : kFinishBarrier, sum);
            continue;
          }
        }
        Epi::run(a, first + j, sh, sum);
      }
    }
  };

  if (b < units) pushScatter(b, epoch + 1, kThreads);
  for (int64_t u = b; u < units; u += gridDim.x) {
    ++epoch;
    const int64_t unit0 = u * n * R;
    // 1. Wait for this unit's reduce-scatter.
    if (!waitPeers(c, 0, b, epoch, a.sig)) return;

    // 2. Reduce the owned rows, all-gather each sum as it is produced, epilogue locally.
    T* region = reinterpret_cast<T*>(regionAddr(c, c.rank, b, epoch));
    const int64_t mine0 = unit0 + int64_t(c.rank) * R;
    const int mine = partRows(a.tokens, mine0, R);
    for (int j = 0; j < mine; ++j) {
      const T* own = in + (mine0 + j) * a.hidden;
      // The next owned row's contributions (own input, each peer's part) and residual into L2.
      if (j + 1 < mine && threadIdx.x <= n) {
        const int src = threadIdx.x;
        prefetchRowL2<T, VEC>(src == n      ? residualRow<T>(a, mine0 + j + 1)
                              : src == c.rank ? own + a.hidden
                                              : region + (int64_t(senderIndex(src, c.rank)) * R + j + 1) * stride,
                              a.hidden);
      }
      Epi::run(a, mine0 + j, sh, [&](int64_t i) {
        const P s = sumInRankOrder<T, VEC, kWorld>(n, [&](int src) {
          return src == c.rank ? loadPack<T, VEC>(own + i * VEC)
                               : loadPackCg<T, VEC>(region + (int64_t(senderIndex(src, c.rank)) * R + j) * stride + i * VEC);
        });
        storeToPeers<kWorld>(c, s, [&](int peer) {
          return reinterpret_cast<T*>(regionAddr(c, peer, b, epoch)) + ag_offset +
                 (int64_t(senderIndex(c.rank, peer)) * R + j) * stride + i * VEC;
        });
        return s;
      });
    }
    const bool next = u + gridDim.x < units;
    signalPeers(c, 1, b, epoch, a.sig, !(c.test_skip_ag_signal && next));  // (the test hook: kernels.h)
    if (split && next) {
      // 3-5 split: warps 0-7 push the next unit's reduce-scatter and signal it (barrier 1) while
      // warps 8-15 wait for this unit's sums and finish the peers' rows (barrier 2).
      if (threadIdx.x < kHalf) {
        pushScatter(u + gridDim.x, epoch + 1, kHalf);
      } else {
        const int t = threadIdx.x - kHalf;
        if (t < n - 1 && !waitPeer(c, 1, b, epoch, a.sig, t)) atomicOr(&failed, 1);
        groupBarrier(kFinishBarrier, kHalf);  // after the polling lanes rejoined (groupBarrier)
        if (failed == 0) finishPeerRows(unit0, region, kSplitHalf, t);  // written before barrier 2
      }
      __syncthreads();
      if (failed) return;
      continue;
    }
    // 3. The next unit's reduce-scatter goes out now, so its transfer overlaps this unit's all-gather
    // wait (the header says why slot (epoch+1)%2's RS part is free here).
    if (next) pushScatter(u + gridDim.x, epoch + 1, kThreads);
    // 4. Wait for the gathered sums.
    if (!waitPeers(c, 1, b, epoch, a.sig)) return;
    // 5. Epilogue of the peers' rows from the gathered sums: with the split, the last unit's rows
    // two at a time, one per half-block.
    if (split) {
      const int h = threadIdx.x < kHalf ? 0 : 1;
      finishPeerRows(unit0, region, kLastUnitHalf0 + h, threadIdx.x - h * kHalf);
    } else {
      finishPeerRows(unit0, region, kWholeBlock, threadIdx.x);
    }
  }
  if (threadIdx.x == 0) c.epochs[b] = epoch;
  gridDependencyTrigger<kSync>();
}

// The Lamport two-shot: the GridDependency kernel of a call whose grid gives every block one unit
// and whose unit fits a Lamport region (plan.h usesLamport, from the shape: every rank alike).
// Same rows, owners and rank-order sums as twoShotKernel, but the data is its own flag (sync.cuh,
// Lamport protocol), in two parts of slot e%2 of block b's Lamport region: RS (the peers' rows of
// this rank's owned rows) and AG (the owners' sums of the other rows).
//   1. push each peer's owned rows, sanitised, into its RS part, then the header (as the one-shot);
//   2. for each owned row, each vector: poll every peer's pack, clear it, sum in rank order, sanitise
//      the sum, push it into every peer's AG part, run the RowEpilogue on it;
//   3. for each peer-owned row, each vector: poll the owner's sum, clear it, RowEpilogue;
//   4. check and clear each peer's header (as the Lamport one-shot).
// No fence and no flag: an owner reduces a vector as soon as it arrived and its sum leaves at once,
// so the all-gather overlaps the reduce-scatter instead of waiting for every row of it to drain and
// for a flag to cross. Every rank runs the epilogue on the same (sanitised) sum: bitwise identical.
// Slot reuse as the Lamport one-shot's; one unit per block, so no reuse inside a call.
// Limits: 2 (n-1) R rows + kLamportHeaderBytes fit a Lamport region; units <= G (plan.cpp usesLamport):
// a block runs only unit b, so a grid with more units would leave rows unwritten.
template <typename T, int VEC, int kVpt, SyncMode kSync, int kWorld, bool kExt, int kOnlyFormat = kAnyQuant>
__global__ void __launch_bounds__(kThreads, 1) twoShotLamportKernel(DeviceComm c, RowArgs a, int rows_per_step) {
  static_assert(kSync == SyncMode::kGridDependency, "the Lamport two-shot is a GridDependency kernel");
  using Epi = RowEpilogue<T, VEC, kVpt, false, kExt, kOnlyFormat>;
  using P = Pack<T, VEC>;
  constexpr int kPollPause = lamportPollPause(kVpt, kWorld);
  __shared__ typename Epi::Shared sh;
  __shared__ int give_up;
  if (threadIdx.x == 0) give_up = 0;
  gridDependencyWait<kSync>();
  __syncthreads();

  const int b = blockIdx.x;
  const int R = rows_per_step;
  const int n = worldOf<kWorld>(c);
  const int64_t stride = strideElems<T>(a.hidden);
  const int64_t ag_offset = int64_t(n - 1) * R * stride;
  const T* in = static_cast<const T*>(a.input);
  const uint32_t epoch = c.epochs[b] + 1;
  const int64_t unit0 = int64_t(b) * n * R;  // this block's only unit

  // 1. The reduce-scatter, then the header (the Lamport one-shot says why in that order).
  LamportHeaders headers(c);  // thread t < n-1 checks one peer's call header
  pushToOwners<T, VEC, true, kWorld>(c, a, unit0, R, stride,
                             [&](int peer) { return reinterpret_cast<T*>(lamportAddr(c, peer, b, epoch)); });
  headers.push(c, b, epoch, a.sig);
  // Every warp's pushes leave before any warp waits (as in the Lamport one-shot).
  __syncthreads();

  // 2. The owned rows: reduce as the peers' packs arrive, all-gather each sum at once, epilogue.
  T* region = reinterpret_cast<T*>(lamportAddr(c, c.rank, b, epoch));
  headers.watch(c, b, epoch);
  const int64_t mine0 = unit0 + int64_t(c.rank) * R;
  const int mine = partRows(a.tokens, mine0, R);
  for (int j = 0; j < mine; ++j) {
    const T* own = in + (mine0 + j) * a.hidden;
    if (j + 1 < mine && threadIdx.x < 2)  // the next row's own input and residual into L2
      prefetchRowL2<T, VEC>(threadIdx.x == 0 ? own + a.hidden : residualRow<T>(a, mine0 + j + 1), a.hidden);
    Epi::run(a, mine0 + j, sh, [&](int64_t i) {
      const P s = lamportSanitize(sumInRankOrder<T, VEC, kWorld>(n, [&](int src) {
        if (src == c.rank) return lamportSanitize(loadPack<T, VEC>(own + i * VEC));
        T* slot = region + (int64_t(senderIndex(src, c.rank)) * R + j) * stride + i * VEC;
        const P v = lamportWait<T, VEC, true, kPollPause>(c, slot, b, src, epoch, &give_up, a.sig);
        lamportClear<T, VEC>(slot);
        return v;
      }));
      // A wait returns data that did not arrive only after raising give_up (timeout, abort,
      // mismatch; sync.cuh lamportWaitSlow). Once it is up no sum is pushed, so the peers fail
      // (time out) too instead of finishing the call on sums made of sentinels.
      if (atomicAdd(&give_up, 0) == 0)  // an atomic read, as lamportWaitSlow's (racecheck)
        storeToPeers<kWorld>(c, s, [&](int peer) {
          return reinterpret_cast<T*>(lamportAddr(c, peer, b, epoch)) + ag_offset +
                 (int64_t(senderIndex(c.rank, peer)) * R + j) * stride + i * VEC;
        });
      if (headers.checker && j == 0 && i == int64_t(threadIdx.x)) headers.peek();
      return s;
    });
  }

  // 3. The peers' rows from their owners' sums.
  for (int d = 1; d < n; ++d) {
    const int owner = (c.rank + d) % n;
    const int64_t first = unit0 + int64_t(owner) * R;
    const int rows = partRows(a.tokens, first, R);
    T* sums = region + ag_offset + int64_t(senderIndex(owner, c.rank)) * R * stride;
    for (int j = 0; j < rows; ++j) {
      if (j + 1 < rows && threadIdx.x == 0) prefetchRowL2<T, VEC>(residualRow<T>(a, first + j + 1), a.hidden);
      Epi::run(a, first + j, sh, [&](int64_t i) {
        T* slot = sums + j * stride + i * VEC;
        const P v = lamportWait<T, VEC, true, kPollPause>(c, slot, b, owner, epoch, &give_up, a.sig);
        lamportClear<T, VEC>(slot);
        return v;
      });
    }
  }

  // The outputs are written: dependents may launch (as the Lamport one-shot, before the header
  // check and the epoch store).
  gridDependencyTrigger<kSync>();
  // 4. Each peer's header: the same call? (As the Lamport one-shot.)
  headers.check(c, b, epoch, a.sig, &give_up);
  if (threadIdx.x == 0) c.epochs[b] = epoch;
}

// The two-shot's extended kernels: one without a quantized output; one per format for 16-bit rows
// of up to 8192 elements on two ranks (a format's body alone in the kernel's registers spills
// less: calls 4-19% faster than with the kernel for every format, two ranks on one H100 or H200);
// and one for every format (kAnyQuant) for the other quantizing calls (fp32 rows, wider rows, other
// world sizes), whose kernels per format would take the build past what CI affords (three
// architectures on two cores). The kernels per format build in a file of their own
// (twoshot_ext_formats.cu), the others in twoshot_ext.cu.
// Whether a call with quantized format `format` on `world` ranks, at `vpt` vectors per thread
// (dispatch.cuh, fewestVectorsPerThread), takes its format's kernel: the host's routing
// (launchTwoShotExtended) and the kernels' instantiation (twoShotFormat) both ask it. Rows of four
// vectors per thread (16-bit hidden > 8192) keep the kernel for every format: unmeasured there.
constexpr bool perFormatTwoShot(int format, int world, bool fp32, int vpt) {
  return format != kQuantNone && world == 2 && !fp32 && vpt <= 2;
}
// The format a two-shot kernel of element type T, kVpt `vpt` and kWorld `world` (0: any size) is
// compiled for (RowEpilogue's kOnlyFormat), for an extended call of quantized format `format`. The
// plain epilogue ignores it (kAnyQuant, the template's default).
template <typename T>
constexpr int twoShotFormat(bool ext, int format, int world, int vpt) {
  if (!ext) return kAnyQuant;
  if (format == kQuantNone) return kQuantNone;
  return perFormatTwoShot(format, world, std::is_same_v<T, float>, vpt) ? format : kAnyQuant;
}
// Which of the two-shot's kernels a translation unit compiles: all of them (the plain epilogue's
// file), the kernels per format, or the extended ones shared by several formats or none.
enum class TwoShotSet { kAll, kPerFormat, kShared };
constexpr bool holds(TwoShotSet set, int format) {
  const bool one_format = format != kAnyQuant && format != kQuantNone;
  return set == TwoShotSet::kAll || (set == TwoShotSet::kPerFormat) == one_format;
}
using TwoShotKernelPtr = void (*)(DeviceComm, RowArgs, int);

// The family's kernel of a variant and a sync mode (dispatch.cuh, launchFamily); null for a kernel
// that kSet leaves to another file. The Lamport family has one kernel per variant (GridDependency);
// forEachFamilyKernel visits it once per sync mode, which preloads it twice, harmlessly.
template <bool kLamport, TwoShotSet kSet>
struct TwoShotFamily {
  static constexpr bool kClusterRows = false;  // one block per row
  static constexpr bool kHeldOperands = false;
  static constexpr bool kWorldTwo = true;  // kernels for two ranks, as the one-shot's
  template <typename T, int VEC, int kVpt, bool kExt = false, int kFormat = kQuantNone>
  static TwoShotKernelPtr kernel(SyncMode sync, bool /*cluster*/, bool /*held*/, int world) {
    return kernelForWorld(world, [&](auto w) -> TwoShotKernelPtr {
      constexpr int W = decltype(w)::value, F = twoShotFormat<T>(kExt, kFormat, W, kVpt);
      constexpr SyncMode kGrid = SyncMode::kGridDependency;
      if constexpr (!holds(kSet, F)) return nullptr;
      else if constexpr (kLamport) return twoShotLamportKernel<T, VEC, kVpt, kGrid, W, kExt, F>;
      else return sync == kGrid ? twoShotKernel<T, VEC, kVpt, kGrid, W, kExt, F>
                                : twoShotKernel<T, VEC, kVpt, SyncMode::kFlagBarrier, W, kExt, F>;
    });
  }
};
template <TwoShotSet kSet = TwoShotSet::kAll>
using TwoShot = TwoShotFamily<false, kSet>;
template <TwoShotSet kSet = TwoShotSet::kAll>
using TwoShotLamport = TwoShotFamily<true, kSet>;

// The launch (the Lamport family where the plan chose it) and the kernel enumeration of the
// kernels of set kSet with epilogue kEpi, as each of the two-shot's files exports them.
template <TwoShotSet kSet, Epilogues kEpi>
cudaError_t launchTwoShotSet(const DeviceComm& comm, const RowArgs& args, const FusedLaunch& launch,
                             cudaStream_t stream) {
  if (launch.lamport) return launchFamily<TwoShotLamport<kSet>, kEpi>(comm, args, launch, stream);
  return launchFamily<TwoShot<kSet>, kEpi>(comm, args, launch, stream);
}
template <TwoShotSet kSet, Epilogues kEpi>
cudaError_t forEachTwoShotSetKernel(const KernelVisitor& visit) {
  const cudaError_t e = forEachFamilyKernel<TwoShot<kSet>, kEpi>(visit);
  return e != cudaSuccess ? e : forEachFamilyKernel<TwoShotLamport<kSet>, kEpi>(visit);
}

}  // namespace
}  // namespace arfusion::detail
