// arfusion: tensor-parallel allreduce fused with residual add and RMSNorm.
//
// One call replaces "NCCL allreduce, then an add-RMSNorm kernel" on every rank of a tensor-parallel
// group:
//
//     s            = sum over ranks of input      (fused paths: fp32 accumulation, rank order 0..n-1;
//                                                  the NCCL path: NCCL's order and precision)
//     residual_out = residual_in + s
//     norm_out     = residual_out * rsqrt(mean(residual_out^2) + eps) * gamma      (per token)
//
// over a row-major [tokens x hidden] tensor. The library owns a peer-visible workspace on every
// rank and moves data over NVLink/PCIe peer memory; where fusion is unavailable or slower it takes
// the NCCL path (ncclAllReduce + arfusion's own fused add-RMSNorm kernel) on its own.
//
// Conventions (learned from NCCL and CUB):
//   * No exception crosses this API. Every call returns a Status; statusString() names it and
//     lastError() gives a detailed message for the calling thread's last failure.
//   * The CUDA stream is the last argument. Calls are asynchronous like any kernel launch and can be
//     captured into CUDA graphs; pointers captured into a graph must stay valid while it is replayed.
//   * Collective: every rank of the communicator makes the same calls, in the same order, with the
//     same shapes, dtypes and strategy settings, from one host thread at a time. Calls pair up by
//     their order on each rank. A rank that skips a call and makes no further call leaves its peers
//     waiting: on the fused paths they give up after Config::timeout_seconds and report
//     Status::kTimeout; calls that take the NCCL path wait as NCCL does, with no timeout of
//     arfusion's (ncclCommAbort releases them). But a rank that skips a call (or whose call is
//     rejected by argument checks that only it fails, such as a host pointer on that rank alone)
//     and then makes its next call within the timeout pairs that call with its peers' previous
//     one. Fused calls carry a signature (op, dtype, shape, strategy, grid, vector or scalar path)
//     that peers check: paired calls that differ fail the communicator with kMismatch (reported
//     like a timeout); paired calls of the same shape give wrong results without an error (README
//     "Known limits").
//   * One call in flight per communicator. Eager calls are made safe: a call on another stream
//     than the previous call waits for it (cudaStreamWaitEvent), so alternating streams is
//     correct, just serialised. Inside CUDA-graph capture that ordering is the caller's: do not
//     replay two graphs holding calls of one communicator concurrently.
//   * Several communicators on the same GPUs may run at once from different streams, in any order
//     per rank, if their fused grids fit on the GPU together: set Config::max_blocks so that they
//     add up to at most the SM count (fused kernels spin-wait for their peers; a kernel whose
//     blocks cannot all start waits for one that cannot finish, until the timeout). commCreate
//     logs a warning when a second communicator on a device leaves no room for the first.
//     commCreate also loads every arfusion kernel: since CUDA 12.2 kernels load at their first
//     launch, and such a load may wait for the device to go idle, which it does not while a fused
//     kernel waits for a peer whose host thread sits in the same kind of load (two communicators
//     used this way timed out or hung until this preload). Your own kernels that run beside fused
//     calls on other streams need the same: load them first (cudaFuncGetAttributes) or run with
//     CUDA_MODULE_LOADING=EAGER.
//   * Bad input returns kInvalidArgument (or kNotSupported) before anything is launched: no output
//     byte is written. (During CUDA-graph capture the driver answers no pointer queries, so where a
//     pointer lives is not checked then: validate eagerly once before capturing.)
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>

#define ARFUSION_VERSION_MAJOR 0
#define ARFUSION_VERSION_MINOR 3  // 0.3: Plan::row_blocks; 0.2: Plan::lamport (Plan's layout changed)
#define ARFUSION_VERSION_PATCH 0

