// GPU tests, ranks as threads: over NCCL (one GPU per rank) and as local groups (several ranks per
// GPU, 3..8 ranks on 1-2 GPUs). Every test skips, saying why, when the machine cannot run it.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <thread>
#include <vector>

#include "arfusion/testing.h"
#include "gpu_harness.h"
#include "kernels/kernels.h"
#include "reference.h"

using namespace arftest;
using arfusion::DType;
using arfusion::Status;

namespace {

// timeout 0: ARFTEST_TIMEOUT_S if set (sanitizers slow kernels down a lot), else 5 s.
// Workspace 64 MiB, not the default 256: the large cases of fullShapes() are then larger than the
// workspace (the process tests and the benchmarks run the default).
arfusion::Config testConfig(double timeout = 0) {
  arfusion::Config c;
  c.workspace_bytes = size_t(64) << 20;
  const char* env = std::getenv("ARFTEST_TIMEOUT_S");
  c.timeout_seconds = timeout > 0 ? timeout : env ? std::atof(env) : 5.0;
  c.read_env = false;
  return c;
}

// Inputs and residual of magnitude ~1e-3: the mean square (~1e-6) is below eps (1e-5), so a kernel
// that dropped eps or used another would be far outside the tolerance (at magnitude 1 eps moves
// norm_out by ~2e-6 relative, inside the fp32 tolerance).
void addSmallValueCases(std::vector<ShapeCase>* v, uint64_t* seed) {
  for (DType d : {DType::kBFloat16, DType::kFloat32}) {
    ShapeCase c{d, 5, d == DType::kFloat32 ? 2880 : 4096, (*seed)++};
    c.scale = 1e-3;
    v->push_back(c);
  }
}

std::vector<ShapeCase> fullShapes() {
  std::vector<ShapeCase> v;
  uint64_t seed = 1;
  for (DType d : {DType::kBFloat16, DType::kFloat16, DType::kFloat32})
    for (int64_t t : {1, 2, 3, 17, 64, 128, 129, 300})
      for (int64_t h : {1024, 2880, 4096, 5120, 8192}) v.push_back({d, t, h, seed++, h == 2880 || h == 4096});
  // Large messages: chunked through the workspace (16384 x 2048 bf16 = 64 MiB = the workspace).
  for (int64_t t : {1000, 4097, 16384}) v.push_back({DType::kBFloat16, t, 2048, seed++});
  v.push_back({DType::kBFloat16, 2, 16384, seed++});                  // wide row, registers at the limit
  v.push_back({DType::kBFloat16, 3, 65536, seed++});                  // wider than registers: two passes
  // Rows of 32-64 KB over clusters of 4 blocks (Plan::row_blocks): 4 vectors per thread, and two
  // passes (64 KB fp32 rows).
  v.push_back({DType::kBFloat16, 16, 16384, seed++});
  v.push_back({DType::kFloat32, 11, 8192, seed++});
  v.push_back({DType::kFloat32, 3, 16384, seed++});
  v.push_back({DType::kFloat16, 5, 4095, seed++});                    // odd hidden: scalar path
  v.push_back({DType::kBFloat16, 17, 4096, seed++, true, true});      // misaligned pointers
  v.push_back({DType::kFloat32, 3, 1000, seed++, true, true});        // misaligned fp32
  v.push_back({DType::kBFloat16, 64, 4096, seed++, false, false, true});  // -0.0 in inputs
  addSmallValueCases(&v, &seed);
  return v;
}

std::vector<ShapeCase> groupShapes() {
  std::vector<ShapeCase> v;
  uint64_t seed = 5000;
  for (DType d : {DType::kBFloat16, DType::kFloat32})
    for (int64_t t : {1, 3, 17, 129})
      for (int64_t h : {1024, 2880, 4096}) v.push_back({d, t, h, seed++, h == 2880});
  v.push_back({DType::kFloat16, 300, 5120, seed++});
  v.push_back({DType::kBFloat16, 7, 4095, seed++, false, true});
  addSmallValueCases(&v, &seed);
  return v;
}

Scenario allShapes(std::vector<ShapeCase> cases) {
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

}  // namespace

// ------------------------------------------------------------------ kernel loading
// First in the file: it needs a process that has launched none of the library's kernels yet.
// Under lazy loading (CUDA's default) commCreate must have loaded every kernel the library can
// launch (src/kernels/kernels.h, preloadKernels, says why). Without the preload the self-check
// loads a few GridDependency kernels and this finds the rest unloaded.
TEST(Loading, CommCreateLoadsEveryKernel) {
  if (gpuCount() < 1) GTEST_SKIP() << "needs a GPU";
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  bool before = false, after = false;
  ASSERT_EQ(loadingProbe(&before, &after), "");
  if (before) GTEST_SKIP() << "this process loads kernels eagerly (CUDA_MODULE_LOADING=EAGER?): nothing to check";
  ASSERT_TRUE(after) << "the loading probe is broken: its kernel ran but does not read as loaded";
  std::string skip;
  const std::string err = runLocalGroup(2, testConfig(), 8, [](RankCtx& ctx) -> std::string {
    std::set<const void*> kernels;  // the enumeration may name a kernel more than once
    const cudaError_t walked = arfusion::detail::forEachKernel([&](const void* kernel) {
      kernels.insert(kernel);
      return cudaSuccess;
    });
    if (walked != cudaSuccess) return "walking the kernels failed";
    // A lower bound. One-shot and two-shot: 3 dtypes x 4 variants x 2 sync modes each; the
    // one-shot's cluster kernels 3 x 4 and its held-operand kernels 3 x 2; the Lamport two-shot
    // 3 x 4; add-RMSNorm 18; self-check 1. The kernels compiled for two ranks (the one-shot's
    // Lamport kernels, both two-shots) come on top.
    if (kernels.size() < 97) return "only " + std::to_string(kernels.size()) + " kernels listed";
    int unloaded = 0;
    for (const void* k : kernels) {
      bool loaded = false;
      const std::string e = kernelLoaded(k, &loaded);
      if (!e.empty()) return e;
      unloaded += !loaded;
    }
    if (unloaded) return std::to_string(unloaded) + " of " + std::to_string(kernels.size()) + " kernels not loaded after commCreate";
    if (ctx.rank == 0) std::printf("all %zu kernels loaded after commCreate\n", kernels.size());
    return "";
  }, &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(err, "");
}

// ------------------------------------------------------------------ 2 ranks over NCCL
TEST(ThreadsNccl2, EveryDtypeStrategySyncAndShape) {
  std::string skip;
  const std::string err = runThreadsNccl(2, testConfig(), allShapes(fullShapes()), &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(err, "");
}

TEST(ThreadsNccl2, SmallWorkspaceChunksLargeMessages) {
  arfusion::Config c = testConfig();
  // 12 MiB: regions of ~23 KB, so both fused strategies run 32 MB and 8 MB messages in many
  // steps per block (and the one-shot refuses 32 KB fp32 rows: plan() says kNotSupported).
  c.workspace_bytes = size_t(12) << 20;
  std::string skip;
  const std::string err = runThreadsNccl(2, c, allShapes({{DType::kBFloat16, 4097, 4096, 77}, {DType::kFloat32, 999, 2048, 78},
                                                          {DType::kFloat32, 999, 8192, 79}}), &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(err, "");
}

// Issue 7's soak: 10^6 fused calls, shapes, dtypes, strategies and sync modes changing every call,
// eager (1/8) and in a CUDA graph, each compared bit for bit with the NCCL path.
TEST(ThreadsNccl2, Soak1MCallsAgainstNccl) {
  std::string skip;
  const std::string err = runThreadsNccl(2, testConfig(), [](RankCtx& ctx) {
    int64_t compared = 0;
    unsigned long long mism = 0;
    const std::string e = scenarioSoak(ctx, 1000000, 11, &compared, &mism);
    if (ctx.rank == 0) std::printf("soak: %lld fused calls compared with the NCCL path, %llu mismatching words\n", (long long)compared, mism);
    return e;
  }, &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(err, "");
}

TEST(ThreadsNccl2, NaNInfNegZeroAndSentinelInputsMatchNccl) {
  std::string skip;
  const std::string err = runThreadsNccl(2, testConfig(), scenarioSpecialValues, &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(err, "");
}

TEST(ThreadsNccl2, BadInputWritesNothing) {
  std::string skip;
  const std::string err = runThreadsNccl(2, testConfig(), scenarioBadInput, &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(err, "");
}

TEST(ThreadsNccl2, CallsAlternatingBetweenTwoStreamsAreOrdered) {
  std::string skip;
  const std::string err = runThreadsNccl(2, testConfig(), scenarioTwoStreams, &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(err, "");
}

// Two communicators on the same GPUs at once (include/arfusion/arfusion.h, "Several
// communicators"): each gets half the SMs through Config::max_blocks.
TEST(ThreadsNccl2, TwoCommunicatorsAtOnceInOppositeOrders) {
  std::string skip;
  arfusion::Config cfg = testConfig();
  int sms = 0;
  if (gpuCount() > 0) cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cfg.max_blocks = sms / 2;
  const std::string err = runThreadsNccl(2, cfg, [&](RankCtx& ctx) { return scenarioTwoCommunicators(ctx, cfg, 300); }, &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(err, "");
}

// commCreate with the wrong current device on one rank: both ranks fail, each saying why, and
// the exchange that tells them runs on each NCCL communicator's device (it ran on the current
// one before session 31). The caller's current device is left as it was.
TEST(ThreadsNccl2, WrongCurrentDeviceOnOneRankFailsOnBoth) {
  if (gpuCount() < 2) GTEST_SKIP() << "needs 2 GPUs, found " << gpuCount();
  std::vector<ncclComm_t> ncomms(2);
  const int devs[2] = {0, 1};
  ASSERT_EQ(ncclCommInitAll(ncomms.data(), 2, devs), ncclSuccess);
  Status st[2] = {Status::kSuccess, Status::kSuccess};
  std::string msg[2];
  int current_after[2] = {-1, -1};
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      cudaSetDevice(0);  // right for rank 0, wrong for rank 1
      arfusion::Communicator* comm = nullptr;
      st[r] = arfusion::commCreate(ncomms[r], testConfig(), &comm);
      msg[r] = arfusion::lastError();
      cudaGetDevice(&current_after[r]);
      if (comm) arfusion::commDestroy(comm);
    });
  }
  for (auto& t : threads) t.join();
  for (auto c : ncomms) ncclCommDestroy(c);
  const std::string why = "current CUDA device 0 is not the NCCL communicator's device 1";
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(st[r], Status::kInvalidArgument) << "rank " << r << ": " << msg[r];
    EXPECT_NE(msg[r].find(why), std::string::npos) << "rank " << r << ": " << msg[r];
    EXPECT_EQ(current_after[r], 0) << "rank " << r;
  }
  EXPECT_NE(msg[0].find("rank 1 failed"), std::string::npos) << msg[0];
}

TEST(ThreadsNccl1, OneRankIsTheLocalAddRMSNorm) {
  std::string skip;
  const std::string err = runThreadsNccl(1, testConfig(), allShapes({{DType::kBFloat16, 17, 4096, 3, true}, {DType::kFloat32, 3, 1000, 4}}), &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(err, "");
}

// ------------------------------------------------------------------ 3..8 ranks, several per GPU
class LocalGroup : public ::testing::TestWithParam<int> {};

TEST_P(LocalGroup, Shapes) {
  std::string skip;
  const std::string err = runLocalGroup(GetParam(), testConfig(), 16, allShapes(groupShapes()), &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(err, "");
}

// The special values at 2-8 ranks (no NCCL here: every path against the classes and the first
// fused path).
TEST_P(LocalGroup, NaNInfNegZeroAndSentinelInputs) {
  std::string skip;
  const std::string err = runLocalGroup(GetParam(), testConfig(), 16, scenarioSpecialValues, &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(err, "");
}

// A group of `world` ranks runs the 4096-call soak (scenarioSoak; outputs poisoned before every
// call, memset nodes in its CUDA graph) and prints its count.
TEST_P(LocalGroup, SoakOneShotAgainstTwoShot) {
  std::string skip;
  const std::string err = runLocalGroup(GetParam(), testConfig(), 16, [](RankCtx& ctx) {
    int64_t compared = 0;
    unsigned long long mism = 0;
    const std::string e = scenarioSoak(ctx, 4096, 12, &compared, &mism);
    if (ctx.rank == 0) std::printf("soak at %d ranks: %lld fused calls, %llu mismatching words\n", ctx.world, (long long)compared, mism);
    return e;
  }, &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(err, "");
}

INSTANTIATE_TEST_SUITE_P(Ranks, LocalGroup, ::testing::Values(2, 3, 4, 8));

// Small and quick: the target of compute-sanitizer runs (tools/device_check.sh sanitize).
TEST(Sanitize, SmallShapesTwoRanks) {
  std::string skip;
  const std::string err = runLocalGroup(2, testConfig(), 8,
                                        allShapes({{DType::kBFloat16, 3, 1024, 61, true}, {DType::kFloat32, 17, 2880, 62},
                                                   {DType::kFloat16, 5, 1000, 63, false, true}}),
                                        &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(err, "");
}

// ------------------------------------------------------------------ self-check fallback
// The creation-time self-check's decision (src/host/selfcheck.cpp), which no H200 fails on its own:
// one rank, the last, reports a wrong GridDependency result or a slow one
// (testing::setSelfCheckFault). Every rank must choose FlagBarrier for Auto, say why in plan(),
// and Auto's calls must still be right (scenarioShape: every strategy x sync mode and Auto against
// the float64 reference, and NCCL at 2 ranks over NCCL). The control, no fault: GridDependency and
// "self-check passed".
struct SelfCheckCase {
  arfusion::testing::SelfCheckFault fault;
  arfusion::SyncMode expect;
  const char* reason;  // must appear in plan()'s reason on every rank
};
const SelfCheckCase kSelfCheckCases[] = {
    {arfusion::testing::SelfCheckFault::kNone, arfusion::SyncMode::kGridDependency, "self-check passed"},
    {arfusion::testing::SelfCheckFault::kWrongResult, arfusion::SyncMode::kFlagBarrier, "self-check: GridDependency gave wrong results"},
    {arfusion::testing::SelfCheckFault::kSlow, arfusion::SyncMode::kFlagBarrier, "self-check: GridDependency slower"}};

Scenario selfCheckScenario(const SelfCheckCase& c, uint64_t seed) {
  return [c, seed](RankCtx& ctx) -> std::string {
    // Every rank reaches the verdict, also after a failed check, so none is left waiting in
    // scenarioShape's barriers.
    const std::string local = [&]() -> std::string {
      arfusion::Plan p;
      if (arfusion::plan(ctx.comm, arfusion::Shape{8, 4096, DType::kBFloat16, arfusion::Op::kAllReduceAddRMSNorm}, &p) !=
          Status::kSuccess)
        return std::string("plan: ") + arfusion::lastError();
      if (p.strategy == arfusion::Strategy::kNccl) return std::string("Auto planned the NCCL path: ") + p.reason;
      if (p.sync_mode != c.expect)
        return std::string("Auto's sync mode is ") + arfusion::toString(p.sync_mode) + ", expected " + arfusion::toString(c.expect) +
               "; reason: " + p.reason;
      if (std::string(p.reason).find(c.reason) == std::string::npos)
        return std::string("plan()'s reason lacks \"") + c.reason + "\": " + p.reason;
      return "";
    }();
    if (std::string v = agreeStep(ctx, local, 0); !v.empty()) return v;
    return scenarioShape(ctx, ShapeCase{DType::kBFloat16, 17, 4096, seed});
  };
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

// The self-check runs only where the arch policy is GridDependency (src/host/arch.cpp: SM90, SM100).
std::string selfCheckSkip() {
  int major = 0;
  if (gpuCount() < 1 || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) != cudaSuccess) return "needs a GPU";
  if (major != 9 && major != 10) return "the self-check runs only where GridDependency is the policy (SM90, SM100)";
  return "";
}

// A group of 2, then of 3 ranks, created with the fault on its last rank; then the scenario.
class SelfCheck : public ::testing::TestWithParam<int> {};

TEST_P(SelfCheck, OneRanksFailureMovesEveryRankToFlagBarrier) {
  if (const std::string why = selfCheckSkip(); !why.empty()) GTEST_SKIP() << why;
  const SelfCheckCase& c = kSelfCheckCases[GetParam()];
  for (int world : {2, 3}) {
    SCOPED_TRACE("world " + std::to_string(world));
    ScopedSelfCheckFault fault(world - 1, c.fault);
    ASSERT_TRUE(fault.ok) << arfusion::lastError();
    std::string skip;
    const std::string err = runLocalGroup(world, testConfig(), 16, selfCheckScenario(c, 90 + world), &skip);
    if (!skip.empty()) GTEST_SKIP() << skip;
    EXPECT_EQ(err, "");
  }
}

INSTANTIATE_TEST_SUITE_P(Injected, SelfCheck, ::testing::Values(0, 1, 2), [](const ::testing::TestParamInfo<int>& i) {
  return std::string(i.param == 0 ? "None" : i.param == 1 ? "WrongResult" : "Slow");
});

// With the NCCL path forced at creation, creation runs no fused kernel (no self-check): should the
// engine turn Auto on later, Auto takes FlagBarrier and plan() says why. A test group has no NCCL
// path, so the NCCL strategy is forced in Config and Auto turned on at once.
TEST(SelfCheckSkip, NcclForcedAtCreationLeavesAutoOnFlagBarrier) {
  if (const std::string why = selfCheckSkip(); !why.empty()) GTEST_SKIP() << why;
  arfusion::Config cfg = testConfig();
  cfg.strategy = arfusion::Strategy::kNccl;
  std::string skip;
  const std::string err = runLocalGroup(2, cfg, 16, [](RankCtx& ctx) -> std::string {
    const std::string local = [&]() -> std::string {
      if (arfusion::commSetStrategy(ctx.comm, arfusion::Strategy::kAuto, arfusion::SyncMode::kAuto) != Status::kSuccess)
        return std::string("commSetStrategy: ") + arfusion::lastError();
      arfusion::Plan p;
      if (arfusion::plan(ctx.comm, arfusion::Shape{8, 4096, DType::kBFloat16, arfusion::Op::kAllReduceAddRMSNorm}, &p) != Status::kSuccess)
        return std::string("plan: ") + arfusion::lastError();
      if (p.sync_mode != arfusion::SyncMode::kFlagBarrier || std::string(p.reason).find("self-check not run") == std::string::npos)
        return std::string("expected flag barrier, self-check not run: ") + arfusion::toString(p.sync_mode) + "; " + p.reason;
      return "";
    }();
    if (std::string v = agreeStep(ctx, local, 0); !v.empty()) return v;
    return scenarioShape(ctx, ShapeCase{DType::kBFloat16, 17, 4096, 98});
  }, &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(err, "");
}

// The same over NCCL and two GPUs (rank 1 at fault): the outcome crosses the NCCL bootstrap.
TEST(ThreadsNccl2, SelfCheckFailureOnOneRankMovesBothToFlagBarrier) {
  if (const std::string why = selfCheckSkip(); !why.empty()) GTEST_SKIP() << why;
  const SelfCheckCase& c = kSelfCheckCases[1];
  ScopedSelfCheckFault fault(1, c.fault);
  ASSERT_TRUE(fault.ok) << arfusion::lastError();
  std::string skip;
  const std::string err = runThreadsNccl(2, testConfig(), selfCheckScenario(c, 95), &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(err, "");
}

// ------------------------------------------------------------------ speed check
// The creation-time speed check of the fused one-shot against the NCCL path (src/host/selfcheck.cpp),
// which runs only where no measured Auto table applies, so not on the H200 pair unless forced
// (testing::setSpeedCheckFault). Forced with kRun: every rank's Auto table must name the check, the
// ranks must plan alike at every size, and Auto's calls must be right. With rank 1 reporting a
// fused path 1000 us slower (kFusedSlow): Auto must take the NCCL path at every size on both
// ranks, up to the largest size checked and above it.
Scenario speedCheckScenario(bool fused_slow, uint64_t seed) {
  return [fused_slow, seed](RankCtx& ctx) -> std::string {
    std::string plans;  // what this rank plans per size, for the agreement below
    const std::string local = [&]() -> std::string {
      for (int64_t tokens : {1, 4, 16, 64, 65, 256}) {
        arfusion::Plan p;
        if (arfusion::plan(ctx.comm, arfusion::Shape{tokens, 4096, DType::kBFloat16, arfusion::Op::kAllReduceAddRMSNorm}, &p) !=
            Status::kSuccess)
          return std::string("plan: ") + arfusion::lastError();
        if (std::string(p.reason).find("speed check") == std::string::npos)
          return std::string("plan()'s reason does not name the speed check: ") + p.reason;
        if (fused_slow && p.strategy != arfusion::Strategy::kNccl)
          return "a fused path reported 1000 us slower, yet Auto planned " + std::string(arfusion::toString(p.strategy)) +
                 " at " + std::to_string(tokens) + " x 4096: " + p.reason;
        // On the H200 pair the one-shot takes a third of the NCCL path's time at one token.
        if (!fused_slow && tokens == 1 && p.strategy != arfusion::Strategy::kOneShot)
          return std::string("the speed check did not keep the one-shot at 1 x 4096: ") + p.reason;
        plans += std::string(arfusion::toString(p.strategy)) + " ";
      }
      if (ctx.rank == 0) std::printf("speed check: Auto plans %s(1, 4, 16, 64, 65, 256 x 4096 bf16)\n", plans.c_str());
      return "";
    }();
    // Every rank must have planned the same strategies: the hash of its plans goes through the barrier.
    if (std::string v = agreeStep(ctx, local, hashBytes(plans.data(), plans.size())); !v.empty()) return v;
    return scenarioShape(ctx, ShapeCase{DType::kBFloat16, 17, 4096, seed});
  };
}

TEST(ThreadsNccl2, SpeedCheckWhereForcedDecidesAlikeOnBothRanks) {
  ScopedSpeedCheckFault fault(-1, arfusion::testing::SpeedCheckFault::kRun);
  ASSERT_TRUE(fault.ok) << arfusion::lastError();
  std::string skip;
  const std::string err = runThreadsNccl(2, testConfig(), speedCheckScenario(false, 96), &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(err, "");
}

TEST(ThreadsNccl2, SpeedCheckWithASlowFusedPathOnOneRankTakesNcclOnBoth) {
  ScopedSpeedCheckFault fault(1, arfusion::testing::SpeedCheckFault::kFusedSlow);
  ASSERT_TRUE(fault.ok) << arfusion::lastError();
  std::string skip;
  const std::string err = runThreadsNccl(2, testConfig(), speedCheckScenario(true, 97), &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(err, "");
}

// ------------------------------------------------------------------ bounded waits
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
std::string enterPath(RankCtx& ctx, const FaultPath& fp, std::initializer_list<arfusion::Shape> shapes) {
  if (arfusion::commSetStrategy(ctx.comm, fp.strategy, fp.sync) != Status::kSuccess) return arfusion::lastError();
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
std::string timesOutAsConfigured(RankCtx& ctx, const std::function<Status()>& call, const std::string& what) {
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

// The cluster path (row_blocks > 1) is planned on the measured H200 pair only (plan.cpp
// oneShotRowBlocks): with one GPU, where the ranks share it, there is no such path to fail.
class Faults : public ::testing::TestWithParam<FaultPath> {
 protected:
  void SetUp() override {
    if (GetParam().row_blocks > 1 && gpuCount() < 2)
      GTEST_SKIP() << "rows over clusters are planned for two GPUs over NVLink only";
  }
};

// A 2-rank group (timeout in seconds) whose rank 1 never makes a call: rank 0 enters the path,
// allocates a call of its shape and runs body(ctx, call); the verdict as runLocalGroup's.
std::string withAbsentPeer(const FaultPath& fp, double timeout,
                           const std::function<std::string(RankCtx&, const FaultCall&)>& body, std::string* skip) {
  return runLocalGroup(2, testConfig(timeout), 16, [&](RankCtx& ctx) -> std::string {
    if (ctx.rank == 1) return "";  // never arrives
    if (std::string e = enterPath(ctx, fp, {arfusion::Shape{fp.tokens, fp.hidden}}); !e.empty()) return e;
    const FaultCall call(fp.tokens, fp.hidden);
    if (!call.ok()) return "cudaMalloc";
    return body(ctx, call);
  }, skip);
}

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

// ------------------------------------------------------------------ stale flags, epoch wrap
// Unless `prior` is a failure, sets this rank's epochs to `value` (testing::setEpochs); then the
// host barrier setEpochs asks for (agreeStep, which every rank calls, failed or not).
std::string setEpochsOnAll(RankCtx& ctx, uint32_t value, std::string prior) {
  if (prior.empty() && arfusion::testing::setEpochs(ctx.comm, value) != Status::kSuccess)
    prior = std::string("setEpochs: ") + arfusion::lastError();
  return agreeStep(ctx, prior, 0);
}

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

// ------------------------------------------------------------------ the single-GPU kernel
// Three aliasings: norm_out = x (as the NCCL path calls it), every buffer separate, and
// residual_out = residual_in. Outputs poisoned (NaN) before each call.
TEST(AddRMSNorm, MatchesTheReferenceInPlaceAndOutOfPlace) {
  if (gpuCount() < 1) GTEST_SKIP() << "needs a GPU";
  enum Alias { kNormIsX, kSeparate, kResidualInPlace };
  for (DType d : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
    for (int64_t H : {4096, 2880, 4095}) {
      for (Alias alias : {kNormIsX, kSeparate, kResidualInPlace}) {
        const int64_t T = 37;
        const size_t E = elemSize(d), bytes = T * H * E;
        const uint64_t seed = 31 + H + 1000 * alias;
        const auto x = randomTensor(T * H, d, seed), res = randomTensor(T * H, d, seed + 1), g = randomTensor(H, d, seed + 2);
        const auto ref = reference({x}, res, g, T, H, d, 1e-6);
        const std::string what = std::string(arfusion::toString(d)) + " " + std::to_string(H) + " alias " + std::to_string(alias);
        void *dx = nullptr, *dr = nullptr, *dro = nullptr, *dg = nullptr, *dn = nullptr;
        ASSERT_EQ(cudaMalloc(&dx, bytes), cudaSuccess);
        ASSERT_EQ(cudaMalloc(&dr, bytes), cudaSuccess);
        ASSERT_EQ(cudaMalloc(&dro, bytes), cudaSuccess);
        ASSERT_EQ(cudaMalloc(&dn, bytes), cudaSuccess);
        ASSERT_EQ(cudaMalloc(&dg, H * E), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(dx, x.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(dr, res.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(dg, g.data(), H * E, cudaMemcpyHostToDevice), cudaSuccess);
        ASSERT_EQ(cudaMemset(dro, 0xff, bytes), cudaSuccess);
        ASSERT_EQ(cudaMemset(dn, 0xff, bytes), cudaSuccess);
        void* norm_out = alias == kNormIsX ? dx : dn;
        void* res_out = alias == kResidualInPlace ? dr : dro;
        ASSERT_EQ(arfusion::addRMSNorm(dx, dr, res_out, dg, norm_out, T, H, d, 1e-6f, nullptr), Status::kSuccess)
            << what << ": " << arfusion::lastError();
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
        std::vector<uint8_t> got(bytes), got_res(bytes);
        ASSERT_EQ(cudaMemcpy(got.data(), norm_out, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(got_res.data(), res_out, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
        const CheckResult a = check(got_res, ref, g, T, H, d, 1), b = check(got, ref, g, T, H, d, 2);
        EXPECT_TRUE(a.ok()) << what << ": residual_out " << a.first;
        EXPECT_TRUE(b.ok()) << what << ": norm_out " << b.first;
        for (void* p : {dx, dr, dro, dn, dg}) cudaFree(p);
      }
    }
  }
}

// ------------------------------------------------------------------ lifecycle
// 200 create/destroy cycles of a 2-rank group (one GPU each where there are two) leave the free
// device memory where it was after the first cycle (within 2 MiB: the allocator's own rounding).
TEST(Lifecycle, CreateDestroy200TimesLeaksNoDeviceMemory) {
  const int ngpu = gpuCount();
  if (ngpu < 1) GTEST_SKIP() << "needs a GPU";
  arfusion::Config cfg = testConfig();
  cfg.workspace_bytes = size_t(8) << 20;
  const int devs[2] = {0, ngpu > 1 ? 1 : 0};
  auto cycle = [&]() -> bool {
    std::vector<arfusion::Communicator*> comms;
    if (arfusion::testing::createGroup(2, devs, cfg, &comms, 8) != Status::kSuccess) return false;
    for (int r = 0; r < 2; ++r) {
      cudaSetDevice(devs[r]);
      if (arfusion::commDestroy(comms[r]) != Status::kSuccess) return false;
    }
    return true;
  };
  auto freeBytes = [&](int dev) {
    size_t f = 0, t = 0;
    cudaSetDevice(dev);
    cudaDeviceSynchronize();
    cudaMemGetInfo(&f, &t);
    return f;
  };
  ASSERT_TRUE(cycle()) << arfusion::lastError();
  const size_t base0 = freeBytes(devs[0]), base1 = freeBytes(devs[1]);
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(cycle()) << "cycle " << i << ": " << arfusion::lastError();
  const size_t slack = size_t(2) << 20;
  EXPECT_GE(freeBytes(devs[0]) + slack, base0);
  EXPECT_GE(freeBytes(devs[1]) + slack, base1);
}

// As gtest_main, but a run in which every test was skipped (no GPU, or fewer than the tests need)
// exits 77, which ctest reports as skipped (tests/CMakeLists.txt, SKIP_RETURN_CODE).
int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  const ::testing::UnitTest& u = *::testing::UnitTest::GetInstance();
  if (rc == 0 && u.successful_test_count() == 0 && u.skipped_test_count() > 0) return kExitSkipped;
  return rc;
}
