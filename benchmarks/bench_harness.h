// Shared timing harness of the benchmarks and tools/arfusion-bench: ranks as threads of one
// process (one GPU each, NCCL + arfusion communicators), every path timed under CUDA-graph replay
// with CUDA events, median over repeats, max over ranks.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "arfusion/arfusion.h"

namespace arfbench {

// Exit statuses of every tool and benchmark: 0 success, 1 a failed check or measurement, 2 a usage
// error, 77 the machine cannot run it (ctest's and automake's "skipped").
constexpr int kExitOk = 0, kExitFailed = 1, kExitUsage = 2, kExitSkip = 77;

// "" if at least `need` CUDA GPUs are visible, else a sentence a person understands saying why not
// (no driver, no GPU, too few). *found gets the count.
std::string gpuShortfall(int need, int* found);
// Versions as people write them: CUDA 13000 -> "13.0", NCCL 22809 -> "2.28.9".
std::string cudaVersionString(int version);
std::string ncclVersionString(int version);

// kOneShotFlag: the one-shot with the FlagBarrier sync mode (flag protocol, no PDL), the default on
// arches where GridDependency is not validated; kOneShot/kTwoShot take the sync mode Auto picks.
// kPeerCopy: every rank copies the message into the next rank's memory with the copy engine;
// kPeerStore: the same with SM stores (peerStore, every SM, 16-byte stores): the peer-store
// bandwidth the fused kernels' bus bandwidth is compared with. kCopy: every rank copies twice the
// message's bytes device to device (copy engine): the traffic of an add-RMSNorm (two reads, two
// writes of the message), the ceiling the single-GPU kernel is compared with.
enum class Path { kNcclAllReduce, kAddRMSNorm, kNcclPath, kOneShot, kTwoShot, kAuto, kPeerCopy, kOneShotFlag, kPeerStore, kCopy };
const char* pathName(Path p);

struct Timing {
  double us = 0;          // median per call, max over ranks
  std::string plan;       // the fused paths' plan (strategy/sync, grid, rows), as forced or as Auto picks
  std::string error;      // non-empty if the path could not run
};

// "none", "fp8", "fp8-token", "fp8-group", "nvfp4" (toString's names) to the format; false if unknown.
bool parseQuantFormat(const std::string& text, arfusion::QuantFormat* format);
// The layout each quantized format is timed with: the GEMMs' own (DeepGEMM's column-major scales,
// CUTLASS's swizzled NVFP4 scales).
arfusion::ScaleLayout benchLayout(arfusion::QuantFormat format);
// Bytes a fused call or the single-GPU kernel reads and writes in HBM on each rank (the message's
// input, residual, residual_out, norm_out unless the call leaves it out, and the quantized values
// and scales).
double hbmBytes(int64_t tokens, int64_t hidden, arfusion::DType dtype, arfusion::QuantFormat quant, bool norm_out = true);

class Group {
 public:
  // world ranks on GPUs 0..world-1 over NCCL, or (local) a test group of world ranks sharing GPU 0
  // without NCCL (testing::createGroup, each rank SM count / world blocks): what one GPU can time,
  // a fused call with and without a feature, never the link. error() says why not, if it could not
  // be built.
  explicit Group(int world, const arfusion::Config& config = arfusion::Config(), bool local = false);
  ~Group();
  const std::string& error() const { return error_; }
  int world() const { return world_; }
  std::string deviceName() const;
  bool local() const { return local_; }
  // Times one path. op applies to the fused paths and the NCCL path; quant (the fused op only) adds
  // a quantized output (benchLayout) to the fused paths, the NCCL path and the single-GPU kernel;
  // gemma (the fused op only) takes Gemma weights, the extended epilogue without a quantized output;
  // norm_out false (with a quantized output) leaves norm_out out: the quantized row is the call's
  // only normalised output, as an engine whose next GEMM reads it asks.
  Timing time(Path path, arfusion::Op op, arfusion::DType dtype, int64_t tokens, int64_t hidden,
              arfusion::QuantFormat quant = arfusion::QuantFormat::kNone, bool gemma = false, bool norm_out = true);
  // The plan rank 0 makes for this shape under strategy/sync (default: Auto's pick); "?" if refused.
  std::string planOf(arfusion::Op op, arfusion::DType dtype, int64_t tokens, int64_t hidden,
                     arfusion::Strategy strategy = arfusion::Strategy::kAuto, arfusion::SyncMode sync = arfusion::SyncMode::kAuto,
                     bool extended = false);
  arfusion::Communicator* comm(int rank) const { return comms_[rank]; }
  // Runs f on every rank at once, one thread per rank with its device current.
  void onEach(const std::function<void(int rank, arfusion::Communicator*, cudaStream_t)>& f) {
    onAll([&](int r) { f(r, comms_[r], streams_[r]); });
  }

 private:
  void onAll(const std::function<void(int)>& f);
  int world_ = 0;
  bool local_ = false;
  std::vector<ncclComm_t> nccl_;
  std::vector<arfusion::Communicator*> comms_;
  std::vector<cudaStream_t> streams_;
  std::string error_;
};

// The tools' common start: a Group over every visible GPU (2 or more). Otherwise prints why on
// stderr, prefixed by `tool`, sets *exit_code (kExitSkip: too few GPUs; kExitFailed: the group
// could not be built) and returns null.
std::unique_ptr<Group> openAllGpus(const char* tool, int* exit_code, const arfusion::Config& config = arfusion::Config());

// One timed repeat on stream s: e0, whatever `enqueue` issues ("" or why it failed), e1, and the
// elapsed milliseconds in *ms. "" or why it could not be timed; a non-positive time is an error
// too, so that a failure never reads as a fast repeat.
std::string timeOnce(cudaStream_t s, cudaEvent_t e0, cudaEvent_t e1, const std::function<std::string()>& enqueue, float* ms);

// Fills a device buffer with random normal values of dtype (cuRAND Philox, on the device).
void fillRandom(void* p, size_t count, arfusion::DType dtype, unsigned long long seed, cudaStream_t s);

// Copies the first bytes / 16 * 16 bytes from src to dst, a peer's buffer, with 16-byte SM stores
// from one 512-thread block per SM. On 2 x H200 NVLink every variant with that many blocks or more
// (one or four packs per thread in flight, weak or relaxed.sys stores) came within 1% of the fastest.
void peerStore(const void* src, void* dst, size_t bytes, cudaStream_t s);

}  // namespace arfbench
