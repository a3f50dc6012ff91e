// Multi-rank GPU test harness: the same scenario runs as W ranks, as
//   * threads of one process over NCCL, one GPU each (ThreadsNccl),
//   * processes over NCCL, one GPU each (test_gpu_procs: forked before any CUDA call),
//   * threads of one process without NCCL, several ranks per GPU (LocalGroup: 3..8 ranks on 1-2 GPUs).
// A scenario returns "" on success or a description of the first failure.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <functional>
#include <string>
#include <vector>

#include "arfusion/arfusion.h"
#include "quant_ref.h"

namespace arftest {

struct RankCtx {
  int rank = 0, world = 1, device = 0;
  arfusion::Communicator* comm = nullptr;
  ncclComm_t nccl = nullptr;  // null in local groups
  cudaStream_t stream = nullptr;
  // Host all-gather among the ranks (for cross-rank checks).
  std::function<void(const void* mine, void* all, size_t bytes)> allGather;
};

using Scenario = std::function<std::string(RankCtx&)>;

int gpuCount();
// A GPU test binary's exit status when every test it ran was skipped: ctest's SKIP_RETURN_CODE
// (tests/CMakeLists.txt), so that an entry that ran nothing reads as skipped, not passed.
constexpr int kExitSkipped = 77;
// Host all-gather among ranks through NCCL on `stream` (blocking).
std::function<void(const void*, void*, size_t)> ncclHostAllGather(ncclComm_t nccl, cudaStream_t stream, int rank, int world);
// Runs `scenario` on `world` ranks as threads over NCCL (one GPU each). "" or the first failure
// (prefixed by its rank). *skip gets a reason if the machine cannot run it.
std::string runThreadsNccl(int world, const arfusion::Config& config, const Scenario& scenario, std::string* skip);
// Runs on `world` ranks spread round-robin over the visible GPUs, without NCCL.
std::string runLocalGroup(int world, const arfusion::Config& config, int max_blocks, const Scenario& scenario,
                          std::string* skip);

// ---- scenarios (gpu_scenarios.cpp)
// Collective verdict (a host barrier that carries each rank's outcome): every rank contributes its
// local error (if any) and a hash of its outputs, and takes part even after a local failure, so no
// peer is left waiting in a collective: all ranks stop together. "" only if no rank failed and all
// hashes are equal; otherwise this rank's error, or which rank failed or differs.
std::string agreeStep(RankCtx& ctx, const std::string& local, uint64_t h);
// Worst errors seen by scenarioShape on rank 0 (for tools/arfusion-check): [0] allreduce out,
// [1] residual_out, [2] norm_out, over every path.
struct CaseStats {
  double max_abs[3] = {0, 0, 0};
  double max_ulp[3] = {0, 0, 0};
  int paths = 0;
};

struct ShapeCase {
  arfusion::DType dtype;
  int64_t tokens, hidden;
  uint64_t seed;
  bool all_ops = false;     // also kAllReduce and kAllReduceAdd
  bool misalign = false;    // offset every pointer by one element (scalar path)
  bool negzero = false;     // inputs contain -0.0
  CaseStats* stats = nullptr;  // filled on rank 0 if set
  double scale = 1.0;       // of inputs and residual: 1e-3 makes eps (1e-5) dominate the mean square
};
// Every fused strategy x sync mode (and the NCCL path where there is one) on fresh random inputs:
// outputs poisoned, compared with the float64 reference, every element written, bitwise identical
// across ranks, and bitwise equal to the NCCL path at 2 ranks.
std::string scenarioShape(RankCtx& ctx, const ShapeCase& c);
// Back-to-back calls whose token count, hidden size (vector and scalar paths), dtype, strategy and
// sync mode change every call, eager and in a CUDA graph; every fused output compared bit for bit
// on the device with a reference path (NCCL at 2 ranks, the other fused strategy otherwise).
// `calls` calls in total, *compared of them fused. Outputs are poisoned before every call, eager
// and in the graph (memset nodes). Host barriers that carry each rank's error (agreeStep) separate
// the eager calls, the capture and instantiation, and the replays: ranks sharing a GPU would
// otherwise have one rank's instantiation wait behind its peers' spinning calls.
std::string scenarioSoak(RankCtx& ctx, int64_t calls, uint64_t seed, int64_t* compared, unsigned long long* mismatches);
// One communicator, calls alternating between two streams with no host sync: the library orders
// them; every call's output is checked against the float64 reference.
std::string scenarioTwoStreams(RankCtx& ctx);
// A second communicator over the same GPUs (NCCL split), both used at once from two streams,
// issued in opposite orders on the two ranks, `iterations` times; every output compared with a
// golden call checked against the float64 reference. Both use `config` (its max_blocks must let
// their grids fit together).
std::string scenarioTwoCommunicators(RankCtx& ctx, const arfusion::Config& config, int iterations);
// NaN (incl. the all-ones pattern of Lamport sentinels), +-Inf, -0.0 and overflow in the inputs:
// every fused path gives what the NCCL path gives (NaN matching any NaN).
std::string scenarioSpecialValues(RankCtx& ctx);
// Bad input: each returns the documented status, leaves every output byte untouched and the
// communicator usable.
std::string scenarioBadInput(RankCtx& ctx);

// The extended epilogue (NormArgs): a quantized output in format q, Gemma weights, no residual.
// Every path (NCCL where the group has it, one-shot and two-shot in both sync modes, Auto) on fresh
// random inputs, every output poisoned first: residual_out and norm_out against the float64
// reference; the quantized values and the whole scale buffer, padding included, byte for byte
// against the recipe applied to the norm_out the call wrote (quant_ref.h); every dequantized value
// within the format's error bound of norm_out; a second call without norm_out and residual_out must
// write the same quantized bytes; bitwise identical on every rank and on every path.
struct QuantShapeCase {
  arfusion::DType dtype;
  int64_t tokens, hidden;
  uint64_t seed;
  QuantCase quant;
  bool gemma = false;
  bool no_residual = false;
};
std::string scenarioQuant(RankCtx& ctx, const QuantShapeCase& c);
// The same on one GPU through the single-GPU addRMSNorm(NormArgs), with input x as the sum.
std::string checkAddRMSNormQuant(const QuantShapeCase& c);

// Whether x, the bits of one element of dtype d, is a NaN (any payload, either sign).
bool isNaNBits(uint32_t x, arfusion::DType d);

// ---- device helpers (compare.cu)
// Kernel loading (tests/compare.cu). preloadTestKernels: the helpers below, loaded now on the
// current device (runThreadsNccl, runLocalGroup and the process test's main do it before any rank
// makes a call).
// kernelLoaded: whether `kernel` is loaded on the current device. loadingProbe: a kernel nothing
// else launches, loaded before and after its one launch (before == true: this process loads eagerly).
std::string preloadTestKernels();
std::string kernelLoaded(const void* kernel, bool* loaded);
std::string loadingProbe(bool* before, bool* after);
cudaError_t countMismatch(const void* a, const void* b, size_t bytes, unsigned long long* counter, cudaStream_t s);
cudaError_t perturb(void* p, size_t bytes, cudaStream_t s);
// The library's E4M3 and E2M1 conversions of in[0..n) on the device (src/kernels/quant.h).
cudaError_t convertOnDevice(const float* in, uint8_t* e4m3, uint8_t* e2m1, size_t n, cudaStream_t s);

}  // namespace arftest