namespace arfusion {

// ---------------------------------------------------------------------------------------------
// Status and errors
// ---------------------------------------------------------------------------------------------

enum class Status : int {
  kSuccess = 0,
  kInvalidArgument = 1,  // null or misused pointer, bad shape or dtype, eps < 0, wrong device...
  kNotSupported = 2,     // a valid request this communicator cannot serve as configured
                         // (e.g. Strategy::kOneShot forced without peer access).
  kCudaError = 3,        // a CUDA runtime call failed; lastError() has the CUDA error string.
  kNcclError = 4,        // an NCCL call failed; lastError() has NCCL's own message.
  kTimeout = 5,          // a peer did not arrive within Config::timeout_seconds (device-side wait).
                         // The communicator is failed from then on: destroy it.
  kAborted = 6,          // abort() was called, or the communicator failed earlier.
  kInternalError = 7,    // a bug in arfusion: please report it with lastError().
  kMismatch = 8,         // a fused call was paired with a peer's call of another op, dtype, shape or
                         // strategy (ranks made different calls). Found on the device, reported like
                         // kTimeout (next call, commGetAsyncError); that call's outputs are invalid
                         // and the communicator is failed from then on: destroy it.
};

// Short constant name of a status ("kTimeout" ...). Never null.
const char* statusString(Status status);

// Detailed message of the last failing arfusion call on the calling thread ("" if none).
// The pointer stays valid until the thread's next arfusion call.
const char* lastError();

// ---------------------------------------------------------------------------------------------
// Types
// ---------------------------------------------------------------------------------------------

enum class DType : int { kFloat16 = 0, kBFloat16 = 1, kFloat32 = 2 };

// Which data movement a call uses. kAuto is the default and the only one a production engine
// should need: it picks per shape from a measured table (or a tuning file) and takes the NCCL path
// wherever fusion is unavailable or slower.
enum class Strategy : int {
  kAuto = 0,
  kOneShot = 1,  // every rank pushes its whole input to every peer, each reduces everything.
                 // One cross-rank sync; (n-1)*S bytes per rank: latency-optimal, for decode.
  kTwoShot = 2,  // reduce-scatter then all-gather over peer memory. Two syncs;
                 // 2(n-1)/n*S bytes per rank: bandwidth-optimal at n > 2, for prefill.
  kNccl = 3,     // ncclAllReduce + arfusion's fused add-RMSNorm kernel. Always available.
};

// How a fused kernel orders itself against the kernel before it on the same stream. Cross-rank
// ordering is always done with flags in peer memory; the modes differ in the launch.
enum class SyncMode : int {
  kAuto = 0,            // the arch policy (README, src/host/arch.cpp), then the self-check.
  kGridDependency = 1,  // programmatic dependent launch (PDL): the kernel launches while the
                        // previous one drains, waits on the grid dependency before touching its
                        // inputs, triggers dependents after its last write. Validated on SM90.
  kFlagBarrier = 2,     // plain stream order, no programmatic launch. Valid on every arch.
};

// What a call computes.
enum class Op : int {
  kAllReduce = 0,             // out = sum(input)
  kAllReduceAdd = 1,          // residual_out = residual_in + sum(input)
  kAllReduceAddRMSNorm = 2,   // residual_out as above; norm_out = RMSNorm(residual_out) * gamma
};

const char* toString(DType dtype);
const char* toString(Strategy strategy);
const char* toString(SyncMode mode);
const char* toString(Op op);

// ---------------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------------

constexpr unsigned kConfigVersion = 1;

// Communicator configuration. Default-construct it, change what you need, pass it to
// commCreate(). Environment variables (README, "Environment") override these fields when
// read_env is true; they are read once per commCreate, in one place (src/host/env.cpp).
struct Config {
  unsigned version = kConfigVersion;  // leave as is: lets future fields be added safely.

  Strategy strategy = Strategy::kAuto;     // ARFUSION_STRATEGY=auto|oneshot|twoshot|nccl
  SyncMode sync_mode = SyncMode::kAuto;    // ARFUSION_SYNC=auto|griddep|flag

  // Bytes of peer-visible workspace per rank (ARFUSION_WORKSPACE_MB). Half of it, at most 32 MiB per
  // peer, is the Lamport area of the one-shot; the rest is the flag-protocol area, whose size sets the
  // two-shot's step (each step pays two flag crossings, so larger steps are faster). Messages larger
  // than the workspace are processed in steps, never refused. Measured on 2 x H200, bf16, us per
  // call at 64 / 128 / 256 MiB (session 5): two-shot 2048 x 8192 150 / 136 / 133, 8192 x 8192
  // 554 / 506 / 484; one-shot and every message up to 8 MB the same at all three. Hence 256 MiB;
  // an engine that only decodes (messages of a few MB) can take 64 MiB and lose nothing.
  size_t workspace_bytes = size_t(256) << 20;

