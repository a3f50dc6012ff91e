// arfusion: the tensor-parallel allreduce fused with the residual add and RMSNorm that follow it.
//
// On every rank of a tensor-parallel group, one call replaces "NCCL allreduce, then an add-RMSNorm
// kernel" over a row-major [tokens x hidden] tensor:
//
//     s            = sum over ranks of input          (fused paths: fp32, rank order 0..n-1)
//     residual_out = residual_in + s
//     norm_out     = residual_out * rsqrt(mean(residual_out^2) + eps) * gamma      (per token)
//
// Fused kernels move data over NVLink/PCIe peer memory; where fusion is unavailable or slower, the
// call takes the NCCL path (ncclAllReduce + arfusion's own add-RMSNorm kernel) on its own.
//
// Conventions (docs/api.md has them in full):
//   * No exception crosses this API. Every call returns a Status; lastError() says why.
//   * The CUDA stream is the last argument; calls are asynchronous and can be captured into CUDA
//     graphs (pointers captured must stay valid while the graph is replayed).
//   * Collective: every rank makes the same calls, in the same order, with the same shapes, dtypes
//     and settings. Paired calls that differ fail with kMismatch; a rank that stops calling leaves
//     its peers to fail with kTimeout after Config::timeout_seconds. Nothing waits forever.
//   * One call in flight per communicator (eager calls on different streams are ordered for you).
//   * Kernels you launch with programmatic dependent launch (PDL) between fused calls must wait on
//     their grid dependency before touching a fused call's tensors (docs/design.md, section 5).
//   * Bad input returns kInvalidArgument or kNotSupported before anything is launched: no output
//     byte is written.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>

#define ARFUSION_VERSION_MAJOR 0
#define ARFUSION_VERSION_MINOR 5
#define ARFUSION_VERSION_PATCH 0

// Marks the library's exported entry points (everything else in the shared library is hidden).
#if defined(_WIN32)
#define ARFUSION_API
#else
#define ARFUSION_API __attribute__((visibility("default")))
#endif

