// Sync primitives of the fused kernels: the two sync modes, cross-rank flags, bounded waits.
//
// Cross-rank protocol (both sync modes)
//   Every block b of every rank owns an epoch counter epochs[b] in local device memory. Each
//   synchronised step of block b increments it, so block b of every rank sees the same sequence of
//   epochs: ranks launch identical grids and identical step counts (both are derived from the call's
//   shape only). Epochs are never reset and wrap at 2^32.
//   A step at epoch e:
//     1. writes its payload into slot (e % kSlots) of block b's region on every peer (plain stores);
//     2. __syncthreads(); one thread per peer does a system-scope *release* store of
//        (kFlagWritten | signature << 32 | e) into the peer's flags[phase][b][my rank] (64 bits;
//        kFlagWritten, bit 63, is set in every flag ever written: zeroed flags match no epoch).
//        bar.sync orders the block's payload stores before the release, and release at system
//        scope makes them visible before the flag;
//     3. one thread per peer spins on a system-scope relaxed load of its own flags[phase][b][peer]
//        until it is written with epoch e or e+1, then issues a system-scope acquire fence and
//        __syncthreads(); payload reads come after the fence. Payload is read with ld.global.cg (L2 only), never
//        through the non-coherent L1.
//   Buffer reuse ("data ready" vs "buffer free"): in the one-shot, a peer's flag e is written after
//   the peer finished every read of epoch e-1 (block b's steps run in order). With two slots, epoch
//   e+1 overwrites the slot of epoch e-1, and a rank starts writing e+1 only after it saw every
//   peer's flag e. So a ready flag of epoch e is also the free signal of slot (e+1) % 2; no
//   separate flag is needed, and no block can run more than one epoch ahead of a peer: a flag that
//   is current holds e or e+1. The two-shot's phase-0 flag of e is sent before the peer's last
//   reads of e-1 (its all-gather part), so it frees the slot part by part (twoshot.cu, "Slot
//   reuse"), and its last unit's wait for phase 1 is what frees the all-gather part for the next
//   call (whose one-shot rows may overlap it): that wait must stay.
//   Only those two values pass, not any epoch "at or after" e: a flag can be stale by any number of
//   epochs, because the Lamport kernels advance epochs[b] without writing flags and the one-shot
//   never writes phase 1. With an "at or after" test in wrapping 32-bit arithmetic, a flag left
//   2^31 epochs behind (days of decode-only Lamport calls) read as ahead, and the next flag
//   kernel passed its waits without its peers (found in review, session 22; tests/test_gpu.cpp
//   StaleFlags). What remains: a flag written exactly k * 2^32 (or that minus 1) epochs before the
//   wait, with no flag of that phase and block written since, passes; the next flag step of that
//   block would have to land on one of 2 epoch values out of 2^32.
//
// Lamport protocol (the one-shot in GridDependency mode; no flags, no fences)
//   Block b's regions in the Lamport area hold all-ones bytes when idle. For bf16, fp16 and fp32 an
//   all-ones element is a NaN that inputs never carry once sanitised (lamportSanitize turns it into
//   the neighbouring NaN 0x..FE: NaN in, NaN out, as on the NCCL path). At epoch e:
//     1. the sender stores its sanitised input into slot e%2 of the receiver's region (plain 16-byte
//        stores, no fence);
//     2. the receiver polls each 16-byte pack of its own slot with system-scope relaxed loads until
//        no element is all-ones (lamportWait); an element is written once, so a pack seen half
//        written just polls again, and the data is its own "ready" flag;
//     3. the receiver writes all-ones back over exactly what it read (lamportClear).
//   Buffer reuse: a sender writes slot e%2 again at epoch e+2, after it received the receiver's
//   epoch e+1 data, which the receiver sent after it cleared epoch e. Between calls the kernel
//   boundary orders the clear before the next call's stores; between two units of one call the
//   block fences its clears and reads before its next stores (lamportNextUnit).
//   Cost: one NVLink write latency per call, against a write, a fence and a flag round trip.
//   A wait that gives up (timeout, abort) leaves the area dirty: the communicator is failed from
//   then on (the host refuses further calls), as after any device-side failure.
//
// Call signatures (both protocols): every fused call carries a 31-bit signature of its op, dtype,
// shape, strategy and grid (kernels.h callSignature), identical on all ranks for matching calls.
// A receiver compares each peer's with its own: the flag holds it next to the epoch (checked when
// the flag holds exactly e; a peer already at e+1 was checked by that peer), and each Lamport
// region starts with one 16-byte header per sender, {signature, epoch & 0x7fffffff, 0, 0}, pushed
// after the rows and polled, checked and cleared like them at the end of the unit by thread t for
// sender t; its load is issued once that thread's first rows arrived (at 1 x 4096 it is still in
// flight when the epilogue ends: +0.2-0.3 us, docs/PERF-NOTES.md session 6), and a row wait that
// lasts 256 polls looks at the header too, so rows of another shape that never fill this rank's
// slots are found before the timeout. A mismatch, i.e. ranks that paired calls of different
// shapes, dtypes, ops or grids, is reported as
// kErrMismatch: the host fails the communicator (Status::kMismatch) instead of returning results
// computed from another call's data. A rank that skips a call and pairs its next call of the same
// shape with the peers' skipped one is not detected: nothing in the call tells them apart.
//
// Sync modes (intra-rank, against the previous kernel on the stream)
//   GridDependency: launched with programmatic stream serialization (PDL). The kernel calls
//     cudaGridDependencySynchronize() before touching anything a previous kernel wrote (inputs,
//     epochs, flags' meaning) and cudaTriggerProgrammaticLaunchCompletion() only after every
//     thread of the block wrote its last output (a barrier, then the trigger: gridDependencyTrigger).
//     What a Lamport kernel writes after it (header clears, the epoch counter) only later fused
//     kernels read, after their grid-dependency wait, which waits for this grid to complete.
//     Compiled only into kGridDependency kernels.
//   FlagBarrier: plain launch; stream order does the same job. Contains no griddepcontrol at all
//     (tests/check_ptx.py proves it for sm_120a).
//   Cross-rank protocol per mode: the one-shot uses Lamport under GridDependency and the flag
//   barrier under FlagBarrier (the conservative pair for arches where nothing was validated); the
//   two-shot uses Lamport under GridDependency when each block has one unit that fits a Lamport
//   region (twoshot.cu), the flag barrier otherwise. The creation-time self-check compares the two
//   one-shot paths bit for bit and in speed before Auto may pick GridDependency (selfcheck.cpp);
//   the Lamport two-shot relies on the same grid-dependency and Lamport mechanisms it validates.
//
// Bounded waits: a spinning thread reads %globaltimer and the abort word (local device memory,
// written by commAbort() through a copy engine) every 256 polls, and gives up after timeout_ns or
// once the abort word is set. It records the failure in the host-mapped error word and the whole
// block leaves the kernel; the host reports kTimeout / kAborted / kMismatch at the next call or
// through commGetAsyncError(). A timeout or mismatch also sets the abort word (kStopFailed): every
// later wait of this communicator, in calls already queued on the stream or in a graph, then gives
// up at its first check without a report of its own, so a failure drains a queue of N calls in
// about one timeout, not N (tests/test_gpu.cpp QueuedCallsFailFast: 16 queued calls, 0.5 s
// timeout, 8.0 s before, 0.5 s now). A wait never reads host memory while it waits (reportFailure
// reads the error word once, on the failure path): on H200 such a read took up to milliseconds now
// and then, and every waiting block stalled behind it (docs/PERF-NOTES.md, "the stall mode").
#pragma once

