// Two-shot fused allreduce + residual add + RMSNorm over peer memory: the prefill kernel.
//
// Algorithm (n ranks, grid G, R rows per rank per step; derived from the shape, identical on all
// ranks). Rows are cut into units of n*R rows; inside a unit, rank r owns rows [r*R, (r+1)*R).
// Block b takes units b, b+G, ...; each unit is one epoch e of block b (sync.cuh). Slot e%2 of
// block b's region has two parts: RS (rows peers send to their owner) and AG (sums owners send back).
//   RS(u, e): push the unit's rows owned by each peer into that peer's RS part; signal phase 0.
//   Per unit, in order:
//   1. wait phase 0 of e;
//   2. reduce the owned rows in rank order 0..n-1 (fp32, rounded to T), push each reduced vector to
//      every peer's AG part as it is produced, and run the RowEpilogue on it locally;
//      signal phase 1 of e;
//   3. RS(next unit, e+1): the next transfer leaves now and overlaps steps 4-5 (pipelining);
//   4. wait phase 1 of e;
//   5. run the RowEpilogue on every peer-owned row of the unit, from the gathered sums.
//   Steps 3-5 split when a next unit exists (rows of at most two vectors per thread, or of at most
//   kThreads * 4 elements on the scalar path): warps 0-7
//   push RS(e+1) and signal it, warps 8-15 wait for phase 1 and run step 5 (RowEpilogue::runOnHalf,
//   the same bits), each half on its own barrier; the block joins before the next unit. One block
//   cannot overlap its own epilogue and its push otherwise: an SM's store queue holds far less than
//   a step, so a block that stops pushing leaves its share of the link idle, and all blocks reach
//   step 5 together (a per-block %globaltimer trace, session 13: at 8192 x 8192, 31 us of peer-row
//   epilogue per unit after the next unit's push had drained). With the split, smaller steps pay
//   (plan.cpp caps a step at about 128 KiB per peer and phase): same-run A/Bs, H200 pair, bf16,
//   sessions 13-14: 8192 x 8192 453-456 -> 423-432 us, 8192 x 4096 243-246 -> 231-236, plain
//   allreduce 8192 x 8192 412-415 -> 402-405; one-step calls (2048 x 8192) are unchanged.
//   A block's last unit has no next push to overlap: with the split on, its two halves finish
//   the peers' rows two at a time (every other row each, barriers 1 and 2, the same bits): same
//   call, 3 runs, H200 pair, bf16, session 19: 8192 x 4096 235.0-236.8 -> 231.9-232.6 us,
//   2048 x 4096 71.0-71.9 -> 69.6-70.0, 8192 x 8192 427.6-428.9 -> 425.3-426.7; 2048 x 8192 (one
//   unit per block) unchanged at 125.5, so that tail is not one row's latency chain after another.
//   The split changes when this block signals and waits, never what: the same flags and epochs in
//   the same order per phase, so ranks with and without it agree. ARFUSION_TWO_SHOT_SPLIT=0 turns
//   it off (env.h), for compute-sanitizer racecheck: it reports hazards across the __syncthreads of
//   later block-wide exchanges once named barriers ran, in a small microtest too, with counts that
//   vary between identical runs (docs/PERF-NOTES.md, session 14); synccheck and memcheck are clean.
//   A wait of the finishing half that fails is shared through the `failed` word and the whole block
//   leaves after the join; tests/test_gpu.cpp SplitFault makes it fail there (a peer that skips
//   its all-gather signals, testing::skipAllGatherSignals).
//   In steps 2 and 5, while a block works on row j, a few of its threads ask L2 for row j+1's
//   sources and residual (one cp.async.bulk.prefetch per row and source, vec.cuh prefetchRowL2), so
//   that each row's loads no longer wait on HBM one row at a time: 8192 x 8192 479-481 -> 458-459 us,
//   2048 x 8192 131-132 -> 126-127, plain allreduce 8192 x 8192 435-436 -> 415-416 (H200 pair, bf16,
//   session 11, same-run A/B of 2 runs each). Two rows ahead measured no faster, a whole unit's
//   rows at once slower (L2 pressure).
//   The first unit's RS goes out before the loop. One step in flight cut 8192 x 8192 from 583 to
//   553 us and 2048 x 8192 from 154 to 151 (H200 pair, 64 MB workspace); larger steps (a larger
//   workspace) cut more, since each step's two flag crossings queue behind the bulk data.
// Why gather the sums and not the outputs: each rank still writes its own residual_out/norm_out,
// from its own residual_in (ranks' residuals need not be equal). Gathering sums moves
// 2(n-1)/n * S bytes per rank; gathering residual_out and norm_out instead would move 3(n-1)/n * S,
// and the epilogue's HBM traffic (read residual and gamma, write two outputs) is the same either way.
// Rows are owned whole, so the norm needs no cross-rank or cross-block reduction.
// Results are bitwise identical on all ranks: one owner reduces each row, everyone uses its sum.
// Memory ordering: as the one-shot (sync.cuh), once per phase. Slot reuse with two slots, for a
//   peer p of this rank at epoch e (p runs the same order):
//   - RS part of slot (e+1)%2 in p was last read by p's step 2 of e-1; p signals phase 0 of e
//     (its step 3 of e-1) after that, and this rank writes RS(e+1) after waiting for it (step 1 of e).
//   - AG part of slot (e+1)%2 in p was last read by p's step 5 of e-1; p signals phase 0 of e+1 in
//     its step 3 of e, after that (split: the join of unit e-1 orders both halves first), and this
//     rank writes AG(e+1) only after waiting for it.
//   So no write lands in a part a peer still reads, and no block runs more than one epoch ahead.
// Limits: 2 * (n-1) * R rows must fit one region (plan.cpp checks); G <= SM count (co-residency).
//   Tokens < n, or not a multiple of n*R: owners of missing rows only take part in the flags.
// Two kernels, as the one-shot: twoShotKernel above (flag barrier; every call in FlagBarrier mode,
//   and in GridDependency mode every call whose blocks take more than one unit or whose unit does
//   not fit a Lamport region) and twoShotLamportKernel (GridDependency, one unit per block, the data
//   its own flag; header comment below). The plan picks one (plan.h usesLamport: shape, sync mode
//   and creation constants, so every rank alike) and reports it in Plan::lamport. At 2 ranks
//   the Lamport kernel takes calls up to ~12 MB at hidden 8192 (R <= 3): same call, 2 runs each,
//   H200 pair, bf16, session 11: 512 x 8192 38.6 -> 34.0 us, 256 x 8192 23.2 -> 19.3-19.6,
//   512 x 4096 23.1-23.3 -> 18.1-18.4, 1 x 4096 9.4 -> 5.4; plain allreduce 512 x 8192 34.7 -> 29.7.
// Instantiated per vectors per thread of the epilogue (1, 2, 4: dispatchVariant), like the one-shot,
// and, like it, for two ranks (kWorld 2: the peer loops of pushToOwners and the all-gather stores
// run once and the rank-order sums twice, unrolled, with the world a constant) besides any world
// size (kWorld 0); launchFamily picks by the communicator's world, so every rank launches the same
// kind of kernel.
// Same protocol, order and bits. H200 pair, bf16, session 26 call 1, same call, 3 runs, two-shot
// before -> after: 128 x 8192 14.0 -> 11.9-12.0 us, 256 x 8192 18.9-19.0 -> 17.0-17.1, 512 x 8192
// 32.4-32.8 -> 31.2-31.6 (Lamport kernel); 2048 x 8192 123.8-124.6 -> 121.7-123.5, 8192 x 8192
// 421.5-423.3 -> 407.7-409.6, 8192 x 4096 228.7-229.7 -> 223.1-225.2 (flag kernel; the Lamport
// kernel alone for two ranks left these unchanged); sweep 0.5-16 MiB (bf16, fp32, hidden
// 4096-16384, 126 sizes) geomean 0.844.
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