  // How long a device-side wait for a peer may spin before the call fails with kTimeout
  // (ARFUSION_TIMEOUT_S). Must be > 0. The first wait that fails (timeout or mismatch) fails the
  // communicator on the device too: the fused calls already queued behind it on the stream or in a
  // graph give up at once rather than each waiting this long, so a failed job drains its queue in
  // about one timeout.
  double timeout_seconds = 10.0;

  // Optional tuning file written by tools/arfusion-tune (ARFUSION_TUNING_FILE). nullptr: the
  // built-in table. A file that does not parse or does not match this machine is rejected with a
  // logged message and the built-in table is used. The file is used only where every rank loaded
  // the same one (a rank without a file makes every rank use the built-in table).
  const char* tuning_file = nullptr;

  // Run the creation-time checks (ARFUSION_SELF_CHECK=0 disables both; neither runs where the
  // strategy is kNccl, since both run fused kernels): the GridDependency self-check, where the arch
  // policy would use GridDependency (a wrong or slow result moves Auto to FlagBarrier), and, where
  // no measured Auto table applies (every topology but 2 x SM90 over NVLink, unless a tuning file
  // was loaded), the speed check: the fused one-shot and the NCCL path timed at 8-512 KiB, and
  // Auto takes the one-shot only at the sizes where it was faster on this machine. Both take the
  // max over ranks, so every rank decides alike; plan() reports the outcome. A fused path that
  // hangs here fails commCreate on every rank after one timeout_seconds.
  bool self_check = true;

  // Most blocks a fused kernel may use on each GPU (ARFUSION_MAX_BLOCKS); 0: the SM count. A fused
  // kernel spin-waits for its peers, so all its blocks must be resident at once. Communicators
  // used at the same time on the same GPUs (from different streams) must fit together: give each
  // a share, e.g. SM count / 2 for two (the fused kernels run one block per SM). The smallest
  // value over the ranks applies.
  int max_blocks = 0;