namespace arfusion {

// ---------------------------------------------------------------------------------------------
// Status and errors
// ---------------------------------------------------------------------------------------------

enum class Status : int {
  kSuccess = 0,
  kInvalidArgument = 1,  // null, misaligned or host pointer, bad shape, dtype, eps or setting
  kNotSupported = 2,     // valid, but this communicator cannot serve it (a forced strategy that
                         // cannot run, a forced GridDependency that failed its self-check, ...)
  kCudaError = 3,        // a CUDA call failed; lastError() has CUDA's message
  kNcclError = 4,        // an NCCL call failed; lastError() has NCCL's message
  kTimeout = 5,          // a peer did not arrive within Config::timeout_seconds (found on the device)
  kAborted = 6,          // commAbort() was called, or the communicator failed earlier
  kInternalError = 7,    // a bug in arfusion: please report it with lastError()
  kMismatch = 8,         // ranks paired calls of different ops, dtypes, shapes, strategies or sync
                         // protocols (found on the device)
};
// After kTimeout, kAborted or kMismatch the communicator is failed: every later call returns the
// same status. Destroy it.

// Short constant name of a status ("kTimeout"). Never null.
ARFUSION_API const char* statusString(Status status);

// Detailed message of the calling thread's last failing arfusion call ("" if none). Valid until
// the thread's next arfusion call.
ARFUSION_API const char* lastError();

// ---------------------------------------------------------------------------------------------
// Types
// ---------------------------------------------------------------------------------------------

enum class DType : int { kFloat16 = 0, kBFloat16 = 1, kFloat32 = 2 };

// How a call moves data. kAuto picks per shape and is all a production engine needs.
enum class Strategy : int {
  kAuto = 0,
  kOneShot = 1,  // every rank pushes its input to every peer, each reduces all: one crossing
  kTwoShot = 2,  // reduce-scatter then all-gather over peer memory: 2(n-1)/n of the bytes
  kNccl = 3,     // ncclAllReduce + arfusion's add-RMSNorm kernel; always available
};

// How a fused kernel orders itself against the kernel before it on the stream (docs/design.md).
enum class SyncMode : int {
  kAuto = 0,            // the arch policy, confirmed by the creation-time self-check
  kGridDependency = 1,  // programmatic dependent launch (PDL); validated on SM90
  kFlagBarrier = 2,     // plain stream order; valid on every arch
};

// What a call computes.
enum class Op : int {
  kAllReduce = 0,            // out = sum(input)
  kAllReduceAdd = 1,         // residual_out = residual_in + sum(input)
  kAllReduceAddRMSNorm = 2,  // residual_out as above; norm_out = RMSNorm(residual_out) * gamma
};

// A quantized copy of the normalised row, for a GEMM that reads FP8 or NVFP4 (docs/design.md,
// "Quantized outputs", states each recipe and draws each layout).
enum class QuantFormat : int {
  kNone = 0,
  kFp8 = 1,          // FP8 E4M3, one static fp32 scale (device memory): q = satfinite(norm * (1 / scale))
  kFp8PerToken = 2,  // FP8 E4M3, one fp32 scale per row: max(absmax / 448, 1 / (448 * 512))
  kFp8PerGroup = 3,  // FP8 E4M3, one scale per 128 elements of a row (DeepSeek / DeepGEMM style)
  kNvfp4 = 4,        // FP4 E2M1, one E4M3 scale per 16 elements, one fp32 global scale (device memory)
};

// Where the scales go (scales of row t, group or block g).
enum class ScaleLayout : int {
  kLinear = 0,          // row-major: per-token fp32 [t]; per-group fp32 [t][hidden/128]; NVFP4 E4M3 [t][hidden/16]
  kColumnMajor = 1,     // per-group only, DeepGEMM's SM90 layout: fp32 [g * round_up(tokens, 4) + t]
  kUE8M0Packed = 2,     // per-group only, DeepGEMM's SM100 layout: scales rounded up to powers of two,
                        // int32 word [(g / 4) * round_up(tokens, 4) + t], byte g % 4 = biased exponent
  kSwizzled128x4 = 3,   // NVFP4 only, the CUTLASS / TensorRT-LLM FP4 GEMM layout: 128 x 4 tiles of
                        // round_up(tokens, 128) x round_up(hidden / 16, 4) bytes
};
// Padding entries of the tiled layouts (rows past tokens, columns past the last group) are written
// as zeros, so every byte of the buffer is defined.

// Short names: "bf16", "oneshot", "griddep", "allreduce_add_rmsnorm". Never null.
ARFUSION_API const char* toString(DType dtype);
ARFUSION_API const char* toString(Strategy strategy);
ARFUSION_API const char* toString(SyncMode mode);
ARFUSION_API const char* toString(Op op);
ARFUSION_API const char* toString(QuantFormat format);  // "none", "fp8", "fp8-token", "fp8-group", "nvfp4"
ARFUSION_API const char* toString(ScaleLayout layout);  // "linear", "column-major", "ue8m0-packed", "swizzled-128x4"

// ---------------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------------

constexpr unsigned kConfigVersion = 1;

// Default-construct, change what you need, pass to commCreate(). Each field's ARFUSION_* variable
// overrides it when read_env is true (read once per commCreate; docs/api.md, "Environment").
// Every rank must pass the same values (commCreate fails on every rank otherwise).
struct Config {
  unsigned version = kConfigVersion;  // leave as is: lets future fields be added safely

  Strategy strategy = Strategy::kAuto;   // ARFUSION_STRATEGY=auto|oneshot|twoshot|nccl
  SyncMode sync_mode = SyncMode::kAuto;  // ARFUSION_SYNC=auto|griddep|flag

  // Peer-visible workspace per rank, >= 1 MiB (ARFUSION_WORKSPACE_MB). Messages larger than it are
  // processed in steps, never refused; a larger workspace gives the two-shot larger steps. 64 MiB
  // loses nothing for an engine that only decodes (messages of a few MB).
  size_t workspace_bytes = size_t(256) << 20;

  // Seconds a device-side wait for a peer may spin before the call fails with kTimeout, > 0
  // (ARFUSION_TIMEOUT_S). Calls queued behind a failed one give up at once.
  double timeout_seconds = 10.0;

  // Tuning file written by arfusion-tune (ARFUSION_TUNING_FILE); nullptr: the built-in table. Used
  // only where every rank loaded the same valid file for this machine; otherwise logged and ignored.
  const char* tuning_file = nullptr;

  // Run the creation-time checks (ARFUSION_SELF_CHECK=0|1): the GridDependency self-check and, where
  // no measured Auto table applies, the speed check of the one-shot against the NCCL path. Neither
  // runs where the strategy is kNccl. docs/design.md, "Creation-time checks".
  bool self_check = true;

