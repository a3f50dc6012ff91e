// Host-visible interface of the kernels: plain-old-data parameter blocks and launch functions.
// Nothing here includes CUDA device headers, so host-only code (communicator, plan, tests) can use it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>

#include "arfusion/arfusion.h"

namespace arfusion::detail {

constexpr int kMaxRanks = 8;
// Threads of every fused and norm block. One block owns whole rows (the norm needs the full row);
// 512 threads cover a 4096-wide bf16 row with one 16-byte vector per thread.
constexpr int kThreads = 512;
// Vectors per thread a row may need and still live in registers; wider rows take a two-pass path
// that re-reads residual_out (its own writes) for the norm.
constexpr int kMaxVecPerThread = 4;
// Most blocks that may share a row (a thread block cluster of 2 or 4; the portable limit is 8,
// which measured slower than 4 at 1 x 8192 on H200).
constexpr int kMaxRowBlocks = 4;
// Data slots per block region. Two: the "data ready" flag of epoch e also proves the peer finished
// reading the other slot (epoch e-1), so epoch e+1 may overwrite it. See sync.cuh.
constexpr int kSlots = 2;
// Flag phases: 0 = one-shot data / two-shot reduce-scatter, 1 = two-shot all-gather.
constexpr int kPhases = 2;
// Bit 63 of every flag a kernel writes (the signature below it has 31 bits): a flag still zero
// from creation matches no epoch (sync.cuh, step 2).
constexpr uint64_t kFlagWritten = uint64_t(1) << 63;
// Bytes at the start of every Lamport region for the senders' call headers (one 16-byte pack per
// sender slot, sync.cuh "Call signatures"); the rows follow.
constexpr size_t kLamportHeaderBytes = 16 * kMaxRanks;

// Codes of DeviceComm::error[0], written by the kernels (sync.cuh reportFailure), read by the host
// (Communicator::checkHealth).
enum : uint32_t { kErrNone = 0, kErrTimeout = 1, kErrAbort = 2, kErrMismatch = 3 };
// The peer recorded in DeviceComm::error[1] for a failed wait on the blocks of this rank's own
// thread block cluster (the one-shot's norm exchange) rather than on a peer rank.
constexpr int kPeerOwnCluster = 0xff;
// Values of DeviceComm::abort_flag, the word every wait checks: non-zero makes it give up.
// kStopAbort: commAbort() was called (the wait reports kErrAbort). kStopFailed: a wait of this
// communicator already failed (timeout or mismatch, recorded in `error`), so every later wait, in
// this kernel or in calls queued behind it (a CUDA graph holds dozens), gives up at its first check
// instead of spinning its own full timeout: N queued calls took N timeouts to drain before.
enum : uint32_t { kStopNone = 0, kStopAbort = 1, kStopFailed = 2 };

// Device-side view of one rank's communicator: peer pointers and the control words. Passed by value.
struct DeviceComm {
  uint64_t* flags[kMaxRanks];  // each rank's flag array: [kPhases][max_blocks][kMaxRanks] (by sender),
                               // each flag = kFlagWritten | call signature << 32 | epoch
  uint8_t* data[kMaxRanks];    // each rank's data regions: [max_blocks][kSlots][region_bytes]
  uint8_t* lamport[kMaxRanks]; // each rank's Lamport regions: [max_blocks][kSlots][lamport_region_bytes]; all-ones when idle
  uint32_t* epochs;            // this rank's per-block epoch counters [max_blocks] (local)
  uint32_t* error;             // host-mapped: [0] code (kErr*), [1] block<<8|peer, [2] epoch
  uint32_t* abort_flag;        // local device memory, kStop* (above): set by commAbort() and by a failed wait
  unsigned long long timeout_ns;
  size_t region_bytes;         // bytes of one (block, slot) region of the data area
  size_t lamport_region_bytes; // bytes of one (block, slot) region of the Lamport area
  int rank;
  int world;
  int max_blocks;
  int two_shot_split = 1;      // 1: the two-shot splits steps 3-5 between its warps (twoshot.cuh); 0: whole block
  // Test only (testing::skipAllGatherSignals): 1 makes the flag two-shot of this rank never signal
  // phase 1 of a unit after which its block has another one, so that a peer's split waiting half
  // fails between two steps of one call. 0 in every communicator the library hands out.
  int test_skip_ag_signal = 0;
  // Test only (testing::skipClusterPartialSums): 1 makes block 1 of every cluster of this rank's
  // cluster kernels send no partial sums of squares, so that the other blocks' norm exchange must
  // end on its bound. 0 in every communicator the library hands out.
  int test_cluster_skip_partial = 0;
};

// One call's tensors. `out` is norm_out (kAllReduceAddRMSNorm) or the allreduce output (kAllReduce).
struct RowArgs {
  const void* input = nullptr;
  const void* residual_in = nullptr;
  void* residual_out = nullptr;
  const void* gamma = nullptr;
  void* out = nullptr;
  int64_t tokens = 0;
  int64_t hidden = 0;
  float eps = 0.f;
  Op op = Op::kAllReduceAddRMSNorm;
  // Fused kernels: this call's signature (callSignature()), compared with every peer's.
  uint32_t sig = 0;
  // The extended epilogue (arfusion::NormArgs options; kernels compiled with kExt, op
  // kAllReduceAddRMSNorm only): residual_in may be null (zero), residual_out and out may be null,
  // Gemma weights (norm * (1 + gamma)), a quantized copy of the normalised row (quant.h).
  bool ext = false;
  bool gemma = false;
  uint8_t quant = 0;         // kQuant* (quant.h)
  uint8_t scale_layout = 0;  // kLayout* (quant.h)
  bool pow2_scales = false;  // per-group FP8: scales rounded up to powers of two
  void* q_out = nullptr;     // quantized values, row-major
  void* q_scales = nullptr;  // scales in scale_layout
  const float* q_scale_in = nullptr;  // FP8 static scale, or the NVFP4 global scale (device memory)
  int64_t scale_rows = 0;    // rows of the scale layout (scaleRows: padding rows are written as zeros)
  int64_t scale_cols = 0;    // its columns (NVFP4 swizzled: hidden / 16 rounded up to 4)
  // Row `row` of this launch is row row + q_row0 of the quantized outputs, of q_tokens in all: the
  // NCCL path without norm_out runs the epilogue in chunks whose other pointers are offset.
  int64_t q_row0 = 0;
  int64_t q_tokens = 0;
  // NVFP4 swizzled scales (RowEpilogue::paddingLines): padding_by_blocks, the 16-byte lines of the
  // last 128-row tile that hold no real row are written by the last pad_workers blocks of the grid
  // after their rows, not by the rows (the single-GPU kernel and the one-shot set it; the two-shot's
  // rows write them); the last pad_blocks of those take no rows. Both 0 but in the launch that
  // holds the call's last row, and identical on every rank (derived from the shape).
  bool padding_by_blocks = false;
  int pad_workers = 0;
  int pad_blocks = 0;
};

inline RowArgs makeRowArgs(Op op, const void* input, const void* residual_in, void* residual_out, const void* gamma,
                          void* out, int64_t tokens, int64_t hidden, float eps) {
  RowArgs a;
  a.input = input;
  a.residual_in = residual_in;
  a.residual_out = residual_out;
  a.gamma = gamma;
  a.out = out;
  a.tokens = tokens;
  a.hidden = hidden;
  a.eps = eps;
  a.op = op;
  return a;
}

// Grid decisions of a fused call; identical on all ranks (derived from the shape and from values
// agreed at creation), since they decide which flags each block waits for.
struct FusedLaunch {
  int blocks = 0;         // grid size, <= max_blocks
  int rows_per_step = 0;  // rows per rank a block moves per synchronised step (R)
  bool vector = true;     // 16-byte path (aligned pointers, row bytes % 16 == 0)
  SyncMode sync = SyncMode::kFlagBarrier;
  DType dtype = DType::kBFloat16;
  bool lamport = false;   // Lamport kernel (plan.h usesLamport); for the one-shot, sync == kGridDependency
  int row_blocks = 1;     // blocks per row: > 1 runs clusters of that many blocks, each of
                          // kThreads / row_blocks threads, sharing a row (Lamport one-shot only)
};

// Bytes one row occupies in the workspace (rounded up to 16 so vector rows stay aligned).
inline size_t rowStride(int64_t hidden, DType dtype) {
  const size_t elem = dtype == DType::kFloat32 ? 4 : 2;
  return (static_cast<size_t>(hidden) * elem + 15) / 16 * 16;
}

// 31 bits that every rank computes alike for the same call (op, dtype, shape, strategy, grid and
// the extended epilogue's options)
// and that differ, but for hash collisions, when ranks pair calls that do not match. Never all-ones
// in any 32-bit word it is stored in (bit 31 is clear): the Lamport header relies on it.
inline uint32_t callSignature(const RowArgs& a, const FusedLaunch& l, Strategy strategy) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the fields
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  mix(static_cast<uint64_t>(a.op));
  mix(static_cast<uint64_t>(l.dtype));
  mix(static_cast<uint64_t>(a.tokens));
  mix(static_cast<uint64_t>(a.hidden));
  mix(static_cast<uint64_t>(strategy));
  mix(static_cast<uint64_t>(l.blocks));
  mix(static_cast<uint64_t>(l.rows_per_step));
  mix(l.vector ? 1 : 0);
  mix(static_cast<uint64_t>(l.row_blocks));
  if (a.ext)  // the extended epilogue's options: ranks must agree on them too
    mix(uint64_t(1) << 40 | uint64_t(a.quant) << 32 | uint64_t(a.scale_layout) << 24 | uint64_t(a.pow2_scales) << 16 |
        uint64_t(a.gemma) << 8 | uint64_t(a.residual_in != nullptr) << 2 | uint64_t(a.residual_out != nullptr) << 1 |
        uint64_t(a.out != nullptr));
  return static_cast<uint32_t>(h ^ (h >> 32)) & 0x7fffffffu;
}

