// GPU tests: the creation-time self-check and speed check, with injected faults.
#include "gpu_tests.h"

using namespace gputest;

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

// ------------------------------------------------------------------ forced GridDependency
// A GridDependency forced by the user (Config::sync_mode, ARFUSION_SYNC, commSetStrategy) runs
// only where the self-check vouched for it (src/host/arch.cpp gridDependencyAllowed): forced at
// creation, the check runs wherever fusion does, and a failure refuses creation with kNotSupported
// on every rank; on an arch where GridDependency is not validated (SM120, forced onto this GPU's
// policy by testing::setArchPolicy) a check that did not run refuses commSetStrategy too.
struct ScopedArchPolicy {
  ScopedArchPolicy(int major, int minor) { ok = arfusion::testing::setArchPolicy(major, minor) == Status::kSuccess; }
  ~ScopedArchPolicy() { arfusion::testing::setArchPolicy(0, 0); }
  bool ok = false;
};

// Creates a 2-rank local group under `config`; its status and message (the group is destroyed).
Status createLocal2(const arfusion::Config& config, std::string* message) {
  const int devs[2] = {0, 0};
  std::vector<arfusion::Communicator*> comms;
  const Status st = arfusion::testing::createGroup(2, devs, config, &comms, 16);
  *message = arfusion::lastError();
  for (arfusion::Communicator* c : comms)
    if (c) arfusion::commDestroy(c);
  return st;
}

TEST(ForcedGridDependency, OnAnUnvalidatedArchItRunsAfterPassingTheSelfCheck) {
  if (const std::string why = selfCheckSkip(); !why.empty()) GTEST_SKIP() << why;
  ScopedArchPolicy sm120(12, 0);
  ASSERT_TRUE(sm120.ok) << arfusion::lastError();
  arfusion::Config cfg = testConfig();
  cfg.sync_mode = arfusion::SyncMode::kGridDependency;
  std::string skip;
  const std::string err = runLocalGroup(2, cfg, 16, [](RankCtx& ctx) -> std::string {
    const std::string local = [&]() -> std::string {
      arfusion::Plan p;
      if (arfusion::plan(ctx.comm, arfusion::Shape{8, 4096}, &p) != Status::kSuccess) return std::string("plan: ") + arfusion::lastError();
      if (p.sync_mode != arfusion::SyncMode::kGridDependency || std::string(p.reason).find("sync griddep forced") == std::string::npos)
        return std::string("the forced GridDependency is not planned: ") + p.reason;
      return "";
    }();
    if (std::string v = agreeStep(ctx, local, 0); !v.empty()) return v;
    return scenarioShape(ctx, ShapeCase{DType::kBFloat16, 17, 4096, 120});
  }, &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(err, "");
}

// Forced at creation, the self-check fails on one rank (wrong result, or slower): creation is
// refused on every rank, saying why; on SM90's own policy and on SM120's.
TEST(ForcedGridDependency, AFailedSelfCheckRefusesCreation) {
  if (const std::string why = selfCheckSkip(); !why.empty()) GTEST_SKIP() << why;
  using arfusion::testing::SelfCheckFault;
  for (int policy : {0, 120}) {
    for (SelfCheckFault fault : {SelfCheckFault::kWrongResult, SelfCheckFault::kSlow}) {
      SCOPED_TRACE("arch policy " + std::to_string(policy) + ", fault " + std::to_string(int(fault)));
      ScopedArchPolicy arch(policy / 10, policy % 10);
      ScopedSelfCheckFault injected(1, fault);
      ASSERT_TRUE(arch.ok && injected.ok) << arfusion::lastError();
      arfusion::Config cfg = testConfig();
      cfg.sync_mode = arfusion::SyncMode::kGridDependency;
      std::string message;
      EXPECT_EQ(createLocal2(cfg, &message), Status::kNotSupported) << message;
      EXPECT_NE(message.find("GridDependency sync forced"), std::string::npos) << message;
      EXPECT_NE(message.find("self-check"), std::string::npos) << message;
    }
  }
}

// Not forced at creation: on SM120's policy the self-check does not run, Auto takes FlagBarrier,
// and forcing GridDependency later is refused (settings unchanged); on SM90's own policy with a
// failed check, the same. A correct SM90 group accepts it (the control).
TEST(ForcedGridDependency, CommSetStrategyRefusesWhatTheSelfCheckDidNotVouchFor) {
  if (const std::string why = selfCheckSkip(); !why.empty()) GTEST_SKIP() << why;
  struct Case {
    int policy;
    arfusion::testing::SelfCheckFault fault;
    bool allowed;
  };
  for (const Case& k : {Case{120, arfusion::testing::SelfCheckFault::kNone, false},
                        Case{0, arfusion::testing::SelfCheckFault::kWrongResult, false},
                        Case{0, arfusion::testing::SelfCheckFault::kNone, true}}) {
    SCOPED_TRACE("arch policy " + std::to_string(k.policy) + ", fault " + std::to_string(int(k.fault)));
    ScopedArchPolicy arch(k.policy / 10, k.policy % 10);
    ScopedSelfCheckFault injected(1, k.fault);
    ASSERT_TRUE(arch.ok && injected.ok) << arfusion::lastError();
    std::string skip;
    const std::string err = runLocalGroup(2, testConfig(), 16, [&k](RankCtx& ctx) -> std::string {
      const std::string local = [&]() -> std::string {
        arfusion::Plan p;
        if (arfusion::plan(ctx.comm, arfusion::Shape{8, 4096}, &p) != Status::kSuccess) return arfusion::lastError();
        if (!k.allowed && p.sync_mode != arfusion::SyncMode::kFlagBarrier)
          return std::string("Auto is not on FlagBarrier: ") + p.reason;
        const Status st = arfusion::commSetStrategy(ctx.comm, arfusion::Strategy::kOneShot, arfusion::SyncMode::kGridDependency);
        if (k.allowed) return st == Status::kSuccess ? "" : std::string("a checked GridDependency refused: ") + arfusion::lastError();
        if (st != Status::kNotSupported) return std::string("expected kNotSupported, got ") + arfusion::statusString(st);
        if (std::string(arfusion::lastError()).find("refused") == std::string::npos)
          return std::string("the refusal does not say why: ") + arfusion::lastError();
        if (arfusion::plan(ctx.comm, arfusion::Shape{8, 4096}, &p) != Status::kSuccess || p.sync_mode != arfusion::SyncMode::kFlagBarrier)
          return std::string("the refused setting was applied: ") + p.reason;
        return "";
      }();
      if (std::string v = agreeStep(ctx, local, 0); !v.empty()) return v;
      return scenarioShape(ctx, ShapeCase{DType::kBFloat16, 5, 2880, 121});
    }, &skip);
    if (!skip.empty()) GTEST_SKIP() << skip;
    EXPECT_EQ(err, "");
  }
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