  // Most blocks a fused kernel may use per GPU (ARFUSION_MAX_BLOCKS); 0: the SM count. Fused kernels
  // spin-wait for peers, so communicators used at the same time on the same GPUs must fit together
  // (e.g. SM count / 2 each for two). The smallest value over the ranks applies.
  int max_blocks = 0;

  // Let ARFUSION_* environment variables override the fields above.
  bool read_env = true;
};

// ---------------------------------------------------------------------------------------------
// Communicator
// ---------------------------------------------------------------------------------------------

class Communicator;  // opaque

// Collective over the ranks of `nccl`, with each rank's CUDA device current. Allocates the
// workspace, exchanges access to it through `nccl` (CUDA IPC between processes, pointers between
// threads), loads every arfusion kernel and runs the creation-time checks. Fusion is on only if
// every pair of ranks is on one host with peer access; plan() says why not. A failure on one rank
// fails every rank with the same message. `nccl` must outlive the communicator.
ARFUSION_API Status commCreate(ncclComm_t nccl, const Config& config, Communicator** comm);

// Frees everything commCreate allocated; waits for this communicator's work. Call it on a rank
// only once no peer has a call in flight (synchronise every rank, then a host barrier): a peer's
// fused kernel writes into this rank's workspace without waiting.
ARFUSION_API Status commDestroy(Communicator* comm);

// Makes every fused kernel of this communicator that waits for a peer give up (kAborted), and fails
// the communicator. Safe from any host thread; never blocks.
ARFUSION_API Status commAbort(Communicator* comm);

// The device-side error, without synchronising: kSuccess, kTimeout, kAborted or kMismatch. `detail`
// (optional) gets a message naming the block, peer and epoch; valid until this thread's next call.
ARFUSION_API Status commGetAsyncError(Communicator* comm, const char** detail = nullptr);

// Rank, size and CUDA device of the communicator (null outputs are skipped).
ARFUSION_API Status commInfo(const Communicator* comm, int* rank, int* world_size, int* device);

// Forces a strategy and sync mode for later calls (kAuto: back to Auto). Call it on every rank with
// the same values between the same two calls: these choices decide what kernels wait for (ranks
// whose sync modes differ fail with kMismatch). kNotSupported, settings unchanged, for a
// GridDependency the creation-time self-check failed or, on an arch where it is not validated, did
// not run (force it in Config::sync_mode to run it).
ARFUSION_API Status commSetStrategy(Communicator* comm, Strategy strategy, SyncMode sync_mode);

// ---------------------------------------------------------------------------------------------
// Planning
// ---------------------------------------------------------------------------------------------

struct Shape {
  int64_t tokens = 0;
  int64_t hidden = 0;
  DType dtype = DType::kBFloat16;
  Op op = Op::kAllReduceAddRMSNorm;
  // A call through NormArgs with any of its options (a quantized output, no residual, Gemma
  // weights, an output left out) runs the extended epilogue, which plans one block per row.
  bool extended = false;
};

struct Plan {
  Strategy strategy = Strategy::kNccl;          // never kAuto
  SyncMode sync_mode = SyncMode::kFlagBarrier;  // never kAuto; meaningless for kNccl
  int blocks = 0;         // grid of the fused kernel (0 for kNccl)
  int rows_per_step = 0;  // rows a block moves per synchronised step (0 for kNccl)
  bool lamport = false;   // the kernel's data is its own ready flag (docs/design.md, "Protocols")
  int row_blocks = 1;     // blocks that share each row (a thread block cluster); 1: one per row
  char reason[256] = {};  // which rule or table entry decided, and the sync mode's reason
};

// What a call of this shape would run now, and why. Pure: the same on every rank.
ARFUSION_API Status plan(const Communicator* comm, const Shape& shape, Plan* out);

// ---------------------------------------------------------------------------------------------
// Collectives. Tensors are row-major [tokens x hidden] of `dtype`, gamma is [hidden]; any device
// pointers of the communicator's device aligned to their element size, no registration.
// tokens >= 1, 1 <= hidden <= 65536. 16-byte aligned pointers with hidden * element size % 16 == 0
// take the vector path, anything else a slower scalar path: use the same alignment on every rank.
// ---------------------------------------------------------------------------------------------

// residual_out = residual_in + sum(input); norm_out = RMSNorm(residual_out) * gamma; eps >= 0.
// residual_out may equal residual_in (in place); norm_out aliases neither input nor a residual.
ARFUSION_API Status allReduceAddRMSNorm(Communicator* comm, const void* input, const void* residual_in,
                                        void* residual_out, const void* gamma, void* norm_out, int64_t tokens,
                                        int64_t hidden, DType dtype, float eps, cudaStream_t stream);

// The fused op with every option, in one versioned argument struct (the calls above and below are
// thin wrappers of it). Default-construct, set the tensors and what you need:
//   residual_in   null: zero (a first layer); residual_out null: not written
//   norm_out      null: not written (when only the quantized copy is wanted)
//   gemma         norm = z * rsqrt(mean(z^2) + eps) * (1 + gamma)
//   quant         a quantized copy of norm (the values norm_out holds, rounded to the dtype)
// Options need 16-byte aligned tensors with hidden * element size % 16 == 0, rows of at most
// 16384 elements (8192 fp32); NVFP4 needs hidden % 16 == 0, per-group FP8 hidden % 128 == 0. Every
// rank passes the same options (they are part of the call's signature).
constexpr unsigned kNormArgsVersion = 1;
struct QuantOut {
  QuantFormat format = QuantFormat::kNone;
  ScaleLayout layout = ScaleLayout::kLinear;
  void* values = nullptr;        // [tokens x hidden] E4M3 bytes, or [tokens x hidden / 2] E2M1 pairs
                                 // (element 2j in the low nibble); 16-byte aligned
  void* scales = nullptr;        // dynamic formats and NVFP4: quantBufferBytes() bytes, in `layout`
  const float* scale = nullptr;  // kFp8: the static scale; kNvfp4: the global scale (448 * 6 / amax).
                                 // Device memory, read by the kernel (may change between graph replays)
  bool pow2_scales = false;      // kFp8PerGroup: round scales up to powers of two (UE8M0 values)
};
struct NormArgs {
  unsigned version = kNormArgsVersion;  // leave as is
  const void* input = nullptr;
  const void* residual_in = nullptr;
  void* residual_out = nullptr;
  const void* gamma = nullptr;
  void* norm_out = nullptr;
  int64_t tokens = 0, hidden = 0;
  DType dtype = DType::kBFloat16;
  float eps = 1e-6f;
  bool gemma = false;
  QuantOut quant;
};

// Bytes of the quantized values and of the scale buffer for `tokens` x `hidden` in this format and
// layout (scale_bytes 0 for kFp8, whose one scale is the caller's). kInvalidArgument, with the
// reason, for a combination that cannot be used (a layout of another format, hidden not a multiple
// of the format's group).
ARFUSION_API Status quantBufferBytes(QuantFormat format, ScaleLayout layout, int64_t tokens, int64_t hidden,
                                     size_t* values_bytes, size_t* scale_bytes);

// The fused op of `args` on every rank (as allReduceAddRMSNorm above, with the options).
ARFUSION_API Status allReduceAddRMSNorm(Communicator* comm, const NormArgs& args, cudaStream_t stream);

// residual_out = residual_in + sum(input). residual_out may equal residual_in.
ARFUSION_API Status allReduceAdd(Communicator* comm, const void* input, const void* residual_in, void* residual_out,
                                 int64_t tokens, int64_t hidden, DType dtype, cudaStream_t stream);

// out = sum(input). out may equal input.
ARFUSION_API Status allReduce(Communicator* comm, const void* input, void* out, int64_t tokens, int64_t hidden,
                              DType dtype, cudaStream_t stream);

// The NCCL path's single-GPU kernel on its own: residual_out = residual_in + x; norm_out =
// RMSNorm(residual_out) * gamma. x may equal norm_out.
ARFUSION_API Status addRMSNorm(const void* x, const void* residual_in, void* residual_out, const void* gamma,
                               void* norm_out, int64_t tokens, int64_t hidden, DType dtype, float eps,
                               cudaStream_t stream);

// The same with every NormArgs option (args.input is x; it may equal norm_out): the single-GPU
// add-RMSNorm-quant kernel the NCCL path runs after its allreduce.
ARFUSION_API Status addRMSNorm(const NormArgs& args, cudaStream_t stream);

}  // namespace arfusion