// Every kernel this library can launch, handed to visit() as its `const void*` function pointer
// (stops at the first error). One enumerator per kernels file, from the same dispatch the launches
// use, so that none is left out.
using KernelVisitor = std::function<cudaError_t(const void* kernel)>;
cudaError_t forEachOneShotKernel(const KernelVisitor& visit);  // with the extended epilogue's (oneshot_ext.cu)
cudaError_t forEachTwoShotKernel(const KernelVisitor& visit);  // the same (twoshot_ext.cu)
cudaError_t forEachOneShotExtendedKernel(const KernelVisitor& visit);
cudaError_t forEachTwoShotExtendedKernel(const KernelVisitor& visit);  // with the kernels per format
cudaError_t forEachTwoShotPerFormatKernel(const KernelVisitor& visit);  // (twoshot_ext_formats.cu)
cudaError_t forEachAddRMSNormKernel(const KernelVisitor& visit);
cudaError_t forEachSelfCheckKernel(const KernelVisitor& visit);
inline cudaError_t forEachKernel(const KernelVisitor& visit) {
  for (auto each : {forEachOneShotKernel, forEachTwoShotKernel, forEachAddRMSNormKernel, forEachSelfCheckKernel}) {
    const cudaError_t e = each(visit);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

// Loads every kernel onto the current device now (cudaFuncGetAttributes loads the kernel it is
// asked about), so that no launch has to. Since CUDA 12.2 kernels load lazily, at their first
// launch, and a load may wait for the device to go idle (CUDA Programming Guide, "Lazy Loading",
// concurrent execution). A fused kernel spins until its peers run the same call: if a peer's host
// thread sits in such a load, waiting for its device, whose own fused kernel of another
// communicator waits for us, neither finishes until the timeout (two communicators used at once
// from a fresh process timed out or hung in 10 of 10 runs without this). commCreate calls this; it
// fails with cudaErrorNoKernelImageForDevice when the build has no code for the device.
inline cudaError_t preloadKernels() {
  return forEachKernel([](const void* kernel) {
    cudaFuncAttributes attr;
    return cudaFuncGetAttributes(&attr, kernel);
  });
}

// How many clusters of `row_blocks` blocks of the Lamport one-shot's cluster kernels (the fewest
// over its variants) can be resident at once on the current device (cudaOccupancyMaxActiveClusters
// with the launch's own configuration); 0 where the device has no cluster launch. Creation agrees on
// the fewest over ranks, and the plan takes no cluster grid beyond it, so no cluster launch fails.
cudaError_t oneShotMaxClusters(int row_blocks, int* clusters);

cudaError_t launchOneShot(const DeviceComm& comm, const RowArgs& args, const FusedLaunch& launch,
                          cudaStream_t stream);
cudaError_t launchTwoShot(const DeviceComm& comm, const RowArgs& args, const FusedLaunch& launch,
                          cudaStream_t stream);
// The extended epilogue's launches (args.ext), which launchOneShot / launchTwoShot hand over to.
cudaError_t launchOneShotExtended(const DeviceComm& comm, const RowArgs& args, const FusedLaunch& launch,
                                  cudaStream_t stream);
cudaError_t launchTwoShotExtended(const DeviceComm& comm, const RowArgs& args, const FusedLaunch& launch,
                                  cudaStream_t stream);
// The two-shot's calls that take their quantized format's own kernel (twoshot.cuh, perFormatTwoShot),
// which launchTwoShotExtended hands over to.
cudaError_t launchTwoShotPerFormat(const DeviceComm& comm, const RowArgs& args, const FusedLaunch& launch,
                                   cudaStream_t stream);
// residual_out = residual_in + input (x); out = RMSNorm(residual_out) * gamma (per args.op).
cudaError_t launchAddRMSNorm(const RowArgs& args, DType dtype, bool vector, cudaStream_t stream);

}  // namespace arfusion::detail