  // Let ARFUSION_* environment variables override the fields above. (ARFUSION_TWO_SHOT_SPLIT, a
  // diagnostic switch with no field here, is read either way; README, "Environment".)
  bool read_env = true;
};

// ---------------------------------------------------------------------------------------------
// Communicator
// ---------------------------------------------------------------------------------------------

class Communicator;  // opaque

// Creates an arfusion communicator over the ranks of an existing NCCL communicator. Collective:
// every rank of `nccl` calls it, with the CUDA device of that rank current. It learns rank, size and
// device from NCCL, allocates the workspace and exchanges access to it through `nccl` itself (CUDA
// IPC between processes, direct peer pointers between threads of one process). Fusion is enabled
// only if every pair of ranks is on one host with peer access; otherwise every call takes the NCCL
// path, and plan() says why. `nccl` must outlive the returned communicator. A failure on one rank
// (bad config or environment, an allocation) is exchanged, so every rank fails with the same
// message; only a CUDA or NCCL failure inside the exchanges themselves, which run on `nccl`,
// leaves the peers waiting in NCCL, as a failed ncclCommInitRank would.
Status commCreate(ncclComm_t nccl, const Config& config, Communicator** comm);

// Frees everything commCreate allocated (workspace, IPC mappings, host memory). Waits for this
// communicator's work in flight. Not collective, but call it on a rank only once no peer has a
// call in flight either (synchronise every rank's streams, then a host barrier): a peer's fused
// kernel pushes into this rank's workspace without waiting, and between threads of one process
// that memory may by then belong to another allocation. After a failure, the peers' calls end
// within their timeout (or commAbort on every rank).
Status commDestroy(Communicator* comm);

// Makes every fused kernel of this communicator that is waiting for a peer give up (kAborted) and
// fails the communicator: every later call returns kAborted. Safe from any host thread; does not
// block (it queues a 4-byte copy into the abort word in device memory on a stream of its own,
// which a copy engine runs beside the waiting kernels; they notice it within a few hundred
// microseconds).
Status commAbort(Communicator* comm);

// Reads the device-side error word without synchronizing: kSuccess, kTimeout, kAborted or
// kMismatch. `detail` (optional) receives a message naming the block, peer and epoch that failed;
// it stays valid until this thread's next arfusion call.
Status commGetAsyncError(Communicator* comm, const char** detail = nullptr);

// Rank, size and CUDA device of the communicator.
Status commInfo(const Communicator* comm, int* rank, int* world_size, int* device);

// Overrides the strategy and sync mode for later calls. Must be called with the same values on
// every rank between the same two calls (these choices decide what kernels wait for). Ranks that
// differ fail with kMismatch where their kernels meet in one protocol (the call signature holds
// the strategy, not the sync mode) and with kTimeout where they do not: under GridDependency the
// one-shot, and the two-shot where it fits one unit per block, run the Lamport protocol, under
// FlagBarrier the flag protocol, and neither reads the other's signature.
Status commSetStrategy(Communicator* comm, Strategy strategy, SyncMode sync_mode);

// ---------------------------------------------------------------------------------------------
// Planning
// ---------------------------------------------------------------------------------------------

struct Shape {
  int64_t tokens = 0;
  int64_t hidden = 0;
  DType dtype = DType::kBFloat16;
  Op op = Op::kAllReduceAddRMSNorm;
};

struct Plan {
  Strategy strategy = Strategy::kNccl;  // never kAuto
  SyncMode sync_mode = SyncMode::kFlagBarrier;  // never kAuto; meaningless for kNccl
  int blocks = 0;          // grid of the fused kernel (0 for kNccl)
  int rows_per_step = 0;   // rows a block moves per synchronised step (0 for kNccl)
  // The fused kernel's protocol (README, "Sync modes"): true for a Lamport kernel, whose data is
  // its own ready flag (every GridDependency one-shot; a GridDependency two-shot whose blocks take
  // one step each and whose step fits a Lamport region), false for the flag-barrier kernels.
  bool lamport = false;
  // Blocks that share each row (a thread block cluster, each block pushing and polling its share
  // of the row's vectors); 1: one block per row. Only the Lamport one-shot at few tokens uses more.
  int row_blocks = 1;
  char reason[256] = {};   // why: which rule or table entry applied
};

// Which strategy and sync mode a call of this shape would take now, and why. Pure: identical on
// every rank for identical communicator state and shape.
Status plan(const Communicator* comm, const Shape& shape, Plan* out);

// ---------------------------------------------------------------------------------------------
// Collectives. All tensors are row-major [tokens x hidden] of `dtype`, gamma is [hidden].
// Any device pointer on the communicator's device, aligned to its element size, works; no
// registration (a pointer not aligned to sizeof(dtype) is kInvalidArgument). 16-byte aligned pointers
// and hidden * sizeof(dtype) % 16 == 0 take the vector path; anything else a correct slower path.
// The path is part of a fused call's signature: pass pointers of the same alignment (all 16-byte
// aligned, or all not) on every rank of a call, or the call fails with kMismatch everywhere.
// In-place is allowed where noted. tokens >= 1, 1 <= hidden <= 65536.
// ---------------------------------------------------------------------------------------------

// residual_out = residual_in + sum(input); norm_out = RMSNorm(residual_out) * gamma.
// residual_out may equal residual_in (in place). norm_out must not alias input or residual_*.
// eps >= 0.
Status allReduceAddRMSNorm(Communicator* comm, const void* input, const void* residual_in,
                           void* residual_out, const void* gamma, void* norm_out, int64_t tokens,
                           int64_t hidden, DType dtype, float eps, cudaStream_t stream);

// residual_out = residual_in + sum(input). residual_out may equal residual_in.
Status allReduceAdd(Communicator* comm, const void* input, const void* residual_in,
                    void* residual_out, int64_t tokens, int64_t hidden, DType dtype,
                    cudaStream_t stream);

// out = sum(input). out may equal input.
Status allReduce(Communicator* comm, const void* input, void* out, int64_t tokens, int64_t hidden,
                 DType dtype, cudaStream_t stream);

// ---------------------------------------------------------------------------------------------
// Single-GPU building block: the fused residual-add + RMSNorm kernel of the NCCL path, exposed for
// engines and benchmarks. residual_out = residual_in + x; norm_out = RMSNorm(residual_out) * gamma.
// x may equal norm_out (the NCCL path reduces into norm_out and normalises in place).
// ---------------------------------------------------------------------------------------------
Status addRMSNorm(const void* x, const void* residual_in, void* residual_out, const void* gamma,
                  void* norm_out, int64_t tokens, int64_t hidden, DType dtype, float eps,
                  cudaStream_t stream);

}  // namespace arfusion