template <typename T, int VEC, int kVpt, SyncMode kSync, int kWorld>
__global__ void __launch_bounds__(kThreads, 1) twoShotKernel(DeviceComm c, RowArgs a, int rows_per_step) {
  using Epi = RowEpilogue<T, VEC, kVpt, true>;
  using P = Pack<T, VEC>;
  // The split of steps 3-5 (header), in the kernels whose half-block epilogue fits the registers:
  // two vectors per thread at most (bf16 16384-wide rows, kVpt 4, spilled 260 bytes), or the scalar
  // path (VEC 1, kVpt 4: four scalars per thread).
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
// Slot reuse: as the Lamport one-shot; a block writes slot e%2 of a peer again at epoch e+2, after
// it received that peer's epoch e+1 data, which the peer pushed after its kernel of epoch e, whose
// clears the kernel boundary ordered first. One unit per block, so no reuse inside a call.
// Limits: 2 (n-1) R rows + kLamportHeaderBytes fit a Lamport region; units <= G (plan.cpp usesLamport):
// a block runs only unit b, so a grid with more units would leave rows unwritten.
template <typename T, int VEC, int kVpt, SyncMode kSync, int kWorld>
__global__ void __launch_bounds__(kThreads, 1) twoShotLamportKernel(DeviceComm c, RowArgs a, int rows_per_step) {
  static_assert(kSync == SyncMode::kGridDependency, "the Lamport two-shot is a GridDependency kernel");
  using Epi = RowEpilogue<T, VEC, kVpt>;
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

// The family's kernel of a variant and a sync mode (dispatch.cuh, launchFamily).
struct TwoShot {
  static constexpr bool kClusterRows = false;  // one block per row
  static constexpr bool kHeldOperands = false;
  static constexpr bool kWorldTwo = true;  // kernels for two ranks, as the one-shot's
  template <typename T, int VEC, int kVpt>
  static auto kernel(SyncMode sync, bool /*cluster*/, bool /*held*/, int world) {
    return kernelForWorld(world, [&](auto w) {
      constexpr int W = decltype(w)::value;
      return sync == SyncMode::kGridDependency ? twoShotKernel<T, VEC, kVpt, SyncMode::kGridDependency, W>
                                               : twoShotKernel<T, VEC, kVpt, SyncMode::kFlagBarrier, W>;
    });
  }
};

// The Lamport two-shot has one kernel per variant (GridDependency); forEachFamilyKernel visits it
// once per sync mode, which preloads it twice, harmlessly.
struct TwoShotLamport {
  static constexpr bool kClusterRows = false;
  static constexpr bool kHeldOperands = false;
  static constexpr bool kWorldTwo = true;  // kernels for two ranks, as the one-shot's
  template <typename T, int VEC, int kVpt>
  static auto kernel(SyncMode, bool /*cluster*/, bool /*held*/, int world) {
    return kernelForWorld(world, [](auto w) {
      return twoShotLamportKernel<T, VEC, kVpt, SyncMode::kGridDependency, decltype(w)::value>;
    });
  }
};

}  // namespace

// Per vectors per thread, as the one-shot (dispatchVariant). Same run, min of 2, H200 pair, bf16,
// session 9: 1 x 4096 10.0 -> 9.4 us, 512 x 8192 38.9 -> 38.5, 8192 x 8192 478.9 -> 476.4.
cudaError_t launchTwoShot(const DeviceComm& comm, const RowArgs& args, const FusedLaunch& launch,
                          cudaStream_t stream) {
  if (launch.lamport) return launchFamily<TwoShotLamport>(comm, args, launch, stream);
  return launchFamily<TwoShot>(comm, args, launch, stream);
}

cudaError_t forEachTwoShotKernel(const KernelVisitor& visit) {
  const cudaError_t e = forEachFamilyKernel<TwoShot>(visit);
  return e != cudaSuccess ? e : forEachFamilyKernel<TwoShotLamport>(visit);
}

}  // namespace arfusion::detail
