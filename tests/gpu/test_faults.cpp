// GPU tests: bounded waits (absent, late and aborted peers, queued calls, mismatched calls), the
// two-shot split's fault, stale flags and the epoch wrap.
#include <cstring>
#include <thread>

#include "gpu_tests.h"

using namespace gputest;

// Every wait loop's faults (FaultPath, gpu_tests.h); the cluster path's rows over 4 blocks are
// forced where they fit (enterPath, testing::forceRowBlocks), one GPU included.
class Faults : public ::testing::TestWithParam<FaultPath> {};


TEST_P(Faults, APeerThatSkipsACallTimesOut) {
  std::string skip;
  const std::string err = withAbsentPeer(GetParam(), 0.5, [](RankCtx& ctx, const FaultCall& call) {
    return timesOutAsConfigured(ctx, [&] { return call(ctx); }, "peer skips a call");
  }, &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(err, "");
}

// A peer that arrives after this rank timed out must not finish the call on what the failed rank
// left behind: it fails too, or, where the failed rank had already sent everything (the one-shot),
// returns correct results. Outputs are poisoned with NaN; the ranks' inputs differ (0x3c3c on rank
// 0, 0x3b3b on rank 1), so a rank that took its own data for its peer's is found too. (The Lamport
// two-shot once pushed the sums of a wait that gave up: the late peer took them and reported
// success with NaN rows.)
TEST_P(Faults, ALatePeerNeverFinishesOnAFailedRanksLeftovers) {
  std::string skip;
  const FaultPath fp = GetParam();
  const std::string err = runLocalGroup(2, testConfig(0.5), 16, [fp](RankCtx& ctx) -> std::string {
    const int64_t T = fp.tokens, H = fp.hidden;
    if (std::string e = enterPath(ctx, fp, {arfusion::Shape{T, H}}); !e.empty()) return e;
    const FaultCall call(T, H, ctx.rank == 0 ? 0x3c : 0x3b);
    if (!call.ok()) return "cudaMalloc";
    if (ctx.rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // after rank 0 gave up
    Status st = call(ctx);
    if (st != Status::kSuccess) return std::string("launch: ") + arfusion::lastError();
    cudaStreamSynchronize(ctx.stream);
    st = arfusion::commGetAsyncError(ctx.comm);
    std::string e;
    if (ctx.rank == 0 && st != Status::kTimeout) e = std::string("rank 0: expected kTimeout, got ") + arfusion::statusString(st);
    if (ctx.rank == 1 && st == Status::kSuccess) {
      std::vector<uint16_t> host(2 * T * H);
      cudaMemcpy(host.data(), call.residualOut(), call.s, cudaMemcpyDeviceToHost);
      cudaMemcpy(host.data() + T * H, call.normOut(), call.s, cudaMemcpyDeviceToHost);
      const uint16_t in0 = 0x3c3c, in1 = 0x3b3b;
      const double a = toDouble(&in0, 0, DType::kBFloat16), b = toDouble(&in1, 0, DType::kBFloat16);
      // residual_out = residual (a) + both inputs; norm_out: a row of equal values normalises to gamma (a).
      const double want_res = a * 2 + b, want_norm = a;
      int64_t bad = 0;
      for (int64_t i = 0; i < 2 * T * H; ++i) {
        const double want = i < T * H ? want_res : want_norm;
        if (!(std::fabs(toDouble(host.data(), size_t(i), DType::kBFloat16) - want) <= want * 0.01)) ++bad;  // NaN counts
      }
      if (bad) e = "rank 1 reported success with " + std::to_string(bad) + " wrong output elements";
    }
    std::printf("late peer, rank %d: %s\n", ctx.rank, arfusion::statusString(st));
    return e;
  }, &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(err, "");
}

TEST_P(Faults, AbortReleasesAWaitingKernel) {
  std::string skip;
  const std::string err = withAbsentPeer(GetParam(), 60, [](RankCtx& ctx, const FaultCall& call) -> std::string {
    std::thread aborter([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      arfusion::commAbort(ctx.comm);
    });
    const auto t0 = std::chrono::steady_clock::now();
    const Status launched = call(ctx);
    cudaStreamSynchronize(ctx.stream);
    aborter.join();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (launched != Status::kSuccess) return std::string("launch: ") + arfusion::lastError();
    // The kernel must have waited for the absent peer until the abort (300 ms), and no longer
    // than the abort takes to reach it. (commAbort sets kAborted on the host whatever the kernel did.)
    if (secs < 0.25) return "the call ended after " + std::to_string(secs) + " s, before the abort: it did not wait";
    if (secs > 10) return "abort took " + std::to_string(secs) + " s";
    if (arfusion::commGetAsyncError(ctx.comm) != Status::kAborted) return "expected kAborted";
    return "";
  }, &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(err, "");
}

// A failure drains the calls queued behind it in about one timeout, not one timeout each: rank 0
// queues kCalls calls (0.5 s timeout) for a peer that never arrives, as an engine's CUDA graph or
// eager loop would; the first call's waits time out and set the abort word (kStopFailed, sync.cuh),
// and every later wait gives up at its first check. Before that, the queue took kCalls x 0.5 s
// (8 s here); the bound, half of that, leaves room for slow machines. The status is the timeout.
TEST_P(Faults, QueuedCallsFailFast) {
  constexpr int kCalls = 16;
  constexpr double kTimeout = 0.5;
  std::string skip;
  const std::string err = withAbsentPeer(GetParam(), kTimeout, [](RankCtx& ctx, const FaultCall& call) -> std::string {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kCalls; ++i)
      if (call(ctx) != Status::kSuccess) return "call " + std::to_string(i) + " refused before the first failed: " + arfusion::lastError();
    cudaStreamSynchronize(ctx.stream);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const char* detail_ptr = nullptr;
    const Status st = arfusion::commGetAsyncError(ctx.comm, &detail_ptr);
    const std::string detail = detail_ptr ? detail_ptr : "";
    std::printf("%d queued calls, peer absent: %s after %.2f s: %s\n", kCalls, arfusion::statusString(st), secs, detail.c_str());
    if (st != Status::kTimeout) return std::string("expected kTimeout, got ") + arfusion::statusString(st);
    if (secs > kCalls * kTimeout / 2) return std::to_string(kCalls) + " queued calls took " + std::to_string(secs) + " s to fail";
    return "";
  }, &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(err, "");
}

// Ranks that pair calls of different shapes, dtypes or ops (a collective misuse): every rank's
// communicator fails with kMismatch (sync.cuh, "Call signatures") instead of returning results
// computed from another call's data; the next call reports it too. A matching call first checks
// that matching calls pass. Grids differ only in the last case (4 vs 5 tokens at one row per
// step): the unpaired block times out (1 s) and the first failure, the mismatch, is the one kept.
TEST_P(Faults, RanksPairingDifferentCallsFailWithMismatch) {
  const FaultPath fp = GetParam();
  struct Call {
    DType dtype;
    int64_t tokens, hidden;
    bool norm;
  };
  struct Case {
    const char* what;
    Call rank0, rank1;
  };
  const int64_t T = fp.tokens, H = fp.hidden;  // 4 x 1024, a count that takes several steps, or one row over a cluster
  const Case cases[] = {{"hidden", {DType::kBFloat16, T, H, true}, {DType::kBFloat16, T, H + 8, true}},
                        {"dtype", {DType::kBFloat16, T, H, true}, {DType::kFloat16, T, H, true}},
                        {"op", {DType::kBFloat16, T, H, true}, {DType::kBFloat16, T, H, false}},
                        {"tokens", {DType::kBFloat16, T, H, true}, {DType::kBFloat16, T + 1, H, true}}};
  for (const Case& k : cases) {
    std::string skip;
    const std::string err = runLocalGroup(2, testConfig(1), 16, [fp, k](RankCtx& ctx) -> std::string {
      // Both calls this rank makes run the path's kernel.
      const Call& own = ctx.rank == 0 ? k.rank0 : k.rank1;
      const auto opOf = [](const Call& c) { return c.norm ? arfusion::Op::kAllReduceAddRMSNorm : arfusion::Op::kAllReduceAdd; };
      if (std::string e = enterPath(ctx, fp, {arfusion::Shape{k.rank0.tokens, k.rank0.hidden, k.rank0.dtype, opOf(k.rank0)},
                                              arfusion::Shape{own.tokens, own.hidden, own.dtype, opOf(own)}});
          !e.empty())
        return e;
      const size_t s = size_t(fp.tokens + 1) * (fp.hidden + 8) * 2;  // bytes of the largest operand
      void* buf = nullptr;
      if (cudaMalloc(&buf, s * 5) != cudaSuccess) return "cudaMalloc";
      cudaMemset(buf, 0x3c, s * 5);  // bf16 / fp16 values near 0.01 and 1.0
      char* b = static_cast<char*>(buf);
      auto call = [&](const Call& c) {
        return c.norm ? arfusion::allReduceAddRMSNorm(ctx.comm, b, b + s, b + 2 * s, b + 3 * s, b + 4 * s, c.tokens, c.hidden,
                                                      c.dtype, 1e-6f, ctx.stream)
                      : arfusion::allReduceAdd(ctx.comm, b, b + s, b + 2 * s, c.tokens, c.hidden, c.dtype, ctx.stream);
      };
      std::string e;
      const Call& mine = ctx.rank == 0 ? k.rank0 : k.rank1;
      if (call(k.rank0) != Status::kSuccess || cudaStreamSynchronize(ctx.stream) != cudaSuccess ||
          arfusion::commGetAsyncError(ctx.comm) != Status::kSuccess) {
        e = std::string("the matching call failed: ") + arfusion::lastError();
      } else if (call(mine) != Status::kSuccess) {
        e = std::string("launch: ") + arfusion::lastError();
      } else {
        cudaStreamSynchronize(ctx.stream);
        const char* detail_ptr = nullptr;
        const Status st = arfusion::commGetAsyncError(ctx.comm, &detail_ptr);
        const std::string detail = detail_ptr ? detail_ptr : "";  // valid until this thread's next call
        if (st != Status::kMismatch)
          e = std::string("expected kMismatch, got ") + arfusion::statusString(st) + " (" + detail + ")";
        else if (detail.find("mismatch on device") == std::string::npos)
          e = "the detail does not say mismatch: " + detail;
        else if (call(mine) != Status::kMismatch)
          e = "the next call did not report the mismatch";
        else
          std::printf("mismatch reported (%s, rank %d): %s\n", k.what, ctx.rank, detail.c_str());
      }
      cudaFree(buf);
      return e.empty() ? e : std::string(k.what) + ": " + e;
    }, &skip);
    if (!skip.empty()) GTEST_SKIP() << skip;
    EXPECT_EQ(err, "");
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, Faults,
                         ::testing::Values(FaultPath{arfusion::Strategy::kOneShot, arfusion::SyncMode::kGridDependency, true},
                                           FaultPath{arfusion::Strategy::kOneShot, arfusion::SyncMode::kFlagBarrier, false},
                                           FaultPath{arfusion::Strategy::kTwoShot, arfusion::SyncMode::kGridDependency, true},
                                           FaultPath{arfusion::Strategy::kTwoShot, arfusion::SyncMode::kFlagBarrier, false},
                                           FaultPath{arfusion::Strategy::kTwoShot, arfusion::SyncMode::kFlagBarrier, false, 4200, true},
                                           FaultPath{arfusion::Strategy::kOneShot, arfusion::SyncMode::kGridDependency, true, 1, false, 4096, 4}));

// Ranks whose sync modes differ run different protocols for the same call (Lamport on the
// GridDependency rank, flags on the FlagBarrier rank), which never read each other's data: each
// wait's slow path looks for the other protocol's signal of its epoch, so both ranks must fail with
// kMismatch (not time out), and the next call must report it too. One-shot and two-shot (at these
// shapes the GridDependency two-shot runs its Lamport kernel).
class SyncModeMismatch : public ::testing::TestWithParam<arfusion::Strategy> {};

TEST_P(SyncModeMismatch, RanksInDifferentSyncModesFailWithMismatch) {
  const arfusion::Strategy strategy = GetParam();
  std::string skip;
  const std::string err = runLocalGroup(2, testConfig(2), 16, [strategy](RankCtx& ctx) -> std::string {
    const int64_t T = 4, H = 1024;
    const arfusion::SyncMode mine = ctx.rank == 0 ? arfusion::SyncMode::kGridDependency : arfusion::SyncMode::kFlagBarrier;
    std::string e = enterPath(ctx, FaultPath{strategy, mine, ctx.rank == 0}, {arfusion::Shape{T, H}});
    const FaultCall call(T, H);
    if (e.empty() && !call.ok()) e = "cudaMalloc";
    e = agreeStep(ctx, e, 0);  // every rank's buffers exist before any rank launches
    if (!e.empty()) return e;
    const auto t0 = std::chrono::steady_clock::now();
    if (call(ctx) != Status::kSuccess) return std::string("launch: ") + arfusion::lastError();
    cudaStreamSynchronize(ctx.stream);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const char* detail_ptr = nullptr;
    const Status st = arfusion::commGetAsyncError(ctx.comm, &detail_ptr);
    const std::string detail = detail_ptr ? detail_ptr : "";
    std::printf("sync modes differ (%s), rank %d: %s after %.2f s: %s\n", arfusion::toString(strategy), ctx.rank,
                arfusion::statusString(st), secs, detail.c_str());
    if (st != Status::kMismatch) return std::string("expected kMismatch, got ") + arfusion::statusString(st) + ": " + detail;
    if (secs > 1.5) return "the mismatch took " + std::to_string(secs) + " s, about the 2 s timeout: found by the timer, not the check";
    if (call(ctx) != Status::kMismatch) return "the next call did not report the mismatch";
    return "";
  }, &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(err, "");
}

INSTANTIATE_TEST_SUITE_P(Strategies, SyncModeMismatch, ::testing::Values(arfusion::Strategy::kOneShot, arfusion::Strategy::kTwoShot));

// The cluster kernels' norm exchange is bounded: on rank 0 block 1 of every cluster sends no
// partial sums (testing::skipClusterPartialSums), so the other blocks of its clusters wait for
// bytes that never come. They must give up after the configured 0.5 s with kTimeout, naming the
// cluster, and the next call must report it; rank 1, whose clusters are whole, finishes. (The wait
// was unbounded before: the test then hung until the harness's deadline.)
TEST(ClusterNorm, TheExchangeEndsOnItsBoundWhenABlockSendsNothing) {
  std::string skip;
  const FaultPath fp{arfusion::Strategy::kOneShot, arfusion::SyncMode::kGridDependency, true, 2, false, 4096, 4};
  const std::string err = runLocalGroup(2, testConfig(0.5), 16, [fp](RankCtx& ctx) -> std::string {
    std::string e = enterPath(ctx, fp, {arfusion::Shape{fp.tokens, fp.hidden}});
    const FaultCall call(fp.tokens, fp.hidden);
    if (e.empty() && !call.ok()) e = "cudaMalloc";
    if (e.empty() && ctx.rank == 0 && arfusion::testing::skipClusterPartialSums(ctx.comm, true) != Status::kSuccess)
      e = std::string("skipClusterPartialSums: ") + arfusion::lastError();
    e = agreeStep(ctx, e, 0);
    if (!e.empty()) return e;
    if (ctx.rank == 1) {
      if (call(ctx) != Status::kSuccess || cudaStreamSynchronize(ctx.stream) != cudaSuccess)
        return std::string("rank 1's call: ") + arfusion::lastError();
      const Status st = arfusion::commGetAsyncError(ctx.comm);
      return st == Status::kSuccess ? "" : std::string("rank 1: ") + arfusion::statusString(st);
    }
    e = timesOutAsConfigured(ctx, [&] { return call(ctx); }, "cluster norm exchange");
    const char* detail = nullptr;
    arfusion::commGetAsyncError(ctx.comm, &detail);
    if (e.empty() && (!detail || !std::strstr(detail, "own cluster"))) e = std::string("the detail does not name the cluster: ") + (detail ? detail : "");
    return e;
  }, &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(err, "");
}

// The split's waiting half failing between two steps of one call (twoshot.cu, steps 3-5): rank 1
// never signals the all-gather of a unit after which its block has another one
// (testing::skipAllGatherSignals), so rank 0's blocks pass step 1 of that unit, push the next
// unit's reduce-scatter on one half and time out on the other, in the split's phase-1 wait; rank 1
// then times out waiting for rank 0's next all-gather. Both ranks must report kTimeout within the
// configured 0.5 s (give or take) and the next call must report it too; a hook that did nothing
// would let both succeed. Both sync modes: at 4200 x 1024 each runs the flag two-shot with several
// steps per block (enterPath checks it), whose blocks split steps 3-5 unless
// ARFUSION_TWO_SHOT_SPLIT=0 (then the same fault fails the whole-block wait; the test does not
// tell the two apart). The other fault tests fail a block's first wait.
class SplitFault : public ::testing::TestWithParam<arfusion::SyncMode> {};

TEST_P(SplitFault, APeerThatStopsBetweenTwoStepsTimesOutOnBothRanks) {
  std::string skip;
  const FaultPath fp{arfusion::Strategy::kTwoShot, GetParam(), false, 4200, true};
  const std::string err = runLocalGroup(2, testConfig(0.5), 16, [fp](RankCtx& ctx) -> std::string {
    const int64_t T = fp.tokens, H = 1024;
    std::string e = enterPath(ctx, fp, {arfusion::Shape{T, H}});
    const FaultCall call(T, H);
    if (e.empty() && !call.ok()) e = "cudaMalloc";
    // Every rank's buffers exist before any rank launches: on one GPU a peer's allocation or
    // device synchronisation would otherwise wait for this rank's spinning kernel (as StaleFlags).
    // Every rank takes this step, failed or not.
    e = agreeStep(ctx, e, 0);
    if (!e.empty()) return e;
    // A clean call first: the hook, not the shape, makes the next one fail.
    if (call(ctx) != Status::kSuccess || cudaStreamSynchronize(ctx.stream) != cudaSuccess ||
        arfusion::commGetAsyncError(ctx.comm) != Status::kSuccess)
      e = std::string("the clean call failed: ") + arfusion::lastError();
    if (e.empty() && ctx.rank == 1 && arfusion::testing::skipAllGatherSignals(ctx.comm, true) != Status::kSuccess)
      e = std::string("skipAllGatherSignals: ") + arfusion::lastError();
    if (e.empty()) {
      call.poisonOutputs();
      cudaDeviceSynchronize();
      e = timesOutAsConfigured(ctx, [&] { return call(ctx); }, "split fault");
    }
    return e.empty() ? e : "rank " + std::to_string(ctx.rank) + ": " + e;
  }, &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(err, "");
}

INSTANTIATE_TEST_SUITE_P(SyncModes, SplitFault,
                         ::testing::Values(arfusion::SyncMode::kFlagBarrier, arfusion::SyncMode::kGridDependency));


// A flag more than 2^31 epochs behind its block's epoch must not pass a flag kernel's wait. The
// Lamport kernels advance the epochs and write no flag (and the one-shot never writes phase 1), so
// days of decode-only calls leave every flag that far behind. Here one clean call
// writes the path's flags, both ranks' epochs jump 3 * 2^30 ahead, and rank 1 makes no further
// call: rank 0's call must time out. A wait that took "epoch at or after e" in wrapping 32-bit
// arithmetic read these flags as 2^30 ahead and finished the call alone, on stale data.
class StaleFlags : public ::testing::TestWithParam<FaultPath> {};

TEST_P(StaleFlags, AFlagWaitAfterTwoTo31EpochsStillWaitsForThePeer) {
  std::string skip;
  const FaultPath fp = GetParam();
  const std::string err = runLocalGroup(2, testConfig(0.5), 16, [fp](RankCtx& ctx) -> std::string {
    const int64_t T = fp.tokens, H = fp.hidden;
    std::string e = enterPath(ctx, fp, {arfusion::Shape{T, H}});
    const FaultCall call(T, H);
    if (e.empty() && !call.ok()) e = "cudaMalloc";
    // Every rank's buffers exist before any rank launches: on one GPU a peer's allocation or
    // device synchronisation would otherwise wait for this rank's spinning kernel.
    e = agreeStep(ctx, e, 0);
    if (e.empty() && (call(ctx) != Status::kSuccess || cudaStreamSynchronize(ctx.stream) != cudaSuccess ||
                      arfusion::commGetAsyncError(ctx.comm) != Status::kSuccess))
      e = std::string("the clean call failed: ") + arfusion::lastError();
    e = setEpochsOnAll(ctx, 3u << 30, e);
    if (!e.empty() || ctx.rank == 1) return e;  // rank 1 never arrives
    call.poisonOutputs();
    cudaDeviceSynchronize();
    return timesOutAsConfigured(ctx, [&] { return call(ctx); }, "flags 3 * 2^30 epochs behind");
  }, &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(err, "");
}

INSTANTIATE_TEST_SUITE_P(FlagKernels, StaleFlags,
                         ::testing::Values(FaultPath{arfusion::Strategy::kOneShot, arfusion::SyncMode::kFlagBarrier, false},
                                           FaultPath{arfusion::Strategy::kTwoShot, arfusion::SyncMode::kFlagBarrier, false},
                                           FaultPath{arfusion::Strategy::kTwoShot, arfusion::SyncMode::kFlagBarrier, false, 4200, true}));

// Epochs wrap at 2^32: every strategy and sync mode is correct across the wrap. Each case runs in
// a fresh group (flags never written) whose epochs are set 3 below the wrap, so that its first
// calls cross it. (Setting them back in a group that ran already would leave flags written
// "after" the new epochs, which no real sequence of calls produces.)
TEST_P(LocalGroup, CallsAcrossTheEpochWrap) {
  const ShapeCase cases[] = {{DType::kBFloat16, 4, 1024, 7101, true},
                             {DType::kBFloat16, 129, 4096, 7102},
                             {DType::kFloat32, 17, 2880, 7103},
                             {DType::kBFloat16, 1000, 2048, 7104}};
  for (const ShapeCase& c : cases) {
    std::string skip;
    const std::string err = runLocalGroup(GetParam(), testConfig(), 16, [c](RankCtx& ctx) -> std::string {
      std::string e = setEpochsOnAll(ctx, ~0u - 2, "");
      return e.empty() ? scenarioShape(ctx, c) : e;
    }, &skip);
    if (!skip.empty()) GTEST_SKIP() << skip;
    EXPECT_EQ(err, "");
  }
}