#include <cuda/atomic>

#include "kernels.h"
#include "vec.cuh"

namespace arfusion::detail {

template <SyncMode kSync>
__device__ __forceinline__ void gridDependencyWait() {
  if constexpr (kSync == SyncMode::kGridDependency) cudaGridDependencySynchronize();
}

// Call with every thread of the block, after its last output write. A block's first
// griddepcontrol.launch_dependents is its trigger (later ones have no effect, PTX ISA), so the
// barrier comes first: without it, a warp that finished early would let dependents launch while
// other warps still write the outputs, against the contract (the trigger follows every output
// write of the block). The trigger carries no memory ordering: a dependent sees the outputs only
// after its own grid-dependency wait, which waits for this grid to complete; what the barrier
// buys is that no dependent starts before the block's writes were issued. It costs the plain
// allreduce, whose warps end unevenly, 0.2-0.4 us at 1-64 rows (H200 pair, session 15: one-shot
// 1 x 4096 3.3 -> 3.5 us, two-shot 4.4 -> 4.8); the fused op's warps end together at the norm's
// barriers (1 x 4096 4.3 either way).
template <SyncMode kSync>
__device__ __forceinline__ void gridDependencyTrigger() {
  if constexpr (kSync == SyncMode::kGridDependency) {
    __syncthreads();
    cudaTriggerProgrammaticLaunchCompletion();
  }
}

__device__ __forceinline__ unsigned long long globalTimerNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ uint64_t* flagAddr(uint64_t* flags, int max_blocks, int phase, int block,
                                              int src) {
  return flags + (static_cast<size_t>(phase) * max_blocks + block) * kMaxRanks + src;
}

// Peer slot index of `src` in the region of `dst`: the n-1 senders, skipping dst itself.
__device__ __forceinline__ int senderIndex(int src, int dst) { return src < dst ? src : src - 1; }

// Data slot of (block, epoch) in rank r's workspace.
__device__ __forceinline__ uint8_t* regionAddr(const DeviceComm& c, int r, int block, uint32_t epoch) {
  return c.data[r] + (static_cast<size_t>(block) * kSlots + (epoch % kSlots)) * c.region_bytes;
}

// The world size of a kernel compiled for kWorld ranks (0: any, read from the communicator).
template <int kWorld>
__device__ __forceinline__ int worldOf(const DeviceComm& c) {
  return kWorld > 0 ? kWorld : c.world;
}

// Stores pack p into every peer: dst(peer) is its address in that peer's workspace. Peers in the
// order rank+1, rank+2, ... so that the ranks do not all write to rank 0 first. kWorld as worldOf.
template <int kWorld = 0, typename T, int VEC, typename DstFn>
__device__ __forceinline__ void storeToPeers(const DeviceComm& c, const Pack<T, VEC>& p, DstFn&& dst) {
  constexpr int kMax = kWorld > 0 ? kWorld : kMaxRanks;
#pragma unroll
  for (int d = 1; d < kMax; ++d) {
    if (kWorld > 0 || d < c.world) {
      const int peer = (c.rank + d) % worldOf<kWorld>(c);
      storePackPeer<T, VEC>(dst(peer), p);
    }
  }
}

// The release store of step 2 by thread t < world-1, to the t-th peer. The caller has ordered the
// payload stores of every thread that wrote some before it (a barrier those threads took part in).
__device__ __forceinline__ void signalPeer(const DeviceComm& c, int phase, int block, uint32_t epoch, uint32_t sig, int t) {
  const int peer = t < c.rank ? t : t + 1;
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system> flag(*flagAddr(c.flags[peer], c.max_blocks, phase, block, c.rank));
  flag.store(kFlagWritten | (static_cast<uint64_t>(sig) << 32) | epoch, cuda::std::memory_order_release);
}

// Step 2 of the protocol. Call with every thread of the block, after the payload stores. `send`
// false (block-uniform; a test's fault injection only) takes the barrier but stores no flag.
__device__ __forceinline__ void signalPeers(const DeviceComm& c, int phase, int block, uint32_t epoch, uint32_t sig,
                                            bool send = true) {
  __syncthreads();
  if (send && threadIdx.x < unsigned(c.world - 1)) signalPeer(c, phase, block, epoch, sig, threadIdx.x);
}

// Records a failure in the host-mapped error word. Plain volatile stores, no atomics: PCIe
// atomics to host memory are not available everywhere. The first failure wins (a later timeout of
// another block must not hide the mismatch that caused it): the one host-memory read of a wait,
// on its failure path only. Racing blocks may still interleave their details; any one is enough.
// Then, for a timeout or mismatch, sets the abort word to kStopFailed (after the record, so a wait
// that sees it may leave without a report of its own: the cause is already in `error`).
static __device__ __noinline__ void reportFailure(uint32_t* error, uint32_t* stop, uint32_t code, int block,
                                                  int peer, uint32_t epoch) {
  volatile uint32_t* err = error;
  if (err[0] == kErrNone) {
    err[1] = (static_cast<uint32_t>(block) << 8) | static_cast<uint32_t>(peer);
    err[2] = epoch;
    __threadfence_system();
    err[0] = code;
    __threadfence_system();
  }
  if (code != kErrAbort) *reinterpret_cast<volatile uint32_t*>(stop) = kStopFailed;
}

// A wait's periodic check: true if it must give up now, because the abort word is set or
// `timeout_ns` passed since `start` (0: this is the first check, which starts the clock). Records
// the failure unless an earlier wait of this communicator already did (kStopFailed).
__device__ __forceinline__ bool mustGiveUp(uint32_t* error, uint32_t* stop, unsigned long long timeout_ns,
                                           unsigned long long& start, int block, int peer, uint32_t epoch) {
  const unsigned long long now = globalTimerNs();
  if (start == 0) start = now;
  const uint32_t s = *reinterpret_cast<const volatile uint32_t*>(stop);
  if (s == kStopNone && now - start <= timeout_ns) return false;
  if (s != kStopFailed) reportFailure(error, stop, s == kStopAbort ? kErrAbort : kErrTimeout, block, peer, epoch);
  return true;
}

// Step 3 of the protocol for the t-th peer (t < world-1), by one thread: spins until that peer's
// flag reaches `epoch`. False if the peer timed out, sent another call's signature, or the
// communicator was aborted (the failure is recorded).
__device__ __forceinline__ bool waitPeer(const DeviceComm& c, int phase, int block, uint32_t epoch, uint32_t sig, int t) {
  const int peer = t < c.rank ? t : t + 1;
  cuda::atomic_ref<uint64_t, cuda::thread_scope_system> flag(*flagAddr(c.flags[c.rank], c.max_blocks, phase, block, peer));
  unsigned long long start = 0;
  for (uint32_t polls = 1;; ++polls) {
    // Poll relaxed; one acquire fence once the flag is seen (the PTX "acquire pattern"): an
    // acquire load per poll would pay the fence on every iteration.
    const uint64_t f = flag.load(cuda::std::memory_order_relaxed);
    const uint32_t seen = static_cast<uint32_t>(f);
    if ((f & kFlagWritten) && seen - epoch <= 1u) {  // e or e+1 (header comment)
      cuda::atomic_thread_fence(cuda::std::memory_order_acquire, cuda::thread_scope_system);
      if (seen == epoch && static_cast<uint32_t>(f >> 32 & 0x7fffffffu) != sig) {
        reportFailure(c.error, c.abort_flag, kErrMismatch, block, peer, epoch);
        return false;
      }
      return true;
    }
    if ((polls & 255u) == 0 && mustGiveUp(c.error, c.abort_flag, c.timeout_ns, start, block, peer, epoch)) return false;
  }
}

// Step 3 of the protocol. Call with every thread of the block. Returns false (on every thread) if
// any peer timed out, sent another call's signature, or the communicator was aborted; the caller
// must then leave the kernel.
__device__ __forceinline__ bool waitPeers(const DeviceComm& c, int phase, int block, uint32_t epoch, uint32_t sig) {
  const bool ok = threadIdx.x < unsigned(c.world - 1) ? waitPeer(c, phase, block, epoch, sig, threadIdx.x) : true;
  return __syncthreads_and(ok) != 0;
}

// A barrier of part of a block (PTX bar.sync with an id and a thread count, a multiple of 32), for
// code where the block's warps split into groups that each synchronise among themselves. Id 0 is
// __syncthreads(); each group uses its own id. The .aligned form, as __syncthreads(): every thread
// of a warp executes it together, hence the __syncwarp() first (a group's warps may come from
// divergent code, such as one lane's flag poll). No barrier.red on a named barrier (a flag's
// verdict goes through shared memory instead): racecheck misreads it (docs/PERF-NOTES.md, 13-14).
__device__ __forceinline__ void groupBarrier(int id, int threads) {
  __syncwarp();
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// ---- Lamport protocol -------------------------------------------------------------------------

// Lamport slot of (block, epoch) in rank r's workspace: the senders' headers, then the rows.
__device__ __forceinline__ uint8_t* lamportSlot(const DeviceComm& c, int r, int block, uint32_t epoch) {
  return c.lamport[r] + (static_cast<size_t>(block) * kSlots + (epoch % kSlots)) * c.lamport_region_bytes;
}
__device__ __forceinline__ uint8_t* lamportAddr(const DeviceComm& c, int r, int block, uint32_t epoch) {
  return lamportSlot(c, r, block, epoch) + kLamportHeaderBytes;
}
// Header of sender index s (senderIndex) in a Lamport slot.
__device__ __forceinline__ uint32_t* lamportHeader(uint8_t* slot, int s) {
  return reinterpret_cast<uint32_t*>(slot + 16 * s);
}
__device__ __forceinline__ Pack<uint32_t, 4> lamportHeaderValue(uint32_t sig, uint32_t epoch) {
  return Pack<uint32_t, 4>{{sig, epoch & 0x7fffffffu, 0u, 0u}};
}

// All-ones in an element's bits: "not arrived yet".
template <typename T, int VEC>
__device__ __forceinline__ bool lamportArrived(const Pack<T, VEC>& v) {
  using B = ElemBits<T>;
  B b[VEC];
  memcpy(b, &v, sizeof v);
  bool ok = true;
#pragma unroll
  for (int e = 0; e < VEC; ++e) ok &= b[e] != static_cast<B>(~B(0));
  return ok;
}

// Inputs never carry the all-ones pattern into the Lamport area: that NaN becomes the NaN 0x..FE.
template <typename T, int VEC>
__device__ __forceinline__ Pack<T, VEC> lamportSanitize(Pack<T, VEC> v) {
  using B = ElemBits<T>;
  B b[VEC];
  memcpy(b, &v, sizeof v);
#pragma unroll
  for (int e = 0; e < VEC; ++e)
    if (b[e] == static_cast<B>(~B(0))) b[e] = static_cast<B>(~B(1));
  memcpy(&v, b, sizeof v);
  return v;
}

// Spins about `cycles` SM clocks without touching memory (a poll back-off). Wakes more promptly
// than __nanosleep (H200, bf16, one-shot: 4 x 8192 7.7 against 9.4 us per call, 16 x 8192 8.0
// against 9.8); no back-off at all measured the same as this one.
__device__ __forceinline__ void spinCycles(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

// What a Lamport wait needs on its slow path, by value: an out-of-line callee that took the
// kernel's DeviceComm parameter by reference made ptxas copy all of it to the stack (264 bytes).
struct WaitEnv {
  uint32_t* abort_flag;
  uint32_t* error;
  unsigned long long timeout_ns;
};

// lamportWait once the first poll missed: out of line, so the ~30 places the one-shot inlines a
// wait (ranks x vectors per thread x epilogue paths) hold one load, one test and a call each: the
// bf16 Lamport one-shot's code went from 221 to 150 KB (sm_90a), and from 4.6 to 4.4 us at 1 x 4096,
// 8.2 to 6.4 at 16 x 8192, 13.8 to 13.0 at 128 x 8192 (H200 pair, session 8, same-run A/B of 2
// runs). A rank loop that was not unrolled made the code smaller still (64 KB) but serialised
// the peers' loads: 128 x 8192 14.8, 2048 x 8192 191 against 172 (docs/PERF-NOTES.md, session 8).
// `header`: the sender's call header when the wait is for rows (kRows), else null.
template <typename T, int VEC, int kMaxPause = 512>
__device__ __noinline__ Pack<T, VEC> lamportWaitSlow(WaitEnv env, const T* p, const uint32_t* header, int block,
                                                     int peer, uint32_t epoch, int* give_up, uint32_t sig) {
  Pack<T, VEC> v;
  unsigned long long start = 0;
  long long backoff = 32;
  for (uint32_t polls = 1;; ++polls) {
    // Back off: fewer L2 requests from thousands of polling threads.
    spinCycles(backoff);
    if (backoff < kMaxPause) backoff *= 2;
    v = loadPackRelaxedSys<T, VEC>(p);
    if (lamportArrived(v)) break;
    if ((polls & 255u) == 0) {
      // Block-scope atomics: the flag is written by whichever thread fails first, read by all.
      if (atomicAdd(give_up, 0) != 0) break;
      if (mustGiveUp(env.error, env.abort_flag, env.timeout_ns, start, block, peer, epoch)) {
        atomicExch(give_up, 1);
        break;
      }
      if (header != nullptr) {
        const Pack<uint32_t, 4> h = loadPackRelaxedSys<uint32_t, 4>(header);
        const Pack<uint32_t, 4> want = lamportHeaderValue(sig, epoch);
        if (lamportArrived(h) && (h.v[0] != want.v[0] || h.v[1] != want.v[1])) {
          reportFailure(env.error, env.abort_flag, kErrMismatch, block, peer, epoch);
          atomicExch(give_up, 1);
          break;
        }
      }
    }
  }
  return v;
}

// The longest pause (SM cycles) between two polls of a Lamport pack (lamportWaitSlow), by the
// kernel's vectors per thread and world (kWorld): 32 or the waits' default 512. Both Lamport kernels
// (oneshot.cu, twoshot.cu) use it.
// - Kernels for any world size (kWorld 0): 32 where a thread reduces one vector per row (kVpt 1:
//   rows of at most kThreads vectors, bf16/fp16 up to 4096 elements, fp32 up to 2048), 512
//   elsewhere. H200 pair, bf16, session 24 call 1, same call, gbench 3 runs and sweeps up to 1 MiB
//   2 runs, one-shot: with kVpt 1 the short pause took Auto 16 x 4096 4.6 -> 4.4 us, 32 x 4096 4.7 ->
//   4.5-4.6, 128 x 4096 7.3 -> 7.1 (sweep geomean 0.98); in these kVpt 2 kernels it took 8 x 8192
//   5.6-5.7 -> 5.9-6.0 and 23-32 x 8192 6.1-6.5 -> 7.0-7.5 (as session 21 found).
// - Two-rank kernels (kWorld 2): 32 with kVpt 1 and 2. Session 25 call 9, same call, 3 runs, one-shot:
//   Auto 32 x 8192 6.7 -> 6.3, 64 x 8192 8.4 -> 8.0, 128 x 8192 11.5-11.7 -> 11.1-11.2,
//   8 x 8192 4.8 -> 4.7, 16 x 8192 5.3-5.4 -> 5.4, rows of 4096 within 1%. So the kVpt-2 loss
//   above belongs to the eight-rank code, not to two vectors per thread. Session 26 call 1, the
//   two-rank Lamport two-shot, same call, 3 runs: 128 x 8192 11.9-12.0 -> 11.6-11.7, 256 x 8192
//   17.0-17.1 -> 16.7-16.8, 256 x 4096 10.4-10.5 -> 10.3, 128 x 4096 7.2-7.3 -> 7.1, 512 x 8192
//   unchanged at 31.2-31.6 (sweep 0.5-16 MiB, 126 sizes: geomean 0.997). The two-shot's kernels
//   for any world size take the same rule, not timed there (no machine here has more than two GPUs).
//   kVpt 4 (wider rows) is not measured with it and keeps 512.
constexpr int lamportPollPause(int vectors_per_thread, int world) {
  return vectors_per_thread == 1 || (world == 2 && vectors_per_thread == 2) ? 32 : 512;
}

// Polls p until every element arrived, backing off 32..kMaxPause cycles between polls (512 unless
// the kernel measured better: lamportPollPause). Bounded like waitPeers: every 256
// polls it checks the block's give-up flag, the abort word and the timeout, and, for a row pack
// (kRows), whether the sender's header says it is in another call (its rows may then never fill
// what this rank waits for); on failure it records it, raises the block's give-up flag (so the
// block's other pollers stop at once) and returns what it read.
template <typename T, int VEC, bool kRows = false, int kMaxPause = 512>
__device__ __forceinline__ Pack<T, VEC> lamportWait(const DeviceComm& c, const T* p, int block, int peer,
                                                    uint32_t epoch, int* give_up, uint32_t sig = 0) {
  const Pack<T, VEC> v = loadPackRelaxedSys<T, VEC>(p);
  if (lamportArrived(v)) return v;
  const uint32_t* header =
      kRows ? lamportHeader(lamportSlot(c, c.rank, block, epoch), senderIndex(peer, c.rank)) : nullptr;
  return lamportWaitSlow<T, VEC, kMaxPause>(WaitEnv{c.abort_flag, c.error, c.timeout_ns}, p, header, block, peer,
                                            epoch, give_up, sig);
}

// Restores "not arrived" over a pack the caller has read.
template <typename T, int VEC>
__device__ __forceinline__ void lamportClear(T* p) {
  Pack<T, VEC> ones;
  memset(&ones, 0xff, sizeof ones);
  storePackEvictFirst<T, VEC>(p, ones);
}

// The call-header exchange of one Lamport unit ("Call signatures" above), shared by the Lamport
// one-shot and two-shot. Thread t < world-1 pushes this rank's header to peer (rank+1+t) % world
// and checks the header of peer `checked` in its own slot: push() after the unit's row stores,
// watch() before the unit's waits, peek() once the thread's first rows arrived (the load then
// overlaps the epilogue), check() at the end: wait, compare, clear. A mismatch is reported
// (kErrMismatch) and raises give_up.
struct LamportHeaders {
  bool checker;                // this thread pushes one header and checks one
  int checked;                 // the peer whose header it checks
  uint32_t* header = nullptr;  // that header in this rank's slot of the current unit
  Pack<uint32_t, 4> head;      // its value as last read (all-ones: not read or not arrived)

  __device__ __forceinline__ explicit LamportHeaders(const DeviceComm& c)
      : checker(threadIdx.x < unsigned(c.world - 1)), checked(threadIdx.x < unsigned(c.rank) ? threadIdx.x : threadIdx.x + 1) {}

  __device__ __forceinline__ void push(const DeviceComm& c, int block, uint32_t epoch, uint32_t sig) const {
    if (!checker) return;
    const int peer = (c.rank + 1 + threadIdx.x) % c.world;
    storePackPeer<uint32_t, 4>(lamportHeader(lamportSlot(c, peer, block, epoch), senderIndex(c.rank, peer)),
                               lamportHeaderValue(sig, epoch));
  }
  __device__ __forceinline__ void watch(const DeviceComm& c, int block, uint32_t epoch) {
    header = checker ? lamportHeader(lamportSlot(c, c.rank, block, epoch), senderIndex(checked, c.rank)) : nullptr;
    memset(&head, 0xff, sizeof head);
  }
  __device__ __forceinline__ void peek() { head = loadPackRelaxedSys<uint32_t, 4>(header); }
  __device__ __forceinline__ void check(const DeviceComm& c, int block, uint32_t epoch, uint32_t sig, int* give_up) {
    if (!checker) return;
    if (!lamportArrived(head)) head = lamportWait<uint32_t, 4>(c, header, block, checked, epoch, give_up);
    const Pack<uint32_t, 4> want = lamportHeaderValue(sig, epoch);
    if (head.v[0] != want.v[0] || head.v[1] != want.v[1]) {
      if (lamportArrived(head)) reportFailure(c.error, c.abort_flag, kErrMismatch, block, checked, epoch);  // else timed out
      atomicExch(give_up, 1);
    }
    lamportClear<uint32_t, 4>(header);
  }
};

// Between two units of one call: this block's clears (and its reads of the peers' data) are
// ordered before its next stores into any peer's slots (see the protocol above). Fence, barrier,
// fence: in the PTX memory model a relaxed load is acquired only by a fence of the thread that
// issued it, and a store is released only by a fence of the thread that then writes, so the
// fence of the polling threads must come before the barrier and the writers' after it. (A fence
// after the barrier alone, as until session 31, has no known hardware failure: the stale read it
// allows would need a local load still in flight after an NVLink round trip.) Runs only where a
// block takes several units, i.e. one-shot calls larger than the grid's rows.
__device__ __forceinline__ void lamportNextUnit() {
  cuda::atomic_thread_fence(cuda::std::memory_order_acq_rel, cuda::thread_scope_system);
  __syncthreads();
  cuda::atomic_thread_fence(cuda::std::memory_order_acq_rel, cuda::thread_scope_system);
}

}  // namespace arfusion::detail
