// Sync primitives of the fused kernels: the two cross-rank protocols, the call signatures, the
// two sync modes and the bounded waits. docs/design.md, "Protocols", has the full argument.
//
// Flag protocol. Block b of every rank owns an epoch counter that each synchronised step
// increments (ranks launch identical grids and step counts, so block b sees the same epochs
// everywhere). A step at epoch e writes its payload into slot e%2 of block b's region on every
// peer, then (bar.sync) one thread per peer stores (kFlagWritten | signature << 32 | e) with a
// system-scope release; the receiver spins relaxed on its own flag until it holds e or e+1 (never
// "at or after": flags may be stale by any number of epochs), then one system-scope acquire fence;
// payload is read with ld.global.cg. Two slots: a ready flag of e also frees slot (e+1)%2.
// Lamport protocol (GridDependency one-shot, and two-shot with one unit per block): the receiving
// area holds all-ones when idle; senders store sanitised data (no all-ones element) with relaxed
// system-scope stores, receivers poll each 16-byte pack until no element is all-ones and write
// all-ones back. The kernel boundary orders a call's clears before the next call's stores.
// Call signatures: a 31-bit hash of op, dtype, shape, strategy and grid rides in every flag and in
// a 16-byte header per Lamport sender; a peer in another call fails the communicator (kErrMismatch),
// and so does a peer that runs the other protocol (a wait's slow path looks for its signal too).
// Sync modes (against the previous kernel on the stream): GridDependency waits on the grid
// dependency before touching inputs and triggers dependents after a barrier that follows its last
// output write; FlagBarrier has no griddepcontrol at all (a ctest proves it for sm_120a).
// Bounded waits: every 256 polls a waiting thread reads %globaltimer and the abort word (local
// device memory), and gives up after timeout_ns or once the abort word is set; it records the
// failure in the host-mapped error word (first failure wins) and, for a timeout or mismatch, sets
// the abort word so that every later wait of this communicator gives up at its first check. A
// wait never reads host memory while it waits.
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
// other warps still write the outputs. The trigger carries no memory ordering: a dependent sees
// the outputs only after its own grid-dependency wait, which waits for this grid to complete.
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

// The bound of a cluster block's wait for its cluster's partial sums (norm_epilogue.cuh,
// clusterScale): what mustGiveUp needs, set by the kernel in shared memory before the epilogue.
struct ClusterWait {
  uint32_t* error;
  uint32_t* stop;
  unsigned long long timeout_ns;
  int block;
  uint32_t epoch;
  int test_skip_partial;  // DeviceComm::test_cluster_skip_partial
};

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

// ---- Lamport slots and headers (used by both protocols' waits) ---------------------------------

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

