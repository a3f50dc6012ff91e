// What the GPU test files share: the test configuration, shape scenarios, the fault-test
// machinery (a path under test, a call to fail, the timeout verdict), scoped fault injection.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "gpu_harness.h"
#include "reference.h"
#include "testing/testing.h"

namespace gputest {

using namespace arftest;
using arfusion::DType;
using arfusion::Status;

// timeout 0: ARFTEST_TIMEOUT_S if set (sanitizers slow kernels down a lot), else 5 s.
// Workspace 64 MiB, not the default 256: the large cases of fullShapes() are then larger than the
// workspace (the process tests and the benchmarks run the default).
inline arfusion::Config testConfig(double timeout = 0) {
  arfusion::Config c;
  c.workspace_bytes = size_t(64) << 20;
  const char* env = std::getenv("ARFTEST_TIMEOUT_S");
  c.timeout_seconds = timeout > 0 ? timeout : env ? std::atof(env) : 5.0;
  c.read_env = false;
  return c;
}

inline Scenario allShapes(std::vector<ShapeCase> cases) {
  return [cases](RankCtx& ctx) -> std::string {
    for (const ShapeCase& c : cases) {
      if (ctx.rank == 0 && std::getenv("ARFTEST_PROGRESS"))
        std::fprintf(stderr, "case %s %lld x %lld\n", arfusion::toString(c.dtype), (long long)c.tokens, (long long)c.hidden);
      const std::string e = scenarioShape(ctx, c);
      if (!e.empty()) return e;
    }
    return "";
  };
}

// Every wait loop: the Lamport one-shot and the Lamport two-shot (GridDependency: at these shapes every
// block has one unit, so the two-shot runs its Lamport kernel; enterPath checks it), the flag
// one-shot and the flag two-shot (FlagBarrier), and the flag two-shot with several steps per block
// (the kernel that splits steps 3-5, twoshot.cu), and the Lamport one-shot over clusters (one
// 4096-wide row on 4 blocks, Plan::row_blocks, whose blocks meet at the norm). On the split path
// too the peer fails every block's first wait (phase 0 of step 1); SplitFault below fails the
// split's waiting half between two steps.
struct FaultPath {
  arfusion::Strategy strategy;
  arfusion::SyncMode sync;
  bool lamport;                // the kernel this path must run (Plan::lamport)
  int64_t tokens = 4;          // of the calls
  bool several_steps = false;  // the plan must give its blocks more than one step
  int64_t hidden = 1024;
  int row_blocks = 1;          // the plan must spread each row over this many blocks
};

// Sets the path's strategy and sync mode and checks that a call of this shape runs the kernel the
// path is about, so that a test of one wait loop cannot silently exercise another.
inline std::string enterPath(RankCtx& ctx, const FaultPath& fp, std::initializer_list<arfusion::Shape> shapes) {
  if (arfusion::commSetStrategy(ctx.comm, fp.strategy, fp.sync) != Status::kSuccess) return arfusion::lastError();
  // Rows over clusters are planned on the measured two-GPU pair only: forced here, where they fit.
  if (arfusion::testing::forceRowBlocks(ctx.comm, fp.row_blocks > 1 ? fp.row_blocks : 0) != Status::kSuccess)
    return arfusion::lastError();
  for (const arfusion::Shape& sh : shapes) {
    arfusion::Plan pl;
    if (arfusion::plan(ctx.comm, sh, &pl) != Status::kSuccess) return arfusion::lastError();
    const int64_t per_unit = int64_t(pl.strategy == arfusion::Strategy::kTwoShot ? 2 : 1) * std::max(pl.rows_per_step, 1);
    const bool several = (sh.tokens + per_unit - 1) / per_unit > pl.blocks / pl.row_blocks;
    if (pl.strategy != fp.strategy || pl.lamport != fp.lamport || several != fp.several_steps || pl.row_blocks != fp.row_blocks)
      return std::string("the plan runs ") + arfusion::toString(pl.strategy) + (pl.lamport ? " (Lamport)" : " (flags)") +
             (several ? " in several steps" : " in one step") + " on " + std::to_string(pl.row_blocks) + " block(s) per row at " +
             std::to_string(sh.tokens) + " x " + std::to_string(sh.hidden) + ", not the path under test";
  }
  return "";
}
// A fault test's bf16 allReduceAddRMSNorm of tokens x hidden: its five operands, s bytes each, in
// one allocation (freed with the object): input bytes `input_byte` (0x3c3c is about 0.0115),
// residual 0x3c3c, residual_out and norm_out poisoned (NaN), gamma 0x3c3c. ok() is false if the
// allocation failed.
struct FaultCall {
  int64_t T, H;
  size_t s;
  char* b = nullptr;
  FaultCall(int64_t tokens, int64_t hidden, uint8_t input_byte = 0x3c) : T(tokens), H(hidden), s(size_t(tokens * hidden) * 2) {
    void* buf = nullptr;
    if (cudaMalloc(&buf, s * 5) != cudaSuccess) return;
    b = static_cast<char*>(buf);
    cudaMemset(b, input_byte, s);  // input
    cudaMemset(b + s, 0x3c, s);    // residual
    poisonOutputs();
    cudaMemset(gamma(), 0x3c, s);
    cudaDeviceSynchronize();
  }
  FaultCall(const FaultCall&) = delete;
  ~FaultCall() {
    if (b) cudaFree(b);
  }
  bool ok() const { return b != nullptr; }
  char* residualOut() const { return b + 2 * s; }
  char* gamma() const { return b + 3 * s; }
  char* normOut() const { return b + 4 * s; }
  void poisonOutputs() const {
    cudaMemset(residualOut(), 0xff, s);
    cudaMemset(normOut(), 0xff, s);
  }
  Status operator()(RankCtx& ctx) const {
    return arfusion::allReduceAddRMSNorm(ctx.comm, b, b + s, residualOut(), gamma(), normOut(), T, H, DType::kBFloat16, 1e-6f,
                                         ctx.stream);
  }
};
// The verdict on a call that must time out under testConfig(0.5): call() launches it; it must
// launch, report kTimeout after about the configured 0.5 s, and the next call must report it too.
// `what` names the case in the printed line.
inline std::string timesOutAsConfigured(RankCtx& ctx, const std::function<Status()>& call, const std::string& what) {
  const auto t0 = std::chrono::steady_clock::now();
  if (call() != Status::kSuccess) return std::string("launch: ") + arfusion::lastError();
  cudaStreamSynchronize(ctx.stream);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const char* detail_ptr = nullptr;
  const Status st = arfusion::commGetAsyncError(ctx.comm, &detail_ptr);
  const std::string detail = detail_ptr ? detail_ptr : "";
  std::printf("%s, rank %d: %s after %.2f s: %s\n", what.c_str(), ctx.rank, arfusion::statusString(st), secs, detail.c_str());
  if (st != Status::kTimeout) return std::string("expected kTimeout, got ") + arfusion::statusString(st);
  if (secs < 0.4 || secs > 10) return "timed out after " + std::to_string(secs) + " s, configured 0.5 s";
  if (call() != Status::kTimeout) return "the next call did not report the timeout";
  return "";
}

// A 2-rank group (timeout in seconds) whose rank 1 never makes a call: rank 0 enters the path,
// allocates a call of its shape and runs body(ctx, call); the verdict as runLocalGroup's.
inline std::string withAbsentPeer(const FaultPath& fp, double timeout,
                           const std::function<std::string(RankCtx&, const FaultCall&)>& body, std::string* skip) {
  return runLocalGroup(2, testConfig(timeout), 16, [&](RankCtx& ctx) -> std::string {
    if (ctx.rank == 1) return "";  // never arrives
    if (std::string e = enterPath(ctx, fp, {arfusion::Shape{fp.tokens, fp.hidden}}); !e.empty()) return e;
    const FaultCall call(fp.tokens, fp.hidden);
    if (!call.ok()) return "cudaMalloc";
    return body(ctx, call);
  }, skip);
}

// Unless `prior` is a failure, sets this rank's epochs to `value` (testing::setEpochs); then the
// host barrier setEpochs asks for (agreeStep, which every rank calls, failed or not).
inline std::string setEpochsOnAll(RankCtx& ctx, uint32_t value, std::string prior) {
  if (prior.empty() && arfusion::testing::setEpochs(ctx.comm, value) != Status::kSuccess)
    prior = std::string("setEpochs: ") + arfusion::lastError();
  return agreeStep(ctx, prior, 0);
}

// A creation-check fault (testing::setSelfCheckFault, setSpeedCheckFault) set for the
// communicators created in its scope, cleared on every way out.
template <typename Fault, Status (*kSet)(int, Fault)>
struct ScopedFault {
  ScopedFault(int rank, Fault f) { ok = kSet(rank, f) == Status::kSuccess; }
  ~ScopedFault() { kSet(-1, Fault::kNone); }
  bool ok = false;
};
using ScopedSelfCheckFault = ScopedFault<arfusion::testing::SelfCheckFault, arfusion::testing::setSelfCheckFault>;
using ScopedSpeedCheckFault = ScopedFault<arfusion::testing::SpeedCheckFault, arfusion::testing::setSpeedCheckFault>;

// Ranks of a local group (several per GPU): 2..8.
class LocalGroup : public ::testing::TestWithParam<int> {};

}  // namespace gputest