// A flag wait's check for a peer that runs the other protocol for the same block and epoch (ranks
// whose sync modes differ, docs/design.md "Call signatures and mismatches"): the peer's Lamport
// header of `epoch`. (A Lamport wait checks the peer's phase-0 flag of its epoch: lamportWaitSlow.)
// In a valid sequence every rank runs the same protocol at a given (block, epoch), and a receiver
// clears every Lamport header it checked, so either signal means the ranks disagree. Slow path only.
__device__ __forceinline__ bool peerSentLamportHeader(const DeviceComm& c, int block, uint32_t epoch, int peer) {
  const Pack<uint32_t, 4> h =
      loadPackRelaxedSys<uint32_t, 4>(lamportHeader(lamportSlot(c, c.rank, block, epoch), senderIndex(peer, c.rank)));
  return lamportArrived(h) && h.v[1] == (epoch & 0x7fffffffu);
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
    if ((polls & 255u) == 0) {
      if (mustGiveUp(c.error, c.abort_flag, c.timeout_ns, start, block, peer, epoch)) return false;
      if (peerSentLamportHeader(c, block, epoch, peer)) {  // the peer runs the Lamport protocol here
        reportFailure(c.error, c.abort_flag, kErrMismatch, block, peer, epoch);
        return false;
      }
    }
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
// verdict goes through shared memory instead): compute-sanitizer racecheck misreads it.
__device__ __forceinline__ void groupBarrier(int id, int threads) {
  __syncwarp();
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
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

// Spins about `cycles` SM clocks without touching memory (a poll back-off): wakes more promptly
// than __nanosleep.
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
// wait (ranks x vectors per thread x epilogue paths) hold one load, one test and a call each
// (code size is latency for a decode call; docs/design.md, "One-shot").
// `header` and `flag`: the sender's call header and its phase-0 flag in this rank's workspace when
// the wait is for rows (kRows), else null: a header of another call, or a flag of this epoch (the
// sender runs the flag protocol here), is a mismatch.
template <typename T, int VEC, int kMaxPause = 512>
__device__ __noinline__ Pack<T, VEC> lamportWaitSlow(WaitEnv env, const T* p, const uint32_t* header, const uint64_t* flag,
                                                     int block, int peer, uint32_t epoch, int* give_up, uint32_t sig) {
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
        const uint64_t f = *reinterpret_cast<const volatile uint64_t*>(flag);
        if ((lamportArrived(h) && (h.v[0] != want.v[0] || h.v[1] != want.v[1])) ||
            ((f & kFlagWritten) && static_cast<uint32_t>(f) == epoch)) {
          reportFailure(env.error, env.abort_flag, kErrMismatch, block, peer, epoch);
          atomicExch(give_up, 1);
          break;
        }
      }
    }
  }
  return v;
}

// The longest pause (SM cycles) between two polls of a Lamport pack (lamportWaitSlow): 32 where it
// measured faster, else the waits' default 512 (2 x H200 NV18, bf16; docs/design.md, "Lamport polls"):
// - kernels for any world size: 32 with one vector per thread (Auto 16 x 4096 4.6 -> 4.4 us), 512
//   with two (8 x 8192 5.6 -> 5.9 with 32);
// - two-rank kernels: 32 with one or two vectors per thread (128 x 8192 11.6 -> 11.1 us);
// - four vectors per thread (wider rows): not measured, 512.
constexpr int lamportPollPause(int vectors_per_thread, int world) {
  return vectors_per_thread == 1 || (world == 2 && vectors_per_thread == 2) ? 32 : 512;
}

// Polls p until every element arrived, backing off 32..kMaxPause cycles between polls (512 unless
// the kernel measured better: lamportPollPause). Bounded like waitPeers: every 256
// polls it checks the block's give-up flag, the abort word and the timeout, and, for a row pack
// (kRows), whether the sender's header says it is in another call or its flag says it runs the
// flag protocol (its rows may then never fill what this rank waits for); on failure it records it,
// raises the block's give-up flag (so the block's other pollers stop at once) and returns what it read.
template <typename T, int VEC, bool kRows = false, int kMaxPause = 512>
__device__ __forceinline__ Pack<T, VEC> lamportWait(const DeviceComm& c, const T* p, int block, int peer,
                                                    uint32_t epoch, int* give_up, uint32_t sig = 0) {
  const Pack<T, VEC> v = loadPackRelaxedSys<T, VEC>(p);
  if (lamportArrived(v)) return v;
  const uint32_t* header =
      kRows ? lamportHeader(lamportSlot(c, c.rank, block, epoch), senderIndex(peer, c.rank)) : nullptr;
  const uint64_t* flag = kRows ? flagAddr(c.flags[c.rank], c.max_blocks, 0, block, peer) : nullptr;
  return lamportWaitSlow<T, VEC, kMaxPause>(WaitEnv{c.abort_flag, c.error, c.timeout_ns}, p, header, flag, block, peer,
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
// fence of the polling threads must come before the barrier and the writers' after it. Runs only
// where a block takes several units, i.e. one-shot calls larger than the grid's rows.
__device__ __forceinline__ void lamportNextUnit() {
  cuda::atomic_thread_fence(cuda::std::memory_order_acq_rel, cuda::thread_scope_system);
  __syncthreads();
  cuda::atomic_thread_fence(cuda::std::memory_order_acq_rel, cuda::thread_scope_system);
}

}  // namespace arfusion::detail
