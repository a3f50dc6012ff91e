// CPU tests: no GPU needed. Reference math, configuration and environment, argument validation,
// plan decisions, tuning files, the arch policy.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <tuple>
#include <random>
#include <string>

#include "arfusion/arfusion.h"
#include "arfusion/testing.h"
#include "host/arch.h"
#include "host/communicator.h"
#include "host/env.h"
#include "host/plan.h"
#include "host/validate.h"
#include "kernels/dispatch.cuh"
#include "reference.h"

using namespace arfusion;
using namespace arfusion::detail;

namespace {

EnvLookup mapEnv(std::map<std::string, std::string> m) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(m));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

Topology h200Pair() {
  Topology t;
  t.world = 2;
  t.has_nccl = true;
  t.fusion_ok = true;
  t.cc_major = 9;
  t.cc_minor = 0;
  t.link = LinkType::kNVLink;
  t.max_blocks = 132;
  const WorkspaceLayout layout(size_t(256) << 20, 2);  // the default workspace: regions of two sizes
  t.region_bytes = layout.regionBytes(132);
  t.lamport_region_bytes = layout.lamportRegionBytes(132);
  return t;
}

Plan planFor(const Topology& t, Shape s, Strategy strat = Strategy::kAuto, SyncMode sync = SyncMode::kAuto,
             Status* st_out = nullptr) {
  AutoTable table = builtinTable(t);
  PlanInputs in;
  in.topo = t;
  in.strategy = strat;
  in.sync = sync;
  in.sync_auto = SyncMode::kGridDependency;
  in.sync_auto_reason = "test";
  in.table = &table;
  Plan p;
  const Status st = makePlan(in, s, &p);
  if (st_out) *st_out = st;
  return p;
}

}  // namespace

// ---------------------------------------------------------------- reference and tolerances
TEST(Reference, KnownValuesAndNorm) {
  const int64_t tokens = 1, hidden = 4;
  std::vector<std::vector<uint8_t>> inputs(2, std::vector<uint8_t>(hidden * 4));
  std::vector<uint8_t> residual(hidden * 4), gamma(hidden * 4);
  for (int h = 0; h < hidden; ++h) {
    arftest::fromDouble(inputs[0].data(), h, DType::kFloat32, 1.0);
    arftest::fromDouble(inputs[1].data(), h, DType::kFloat32, 2.0);
    arftest::fromDouble(residual.data(), h, DType::kFloat32, 1.0);
    arftest::fromDouble(gamma.data(), h, DType::kFloat32, 0.5);
  }
  const auto ref = arftest::reference(inputs, residual, gamma, tokens, hidden, DType::kFloat32, 0.0);
  for (int h = 0; h < hidden; ++h) {
    EXPECT_DOUBLE_EQ(ref.sum[h], 3.0);
    EXPECT_DOUBLE_EQ(ref.residual_out[h], 4.0);
    EXPECT_DOUBLE_EQ(ref.norm_out[h], 0.5);  // constant row: x / rms(x) == 1
  }
}

TEST(Reference, CheckCatchesAWrongAndAnUnwrittenElement) {
  const int64_t tokens = 3, hidden = 64;
  const DType d = DType::kBFloat16;
  std::vector<std::vector<uint8_t>> inputs = {arftest::randomTensor(tokens * hidden, d, 1),
                                              arftest::randomTensor(tokens * hidden, d, 2)};
  auto residual = arftest::randomTensor(tokens * hidden, d, 3);
  auto gamma = arftest::randomTensor(hidden, d, 4);
  const auto ref = arftest::reference(inputs, residual, gamma, tokens, hidden, d, 1e-6);
  std::vector<uint8_t> out(tokens * hidden * 2);
  for (size_t i = 0; i < size_t(tokens * hidden); ++i) arftest::fromDouble(out.data(), i, d, ref.norm_out[i]);
  EXPECT_TRUE(arftest::check(out, ref, gamma, tokens, hidden, d, 2).ok());
  arftest::fromDouble(out.data(), 70, d, ref.norm_out[70] * 1.1 + 0.5);
  EXPECT_EQ(arftest::check(out, ref, gamma, tokens, hidden, d, 2).bad, 1);
  std::memset(out.data() + 2 * 5, 0xff, 2);  // NaN poison left in place
  EXPECT_EQ(arftest::check(out, ref, gamma, tokens, hidden, d, 2).unwritten, 1);
}

TEST(Reference, RandomTensorsAreFreshAndNonZero) {
  auto a = arftest::randomTensor(4096, DType::kBFloat16, 7);
  auto b = arftest::randomTensor(4096, DType::kBFloat16, 8);
  EXPECT_NE(a, b);
  int zeros = 0;
  for (size_t i = 0; i < 4096; ++i) zeros += arftest::toDouble(a.data(), i, DType::kBFloat16) == 0.0;
  EXPECT_LT(zeros, 8);
}

// ---------------------------------------------------------------- environment
TEST(Env, OverridesApply) {
  Config c;
  std::string storage;
  ASSERT_EQ(applyEnv(mapEnv({{"ARFUSION_STRATEGY", "twoshot"}, {"ARFUSION_SYNC", "flag"}, {"ARFUSION_WORKSPACE_MB", "16"},
                             {"ARFUSION_TIMEOUT_S", "2.5"}, {"ARFUSION_TUNING_FILE", "/tmp/x"}, {"ARFUSION_SELF_CHECK", "0"},
                             {"ARFUSION_MAX_BLOCKS", "66"}}),
                     &c, &storage),
            Status::kSuccess);
  EXPECT_EQ(c.strategy, Strategy::kTwoShot);
  EXPECT_EQ(c.sync_mode, SyncMode::kFlagBarrier);
  EXPECT_EQ(c.workspace_bytes, size_t(16) << 20);
  EXPECT_DOUBLE_EQ(c.timeout_seconds, 2.5);
  EXPECT_STREQ(c.tuning_file, "/tmp/x");
  EXPECT_FALSE(c.self_check);
  EXPECT_EQ(c.max_blocks, 66);
}

TEST(Env, UnsetLeavesDefaults) {
  Config c, d;
  std::string storage;
  ASSERT_EQ(applyEnv(mapEnv({}), &c, &storage), Status::kSuccess);
  EXPECT_EQ(c.strategy, d.strategy);
  EXPECT_EQ(c.workspace_bytes, d.workspace_bytes);
  EXPECT_EQ(c.tuning_file, nullptr);
}

TEST(Env, MalformedValuesAreErrorsNamingTheVariable) {
  const std::map<std::string, std::string> bad[] = {
      {{"ARFUSION_STRATEGY", "fast"}}, {{"ARFUSION_SYNC", "pdl"}},        {{"ARFUSION_WORKSPACE_MB", "0"}},
      {{"ARFUSION_WORKSPACE_MB", "abc"}}, {{"ARFUSION_TIMEOUT_S", "-1"}}, {{"ARFUSION_TIMEOUT_S", "inf"}},
      {{"ARFUSION_SELF_CHECK", "yes"}},  {{"ARFUSION_MAX_BLOCKS", "-1"}},   {{"ARFUSION_MAX_BLOCKS", "1.5"}}};
  for (const auto& m : bad) {
    Config c;
    std::string storage;
    EXPECT_EQ(applyEnv(mapEnv(m), &c, &storage), Status::kInvalidArgument) << m.begin()->first;
    EXPECT_NE(std::string(lastError()).find(m.begin()->first), std::string::npos) << lastError();
  }
}

// The two-shot split is a diagnostic switch outside Config (env.h): on unless "0", strict parsing.
TEST(Env, TwoShotSplitIsOnUnlessZero) {
  bool split = false;
  ASSERT_EQ(twoShotSplitFromEnv(mapEnv({}), &split), Status::kSuccess);
  EXPECT_TRUE(split);
  ASSERT_EQ(twoShotSplitFromEnv(mapEnv({{"ARFUSION_TWO_SHOT_SPLIT", "0"}}), &split), Status::kSuccess);
  EXPECT_FALSE(split);
  ASSERT_EQ(twoShotSplitFromEnv(mapEnv({{"ARFUSION_TWO_SHOT_SPLIT", "1"}}), &split), Status::kSuccess);
  EXPECT_TRUE(split);
  EXPECT_EQ(twoShotSplitFromEnv(mapEnv({{"ARFUSION_TWO_SHOT_SPLIT", "off"}}), &split), Status::kInvalidArgument);
  EXPECT_NE(std::string(lastError()).find("ARFUSION_TWO_SHOT_SPLIT"), std::string::npos) << lastError();
}

TEST(Env, EveryVariableIsListed) {
  EXPECT_GE(kNumEnvVars, 7);
  for (int i = 0; i < kNumEnvVars; ++i) EXPECT_EQ(std::string(kEnvVars[i].name).rfind("ARFUSION_", 0), 0u);
}

// ---------------------------------------------------------------- validation
namespace {
RowArgs goodArgs(std::vector<char>& mem, int64_t tokens = 4, int64_t hidden = 64) {
  const size_t t = tokens * hidden * 2;
  mem.assign(5 * t + 64, 0);
  char* base = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(mem.data()) + 15) / 16 * 16);
  RowArgs a;
  a.input = base;
  a.residual_in = base + t;
  a.residual_out = base + 2 * t;
  a.gamma = base + 3 * t;
  a.out = base + 4 * t;
  a.tokens = tokens;
  a.hidden = hidden;
  a.eps = 1e-6f;
  a.op = Op::kAllReduceAddRMSNorm;
  return a;
}
}  // namespace

TEST(Validate, GoodArgumentsPass) {
  std::vector<char> mem;
  RowArgs a = goodArgs(mem);
  EXPECT_EQ(validateArgs(a, DType::kBFloat16), Status::kSuccess) << lastError();
  EXPECT_TRUE(vectorizable(a, DType::kBFloat16));
  a.residual_out = const_cast<void*>(a.residual_in);  // in place
  EXPECT_EQ(validateArgs(a, DType::kBFloat16), Status::kSuccess) << lastError();
}

TEST(Validate, EachBadArgumentIsRejectedWithAMessage) {
  struct Case {
    const char* what;
    void (*mutate)(RowArgs&);
    DType dtype;
  };
  const Case cases[] = {
      {"input is null", [](RowArgs& a) { a.input = nullptr; }, DType::kBFloat16},
      {"residual_in is null", [](RowArgs& a) { a.residual_in = nullptr; }, DType::kBFloat16},
      {"residual_out is null", [](RowArgs& a) { a.residual_out = nullptr; }, DType::kBFloat16},
      {"gamma is null", [](RowArgs& a) { a.gamma = nullptr; }, DType::kBFloat16},
      {"norm_out is null", [](RowArgs& a) { a.out = nullptr; }, DType::kBFloat16},
      {"tokens must be", [](RowArgs& a) { a.tokens = 0; }, DType::kBFloat16},
      {"tokens must be", [](RowArgs& a) { a.tokens = -3; }, DType::kBFloat16},
      {"hidden must be", [](RowArgs& a) { a.hidden = 0; }, DType::kBFloat16},
      {"hidden must be", [](RowArgs& a) { a.hidden = 65537; }, DType::kBFloat16},
      {"eps must be", [](RowArgs& a) { a.eps = -1e-6f; }, DType::kBFloat16},
      {"eps must be", [](RowArgs& a) { a.eps = NAN; }, DType::kBFloat16},
      {"dtype", [](RowArgs&) {}, static_cast<DType>(7)},
      {"overlap", [](RowArgs& a) { a.out = const_cast<void*>(a.input); }, DType::kBFloat16},
      {"overlap", [](RowArgs& a) { a.residual_out = static_cast<char*>(const_cast<void*>(a.residual_in)) + 2; }, DType::kBFloat16},
      {"gamma overlaps", [](RowArgs& a) { a.gamma = a.out; }, DType::kBFloat16},
      {"is not aligned", [](RowArgs& a) { a.input = static_cast<const char*>(a.input) + 1; }, DType::kBFloat16},
      {"is not aligned", [](RowArgs& a) { a.gamma = static_cast<const char*>(a.gamma) + 2; }, DType::kFloat32},
  };
  for (const Case& c : cases) {
    std::vector<char> mem;
    RowArgs a = goodArgs(mem);
    c.mutate(a);
    EXPECT_EQ(validateArgs(a, c.dtype), Status::kInvalidArgument) << c.what;
    EXPECT_NE(std::string(lastError()).find(c.what), std::string::npos) << c.what << " vs " << lastError();
  }
}

TEST(Validate, MisalignedOrOddRowsTakeTheScalarPath) {
  std::vector<char> mem;
  RowArgs a = goodArgs(mem);
  a.input = static_cast<const char*>(a.input) + 2;
  EXPECT_FALSE(vectorizable(a, DType::kBFloat16));
  RowArgs b = goodArgs(mem, 4, 65);
  EXPECT_FALSE(vectorizable(b, DType::kBFloat16));
  RowArgs c = goodArgs(mem, 4, 64);
  EXPECT_TRUE(vectorizable(c, DType::kFloat32));
}

// ------------------------------------------------------------------ kernel variants
// The kernel preload (kernels.h, preloadKernels) walks forEachVariant; a launch picks its kernel
// with dispatchVariant. Every variant a launch can pick must be walked (or it would load lazily,
// the deadlock of session 9), and nothing else (or dead kernels get built and loaded).
namespace {
using VariantKey = std::tuple<int, int, int>;  // dtype, VEC, kVpt
template <typename V>
VariantKey keyOf(V) {
  using T = typename V::type;
  const int dtype = std::is_same_v<T, float> ? 0 : std::is_same_v<T, __half> ? 1 : 2;
  return {dtype, V::vec, V::vpt};
}
}  // namespace

TEST(Dispatch, TheEnumerationCoversEveryVariantALaunchCanPick) {
  std::set<VariantKey> walked, picked;
  ASSERT_EQ(arfusion::detail::forEachVariant([&](auto v) {
              walked.insert(keyOf(v));
              return cudaSuccess;
            }),
            cudaSuccess);
  for (DType d : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
    for (bool vector : {true, false})
      for (int64_t hidden = 1; hidden <= 40000; hidden += hidden < 9000 ? 1 : 97)
        arfusion::detail::dispatchVariant(d, vector, hidden, [&](auto v) {
          picked.insert(keyOf(v));
          return cudaSuccess;
        });
  EXPECT_EQ(walked, picked);
  EXPECT_EQ(walked.size(), 12u);  // 3 dtypes x (kVpt 1, 2, 4 on the vector path + the scalar path)
}

// The launch configuration of every fused grid and of the clusters' occupancy query.
TEST(Dispatch, FusedConfigHasTheGridClustersAndSyncAttribute) {
  using arfusion::detail::FusedConfig;
  const FusedConfig flag(false, 7, 1, nullptr);  // FlagBarrier, one block per row
  EXPECT_EQ(flag.cfg.gridDim.x, 7u);
  EXPECT_EQ(flag.cfg.blockDim.x, unsigned(arfusion::detail::kThreads));
  EXPECT_EQ(flag.cfg.numAttrs, 0u);
  const FusedConfig rows(true, 8, 4, nullptr);  // GridDependency, rows over clusters of 4
  EXPECT_EQ(rows.cfg.gridDim.x, 8u);
  EXPECT_EQ(rows.cfg.blockDim.x, unsigned(arfusion::detail::kThreads / 4));
  ASSERT_EQ(rows.cfg.numAttrs, 2u);
  EXPECT_EQ(rows.cfg.attrs, rows.attrs);
  EXPECT_EQ(rows.attrs[0].id, cudaLaunchAttributeProgrammaticStreamSerialization);
  EXPECT_EQ(rows.attrs[0].val.programmaticStreamSerializationAllowed, 1);
  EXPECT_EQ(rows.attrs[1].id, cudaLaunchAttributeClusterDimension);
  EXPECT_EQ(rows.attrs[1].val.clusterDim.x, 4u);
  EXPECT_EQ(rows.attrs[1].val.clusterDim.y, 1u);
  const FusedConfig query(false, 2, 2, nullptr);  // the occupancy query: the cluster only
  ASSERT_EQ(query.cfg.numAttrs, 1u);
  EXPECT_EQ(query.attrs[0].id, cudaLaunchAttributeClusterDimension);
}

// ---------------------------------------------------------------- plan
TEST(Plan, SingleRankIsLocal) {
  Topology t;
  t.world = 1;
  const Plan p = planFor(t, Shape{4, 4096});
  EXPECT_EQ(p.strategy, Strategy::kNccl);
  EXPECT_NE(std::string(p.reason).find("single rank"), std::string::npos);
}

TEST(Plan, NoFusionTakesNcclAndSaysWhy) {
  Topology t = h200Pair();
  t.fusion_ok = false;
  t.no_fusion_reason = "rank 1: no peer access";
  const Plan p = planFor(t, Shape{1, 4096});
  EXPECT_EQ(p.strategy, Strategy::kNccl);
  EXPECT_NE(std::string(p.reason).find("no peer access"), std::string::npos);
  Status st;
  planFor(t, Shape{1, 4096}, Strategy::kOneShot, SyncMode::kAuto, &st);
  EXPECT_EQ(st, Status::kNotSupported);
}

TEST(Plan, H200PairFollowsTheMeasuredTable) {
  const Plan one = planFor(h200Pair(), Shape{4, 4096});
  EXPECT_EQ(one.strategy, Strategy::kOneShot);
  EXPECT_EQ(one.sync_mode, SyncMode::kGridDependency);
  EXPECT_EQ(one.blocks, 4);
  EXPECT_EQ(one.rows_per_step, 1);
  auto pick = [](int64_t tokens, int64_t hidden, DType d = DType::kBFloat16) {
    return planFor(h200Pair(), Shape{tokens, hidden, d}).strategy;
  };
  EXPECT_EQ(pick(16, 8192), Strategy::kOneShot);    // 256 KB
  EXPECT_EQ(pick(128, 8192), Strategy::kOneShot);   // 2 MB
  EXPECT_EQ(pick(128, 1024), Strategy::kOneShot);   // 128 one-row blocks
  EXPECT_EQ(pick(181, 4096), Strategy::kTwoShot);   // 1.4 MB, 181 rows
  EXPECT_EQ(pick(256, 8192), Strategy::kTwoShot);   // 4 MB
  EXPECT_EQ(pick(362, 8192), Strategy::kTwoShot);   // 5.9 MB
  EXPECT_EQ(pick(512, 8192), Strategy::kTwoShot);   // 8 MB
  EXPECT_EQ(pick(2048, 8192), Strategy::kTwoShot);  // 32 MB
  EXPECT_EQ(pick(8192, 8192), Strategy::kTwoShot);  // 128 MB
  // The token floor: rows below 133 tokens (one row per block of the one-shot on 132 SMs) stay on
  // the one-shot whatever their size.
  EXPECT_EQ(pick(128, 16384), Strategy::kOneShot);                   // 4 MB
  EXPECT_EQ(pick(128, 16384, DType::kFloat32), Strategy::kOneShot);  // 8 MB
  EXPECT_EQ(pick(132, 32768), Strategy::kOneShot);                   // 8.3 MB
  EXPECT_EQ(pick(132, 65536), Strategy::kTwoShot);  // 128 KB rows do not fit a one-shot step
  EXPECT_EQ(pick(132, 8192), Strategy::kOneShot);                    // 2.1 MB
  EXPECT_EQ(pick(133, 8192), Strategy::kTwoShot);                    // 2.1 MB, 133 rows
  EXPECT_EQ(pick(133, 16384), Strategy::kTwoShot);                   // 4.2 MB
  EXPECT_EQ(pick(256, 1024), Strategy::kOneShot);                    // 512 KiB: the byte rule
  EXPECT_EQ(pick(257, 1024), Strategy::kTwoShot);                    // 514 KiB, 257 tokens
  EXPECT_EQ(pick(144, 2048), Strategy::kTwoShot);                    // 576 KB of 4 KB rows
  EXPECT_EQ(pick(400, 1024), Strategy::kTwoShot);                    // 800 KB of 2 KB rows
  EXPECT_EQ(pick(512, 1024), Strategy::kTwoShot);                    // 1 MiB of 2 KB rows
  EXPECT_EQ(pick(182, 2880), Strategy::kTwoShot);                    // 1 MiB of 5.6 KB rows
  EXPECT_EQ(pick(128, 4096), Strategy::kOneShot);                    // 1 MiB, 128 tokens: the floor
  EXPECT_NE(std::string(planFor(h200Pair(), Shape{128, 16384}).reason).find("tokens < 133"), std::string::npos);
}

// Steps spread rows evenly: no nearly empty last wave of blocks.
TEST(Plan, GeometryBalancesStepsPerBlock) {
  const Plan p = planFor(h200Pair(), Shape{2048, 4096}, Strategy::kTwoShot, SyncMode::kAuto);
  const int64_t units = (2048 + 2 * p.rows_per_step - 1) / (2 * p.rows_per_step);
  const int64_t steps = (units + p.blocks - 1) / p.blocks;
  EXPECT_GE(units, steps * p.blocks - p.blocks / 4) << "last wave under-filled: R=" << p.rows_per_step << " blocks=" << p.blocks;
}

// Plan::lamport names the kernel a call runs: every GridDependency one-shot; a GridDependency
// two-shot only while each block takes one unit that fits a Lamport region (127 KB at 2 ranks and
// the default workspace: hidden 8192 bf16 up to R = 3, i.e. 792 tokens on 132 blocks).
TEST(Plan, ReportsTheLamportKernelWhereItRuns) {
  const Topology t = h200Pair();
  auto lamport = [&](int64_t tokens, int64_t hidden, Strategy s, SyncMode sync) {
    const Plan p = planFor(t, Shape{tokens, hidden}, s, sync);
    EXPECT_EQ(p.lamport, usesLamport(t, Shape{tokens, hidden}, p.strategy, p.sync_mode, p.blocks, p.rows_per_step));
    return p.lamport;
  };
  EXPECT_TRUE(lamport(1, 4096, Strategy::kOneShot, SyncMode::kGridDependency));
  EXPECT_TRUE(lamport(2048, 8192, Strategy::kOneShot, SyncMode::kGridDependency));  // many units: still Lamport
  EXPECT_FALSE(lamport(1, 4096, Strategy::kOneShot, SyncMode::kFlagBarrier));
  EXPECT_TRUE(lamport(512, 8192, Strategy::kTwoShot, SyncMode::kGridDependency));   // R = 2
  EXPECT_TRUE(lamport(792, 8192, Strategy::kTwoShot, SyncMode::kGridDependency));   // R = 3: the largest
  EXPECT_FALSE(lamport(793, 8192, Strategy::kTwoShot, SyncMode::kGridDependency));  // R = 4: 256 KB + headers
  EXPECT_FALSE(lamport(8192, 8192, Strategy::kTwoShot, SyncMode::kGridDependency)); // R = 16: 512 KB
  EXPECT_FALSE(lamport(512, 8192, Strategy::kTwoShot, SyncMode::kFlagBarrier));
  EXPECT_FALSE(lamport(4096, 8192, Strategy::kNccl, SyncMode::kGridDependency));
  // More units than blocks, each fitting a Lamport region: the flag kernel (the Lamport two-shot
  // runs unit b only). 4 blocks, 64 x 1024 bf16: R = 2, 16 units.
  Topology small = t;
  small.max_blocks = 4;
  small.region_bytes = 8192;
  const Plan many = planFor(small, Shape{64, 1024}, Strategy::kTwoShot, SyncMode::kGridDependency);
  ASSERT_EQ(many.blocks, 4);
  EXPECT_GT((64 + 2 * many.rows_per_step - 1) / (2 * many.rows_per_step), many.blocks);
  EXPECT_GE(small.lamport_region_bytes, kLamportHeaderBytes + size_t(2) * many.rows_per_step * 2048);
  EXPECT_FALSE(many.lamport);
  // Auto at 2 x H200 (GridDependency on SM90): a one-unit two-shot runs the Lamport kernel.
  const Plan a = planFor(t, Shape{512, 8192});
  EXPECT_EQ(a.strategy, Strategy::kTwoShot);
  EXPECT_TRUE(a.lamport);
}

// Plan::row_blocks: the Lamport one-shot spreads each row of a small message over a cluster, on
// the measured H200 pair only, where the clusters fit (Topology::row_clusters, set at creation).
TEST(Plan, SmallMessagesSpreadRowsOverClustersOnTheMeasuredPair) {
  Topology t = h200Pair();
  t.row_clusters[2] = 66;
  t.row_clusters[4] = 92;
  auto rowBlocks = [&](const Topology& topo, int64_t tokens, int64_t hidden, DType d = DType::kBFloat16,
                       SyncMode sync = SyncMode::kAuto) {
    const Plan p = planFor(topo, Shape{tokens, hidden, d}, Strategy::kAuto, sync);
    EXPECT_EQ(p.strategy, Strategy::kOneShot);
    EXPECT_EQ(p.blocks, (p.row_blocks > 1 ? tokens : std::min<int64_t>(tokens, topo.max_blocks)) * p.row_blocks)
        << tokens << " x " << hidden;
    EXPECT_EQ(p.row_blocks, p.lamport ? oneShotRowBlocks(topo, Shape{tokens, hidden, d}, p.blocks / p.row_blocks, p.rows_per_step) : 1);
    return p.row_blocks;
  };
  EXPECT_EQ(rowBlocks(t, 1, 4096), 4);    // 8 KB rows: 2 KB shares
  EXPECT_NE(std::string(planFor(t, Shape{1, 4096}).reason).find("4 blocks per row"), std::string::npos);
  EXPECT_EQ(rowBlocks(t, 16, 4096), 4);   // 128 KiB: the largest message
  EXPECT_EQ(rowBlocks(t, 17, 4096), 1);
  EXPECT_EQ(rowBlocks(t, 1, 8192), 4);
  EXPECT_EQ(rowBlocks(t, 16, 8192), 1);   // 256 KiB of 16 KB rows: measured slower over clusters
  // Rows of 32-64 KB: up to 16 tokens (1 MiB of fp32 16384).
  EXPECT_EQ(rowBlocks(t, 16, 16384), 4);
  EXPECT_EQ(rowBlocks(t, 17, 16384), 1);
  EXPECT_EQ(rowBlocks(t, 16, 16384, DType::kFloat32), 4);
  EXPECT_EQ(rowBlocks(t, 11, 8192, DType::kFloat32), 4);
  EXPECT_EQ(oneShotRowBlocks(t, Shape{3, 32768, DType::kFloat32}, 3, 1), 1);  // 128 KB rows: unmeasured
  EXPECT_EQ(rowBlocks(t, 1, 2048), 2);    // 4 KB rows: 2 shares of 2 KB
  EXPECT_EQ(rowBlocks(t, 1, 1024), 1);    // 2 KB rows
  EXPECT_EQ(rowBlocks(t, 2, 4096, DType::kFloat32), 4);
  EXPECT_EQ(rowBlocks(t, 1, 4096, DType::kBFloat16, SyncMode::kFlagBarrier), 1);  // the flag kernel: one block
  // Only as many clusters as are resident at once; then smaller ones.
  Topology few = t;
  few.row_clusters[4] = 2;
  EXPECT_EQ(rowBlocks(few, 3, 4096), 2);
  few.row_clusters[2] = 2;
  EXPECT_EQ(rowBlocks(few, 3, 4096), 1);
  Topology narrow = t;
  narrow.max_blocks = 8;
  EXPECT_EQ(rowBlocks(narrow, 3, 4096), 2);  // 12 blocks would not fit
  // Unmeasured topologies keep one block per row.
  Topology blackwell = t;
  blackwell.cc_major = 10;
  EXPECT_EQ(rowBlocks(blackwell, 1, 4096), 1);
  Topology three = t;
  three.world = 3;
  EXPECT_EQ(rowBlocks(three, 1, 4096), 1);
  Topology unknown = h200Pair();  // no clusters known
  EXPECT_EQ(rowBlocks(unknown, 1, 4096), 1);
}

TEST(Plan, ForcedSyncAndStrategyAreHonoured) {
  const Plan p = planFor(h200Pair(), Shape{4096, 8192}, Strategy::kTwoShot, SyncMode::kFlagBarrier);
  EXPECT_EQ(p.strategy, Strategy::kTwoShot);
  EXPECT_EQ(p.sync_mode, SyncMode::kFlagBarrier);
  // Auto's token floor does not touch a forced two-shot.
  EXPECT_EQ(planFor(h200Pair(), Shape{128, 16384}, Strategy::kTwoShot, SyncMode::kAuto).strategy, Strategy::kTwoShot);
}

TEST(Plan, NeverTwoShotWithFewerThanTwoRowsPerRank) {
  Topology t = h200Pair();
  t.world = 8;
  for (int64_t tokens : {1, 2, 7, 15}) {
    const Plan p = planFor(t, Shape{tokens, 65536});  // large rows push Auto to two-shot by size
    EXPECT_NE(p.strategy, Strategy::kTwoShot) << tokens;
  }
}

TEST(Plan, UnmeasuredArchesAreConservative) {
  for (int major : {10, 12}) {
    Topology t = h200Pair();
    t.cc_major = major;
    EXPECT_EQ(planFor(t, Shape{1, 4096}).strategy, Strategy::kOneShot) << major;
    EXPECT_EQ(planFor(t, Shape{4096, 8192}).strategy, Strategy::kNccl) << major;
  }
  Topology pcie = h200Pair();
  pcie.link = LinkType::kPCIe;
  EXPECT_EQ(planFor(pcie, Shape{1024, 8192}).strategy, Strategy::kNccl);
}

TEST(Plan, RowTooWideForTheWorkspaceFallsBack) {
  Topology t = h200Pair();
  t.region_bytes = 4096;
  EXPECT_EQ(planFor(t, Shape{4, 8192}).strategy, Strategy::kNccl);
  t = h200Pair();  // the one-shot also needs a Lamport region that holds the row
  t.lamport_region_bytes = 4096;
  EXPECT_EQ(planFor(t, Shape{4, 8192}).strategy, Strategy::kNccl);
  t = h200Pair();
  t.region_bytes = 4096;
  Status st;
  planFor(t, Shape{4, 8192}, Strategy::kOneShot, SyncMode::kAuto, &st);
  EXPECT_EQ(st, Status::kNotSupported);
  t.has_nccl = false;
  planFor(t, Shape{4, 8192}, Strategy::kAuto, SyncMode::kAuto, &st);
  EXPECT_EQ(st, Status::kNotSupported);
}

TEST(Plan, WithoutNcclAutoStaysFused) {
  Topology t = h200Pair();
  t.cc_major = 12;  // table says NCCL above 256 KB
  t.has_nccl = false;
  EXPECT_EQ(planFor(t, Shape{4096, 8192}).strategy, Strategy::kOneShot);
}

// Many narrow rows (plan.cpp narrowRowsToNccl): Auto takes the NCCL path above 10 rows per block
// of at most 512 B and above 36 of at most 1 KB, counted on max_blocks; forced strategies and
// groups without NCCL stay fused.
TEST(Plan, ManyNarrowRowsTakeTheNcclPath) {
  auto pick = [](const Topology& t, int64_t tokens, int64_t hidden, DType d = DType::kBFloat16) {
    return planFor(t, Shape{tokens, hidden, d}).strategy;
  };
  const Topology t = h200Pair();
  EXPECT_EQ(pick(t, 1320, 128), Strategy::kOneShot);   // 256 B rows, 10 per block
  EXPECT_EQ(pick(t, 1321, 128), Strategy::kNccl);      // 11 per block
  EXPECT_EQ(pick(t, 2048, 256), Strategy::kNccl);      // 512 B rows, 16 per block
  EXPECT_EQ(pick(t, 2048, 128, DType::kFloat32), Strategy::kNccl);  // 512 B rows of fp32
  EXPECT_EQ(pick(t, 4752, 512), Strategy::kTwoShot);   // 1 KB rows, 36 per block
  EXPECT_EQ(pick(t, 4753, 512), Strategy::kNccl);      // 37 per block
  EXPECT_EQ(pick(t, 32768, 1024), Strategy::kTwoShot); // 2 KB rows: fused at any count
  EXPECT_EQ(pick(t, 64, 64), Strategy::kOneShot);      // few rows
  EXPECT_NE(std::string(planFor(t, Shape{2048, 256}).reason).find("many rows of at most 1 KB"), std::string::npos);
  // Rows per block follow max_blocks (min SM count over ranks, so every rank alike).
  Topology small = t;
  small.max_blocks = 32;
  EXPECT_EQ(pick(small, 352, 256), Strategy::kNccl);  // 11 per block of 512 B
  // Forced strategies run; without NCCL Auto stays fused.
  EXPECT_EQ(planFor(t, Shape{2048, 256}, Strategy::kTwoShot).strategy, Strategy::kTwoShot);
  Topology no_nccl = t;
  no_nccl.has_nccl = false;
  EXPECT_EQ(pick(no_nccl, 2048, 256), Strategy::kTwoShot);  // 1 MiB, 2048 tokens: the table's pick
  EXPECT_EQ(std::string(planFor(no_nccl, Shape{2048, 256}).reason).find("many rows"), std::string::npos);
}

// Call signatures (sync.cuh): equal for equal calls, different when any field that changes what
// the peers send differs, and bit 31 always clear (the Lamport header's words must never be the
// all-ones "not arrived" pattern). Pointers and eps are per-rank and must not matter.
TEST(Signature, DependsOnWhatPeersExchangeAndNeverSetsBit31) {
  RowArgs a = makeRowArgs(Op::kAllReduceAddRMSNorm, nullptr, nullptr, nullptr, nullptr, nullptr, 128, 8192, 1e-6f);
  FusedLaunch l;
  l.blocks = 128;
  l.rows_per_step = 1;
  l.vector = true;
  l.dtype = DType::kBFloat16;
  const uint32_t base = callSignature(a, l, Strategy::kOneShot);
  RowArgs b = a;
  b.input = &b;
  b.eps = 1e-5f;
  EXPECT_EQ(callSignature(b, l, Strategy::kOneShot), base);
  std::vector<uint32_t> sigs = {base};
  RowArgs t = a;
  t.tokens = 129;
  sigs.push_back(callSignature(t, l, Strategy::kOneShot));
  RowArgs h = a;
  h.hidden = 8200;
  sigs.push_back(callSignature(h, l, Strategy::kOneShot));
  RowArgs o = a;
  o.op = Op::kAllReduceAdd;
  sigs.push_back(callSignature(o, l, Strategy::kOneShot));
  auto with = [&](auto change) {
    FusedLaunch m = l;
    change(m);
    return callSignature(a, m, Strategy::kOneShot);
  };
  sigs.push_back(with([](FusedLaunch& m) { m.dtype = DType::kFloat16; }));
  sigs.push_back(callSignature(a, l, Strategy::kTwoShot));
  sigs.push_back(with([](FusedLaunch& m) { m.blocks = 64; }));
  sigs.push_back(with([](FusedLaunch& m) { m.rows_per_step = 2; }));
  sigs.push_back(with([](FusedLaunch& m) { m.vector = false; }));
  for (size_t i = 0; i < sigs.size(); ++i)
    for (size_t j = i + 1; j < sigs.size(); ++j) EXPECT_NE(sigs[i], sigs[j]) << i << " vs " << j;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 100000; ++i) {
    RowArgs r = a;
    r.tokens = int64_t(rng() % 100000) + 1;
    r.hidden = int64_t(rng() % 65536) + 1;
    FusedLaunch m;
    m.dtype = static_cast<DType>(rng() % 3);
    m.blocks = int(rng() % 1024);
    m.rows_per_step = int(rng() % 64);
    m.vector = rng() & 1;
    EXPECT_EQ(callSignature(r, m, static_cast<Strategy>(rng() % 3)) >> 31, 0u);
  }
}

TEST(Plan, GeometryCoversEveryRowAndFitsTheRegion) {
  int checked = 0;  // shapes the geometry accepted: the checks below ran on them
  for (int world : {2, 3, 4, 8}) {
    Topology t = h200Pair();
    t.world = world;
    for (Strategy s : {Strategy::kOneShot, Strategy::kTwoShot}) {
      for (int64_t tokens : {1, 2, 3, 17, 129, 1000, 4097, 16384}) {
        for (int64_t hidden : {1024, 2880, 8192}) {
          int blocks = 0, rows = 0;
          std::string why;
          const Shape sh{tokens, hidden, DType::kBFloat16};
          if (!fusedGeometry(t, s, sh, &blocks, &rows, &why)) continue;
          ++checked;
          const int64_t unit = (s == Strategy::kTwoShot ? world : 1) * int64_t(rows);
          const int64_t units = (tokens + unit - 1) / unit;
          EXPECT_GE(rows, 1);
          EXPECT_GE(units * unit, tokens);  // block b takes units b, b + blocks, ...: all of them
          EXPECT_GE(blocks, 1);
          EXPECT_LE(blocks, t.max_blocks);
          EXPECT_LE(blocks, units);
          const int64_t per_r = (s == Strategy::kTwoShot ? 2 : 1) * (world - 1) * int64_t(rowStride(hidden, sh.dtype));
          EXPECT_LE(rows * per_r, int64_t(t.region_bytes));
          if (s == Strategy::kOneShot) {
            EXPECT_LE(rows * per_r + int64_t(kLamportHeaderBytes), int64_t(t.lamport_region_bytes));
          }
        }
      }
    }
  }
  EXPECT_GE(checked, 150) << "of 192 shapes, only " << checked << " had a geometry";
}

// A one-shot step never puts more than 128 KiB into a region, however large the region (it does not
// overlap a block's push with its reduction: fewer, larger steps measured slower); the pipelined
// two-shot takes steps as large as the region allows for rows wider than 16 KB, and about 128 KiB
// per peer and phase for narrower rows (the split steps 3-5 of twoshot.cu). Regions of a 256 MiB
// workspace here (the Lamport area stays 32 MiB).
TEST(Plan, OneShotStepsStaySmallTwoShotStepsGrowWithTheRegion) {
  Topology t = h200Pair();
  t.region_bytes = (size_t(224) << 20) / (132 * 2) / 16 * 16;  // ~890 KB
  t.lamport_region_bytes = (size_t(32) << 20) / (132 * 2) / 16 * 16;
  const Shape sh{8192, 8192, DType::kBFloat16};                 // 16 KB rows
  int blocks = 0, rows = 0;
  ASSERT_TRUE(fusedGeometry(t, Strategy::kOneShot, sh, &blocks, &rows, nullptr));
  EXPECT_LE(int64_t(rows) * 16384, 128 * 1024);
  EXPECT_GE(rows, 7);  // the 64 MiB workspace's steps, where it measured fastest
  const Shape wide{8192, 16384, DType::kBFloat16};  // 32 KB rows: no split, the fewest steps
  ASSERT_TRUE(fusedGeometry(t, Strategy::kTwoShot, wide, &blocks, &rows, nullptr));
  EXPECT_EQ(rows, 11);  // 32 rows per block in 3 steps: a region holds 13 rows of R
  // A row wider than the cap still fuses, one row per step, where a region holds it (16 blocks).
  t.max_blocks = 16;
  t.region_bytes = (size_t(224) << 20) / (16 * 2) / 16 * 16;
  t.lamport_region_bytes = (size_t(32) << 20) / (16 * 2) / 16 * 16;
  ASSERT_TRUE(fusedGeometry(t, Strategy::kOneShot, Shape{4, 131072, DType::kBFloat16}, &blocks, &rows, nullptr));
  EXPECT_EQ(rows, 1);
}

// Two-shot steps of rows up to 16 KB hold about 128 KiB per peer and phase (plan.cpp: the
// measured best once a block's peer-row epilogue overlaps its next step's push), never more rows
// than the block has, and the same rows per step on every rank (a function of the shape).
TEST(Plan, TwoShotStepsOfNarrowRowsHold128KiBPerPeer) {
  Topology t = h200Pair();
  t.region_bytes = (size_t(224) << 20) / (132 * 2) / 16 * 16;
  t.lamport_region_bytes = (size_t(32) << 20) / (132 * 2) / 16 * 16;
  auto rows = [&](int64_t tokens, int64_t hidden, DType d) {
    int blocks = 0, r = 0;
    EXPECT_TRUE(fusedGeometry(t, Strategy::kTwoShot, Shape{tokens, hidden, d}, &blocks, &r, nullptr));
    return r;
  };
  EXPECT_EQ(rows(8192, 8192, DType::kBFloat16), 8);    // 4 steps of 8 rows (was 2 of 16)
  EXPECT_EQ(rows(8192, 4096, DType::kBFloat16), 16);   // 2 steps of 16 (was 1 of 32)
  EXPECT_EQ(rows(2048, 8192, DType::kBFloat16), 8);    // one step, unchanged
  EXPECT_EQ(rows(8192, 4096, DType::kFloat32), 8);     // 16 KB rows
  EXPECT_EQ(rows(8192, 16384, DType::kBFloat16), 11);  // 32 KB rows: only the region caps
  EXPECT_EQ(rows(300, 8192, DType::kBFloat16), 2);     // few rows: what the block has
}

// The kernels index a step's rows in 32 bits (rows * 16-byte vectors, or rows * elements on the
// scalar path, must stay below 2^31): a step never fills more than 1 GiB of a region, however large
// the workspace. Here one block's region is 8 GiB (a 16 GiB workspace, one block).
TEST(Plan, StepsStayBelowOneGiBForThe32BitIndex) {
  Topology t = h200Pair();
  t.max_blocks = 1;
  t.region_bytes = size_t(8) << 30;
  t.lamport_region_bytes = size_t(32) << 20;
  for (DType d : {DType::kBFloat16, DType::kFloat32}) {
    const Shape sh{int64_t(1) << 20, 65536, d};  // 2^20 rows of 128-256 KB
    int blocks = 0, rows = 0;
    ASSERT_TRUE(fusedGeometry(t, Strategy::kTwoShot, sh, &blocks, &rows, nullptr));
    const int64_t step_bytes = int64_t(rows) * 2 * (t.world - 1) * int64_t(rowStride(sh.hidden, d));
    EXPECT_LE(step_bytes, int64_t(1) << 30);
    EXPECT_LT(int64_t(rows) * sh.hidden, int64_t(1) << 31);  // elements: the scalar path's index
    EXPECT_GT(step_bytes, int64_t(1) << 29);                  // and the cap, not something smaller, decided
  }
}

// The Lamport area (one-shot) takes half the workspace, up to 32 MiB per peer; the flag-protocol
// area the rest. Areas do not overlap and stay inside the allocation.
TEST(Workspace, LamportAreaIsCappedTheDataAreaTakesTheRest) {
  for (int world : {1, 2, 3, 8}) {
    const size_t cap = (size_t(32) << 20) * size_t(world > 1 ? world - 1 : 1);
    for (size_t mib : {1, 8, 64, 128, 256, 1024}) {
      const size_t ws = mib << 20;
      const WorkspaceLayout L(ws, world);
      EXPECT_EQ(L.lamport_bytes, std::min<size_t>(ws / 2, cap)) << mib << " MiB, world " << world;
      EXPECT_EQ(L.dataOffset(), WorkspaceLayout::kLamportOffset + L.lamport_bytes);
      EXPECT_EQ(L.dataOffset() + L.dataBytes(), L.total());
      EXPECT_EQ(L.dataOffset() % 4096, 0u);
      for (int blocks : {8, 132}) {
        EXPECT_LE(size_t(blocks) * kSlots * L.lamportRegionBytes(blocks), L.lamport_bytes);
        EXPECT_LE(size_t(blocks) * kSlots * L.regionBytes(blocks), L.dataBytes());
        EXPECT_EQ(L.regionBytes(blocks) % 16, 0u);
        EXPECT_EQ(L.lamportRegionBytes(blocks) % 16, 0u);
      }
    }
  }
  // 2 ranks: 64 MiB splits in half; 256 MiB keeps a 32 MiB Lamport area, the rest is the data area.
  EXPECT_EQ(WorkspaceLayout(size_t(64) << 20, 2).regionBytes(132), WorkspaceLayout(size_t(64) << 20, 2).lamportRegionBytes(132));
  EXPECT_GT(WorkspaceLayout(size_t(256) << 20, 2).regionBytes(132), 6 * WorkspaceLayout(size_t(256) << 20, 2).lamportRegionBytes(132));
  // 8 ranks with the default 256 MiB: a one-shot step of one 16384-wide fp32 row (7 peers x 64 KiB)
  // still fits a Lamport region, as it did before the cap.
  EXPECT_GE(WorkspaceLayout(size_t(256) << 20, 8).lamportRegionBytes(132), size_t(7) * 65536);
}

TEST(Plan, IsAPureFunctionOfItsInputs) {
  const Topology t = h200Pair();
  for (int64_t tokens : {1, 3, 300, 8192}) {
    const Plan a = planFor(t, Shape{tokens, 4096}), b = planFor(t, Shape{tokens, 4096});
    EXPECT_EQ(a.strategy, b.strategy);
    EXPECT_EQ(a.blocks, b.blocks);
    EXPECT_EQ(a.rows_per_step, b.rows_per_step);
    EXPECT_STREQ(a.reason, b.reason);
  }
}

TEST(Plan, ReasonKeepsTheSyncOutcomeBehindALongTuningFilePath) {
  const Topology t = h200Pair();
  AutoTable table = builtinTable(t);
  table.source = "/" + std::string(300, 'd') + "/tuning-h200.txt";
  PlanInputs in;
  in.topo = t;
  in.sync_auto = SyncMode::kFlagBarrier;
  in.sync_auto_reason = "self-check: GridDependency gave wrong results (3 rounds), using flag barrier";
  in.table = &table;
  for (int64_t tokens : {1, 300}) {
    Plan p;
    ASSERT_EQ(makePlan(in, Shape{tokens, 4096}, &p), Status::kSuccess) << lastError();
    const std::string reason = p.reason;
    EXPECT_LT(reason.size(), sizeof p.reason);
    EXPECT_NE(reason.find("tuning-h200.txt"), std::string::npos) << reason;
    EXPECT_NE(reason.find("using flag barrier"), std::string::npos) << reason;
  }
  // Whatever is still too long is cut with a visible mark, never silently.
  in.sync_auto_reason = std::string(400, 'x');
  Plan p;
  ASSERT_EQ(makePlan(in, Shape{1, 4096}, &p), Status::kSuccess) << lastError();
  const std::string reason = p.reason;
  EXPECT_EQ(reason.size(), sizeof p.reason - 1);
  EXPECT_EQ(reason.substr(reason.size() - 3), "...");
}

// The creation-time speed check's table (selfcheck.cpp measures, speedCheckTable decides).
TEST(Plan, SpeedCheckTableTakesTheOneShotOnlyWhereItWasFaster) {
  Topology t = h200Pair();
  t.world = 8;
  t.link = LinkType::kPCIe;
  t.cc_major = 12;
  const WorkspaceLayout layout(size_t(256) << 20, 8);
  t.region_bytes = layout.regionBytes(132);
  t.lamport_region_bytes = layout.lamportRegionBytes(132);
  EXPECT_FALSE(builtinTable(t).measured);
  EXPECT_TRUE(builtinTable(h200Pair()).measured);
  auto sizes = [](std::vector<std::pair<double, double>> us) {  // (one-shot, NCCL) at 8, 32, 128, 512 KiB
    std::vector<SizeTiming> v;
    int64_t tokens = 1;
    for (auto [fused, nccl] : us) {
      SizeTiming m;
      m.tokens = tokens;
      m.bytes = tokens * 8192;
      m.us_oneshot = fused;
      m.us_nccl = nccl;
      m.us_twoshot = 1.0;  // never considered: the check times the one-shot only
      v.push_back(m);
      tokens *= 4;
    }
    return v;
  };
  auto strategyAt = [&](const AutoTable& table, int64_t tokens) {
    PlanInputs in;
    in.topo = t;
    in.sync_auto = SyncMode::kFlagBarrier;
    in.sync_auto_reason = "test";
    in.table = &table;
    Plan p;
    EXPECT_EQ(makePlan(in, Shape{tokens, 4096}, &p), Status::kSuccess) << lastError();
    EXPECT_NE(std::string(p.reason).find("speed check"), std::string::npos) << p.reason;
    return p.strategy;
  };
  // Faster everywhere: the one-shot up to 512 KiB, the NCCL path above.
  AutoTable a = speedCheckTable(sizes({{5, 20}, {6, 22}, {9, 25}, {20, 40}}));
  EXPECT_TRUE(a.measured);
  EXPECT_EQ(a.source, "speed check at creation");
  ASSERT_EQ(a.checked.size(), 4u);
  EXPECT_EQ(strategyAt(a, 1), Strategy::kOneShot);
  EXPECT_EQ(strategyAt(a, 64), Strategy::kOneShot);
  EXPECT_EQ(strategyAt(a, 65), Strategy::kNccl);
  EXPECT_EQ(strategyAt(a, 4096), Strategy::kNccl);
  // Slower from 128 KiB, and within the 3% margin at 32 KiB: the one-shot at 8 KiB only.
  AutoTable b = speedCheckTable(sizes({{5, 20}, {21.8, 22}, {30, 25}, {60, 40}}));
  EXPECT_EQ(strategyAt(b, 1), Strategy::kOneShot);
  EXPECT_EQ(strategyAt(b, 2), Strategy::kNccl);
  EXPECT_EQ(strategyAt(b, 16), Strategy::kNccl);
  EXPECT_EQ(strategyAt(b, 64), Strategy::kNccl);
  // Slower everywhere (the SM120 incident's shape of failure), or unable to run: the NCCL path.
  AutoTable c = speedCheckTable(sizes({{50, 20}, {60, 22}, {std::nan(""), 25}, {200, 40}}));
  ASSERT_EQ(c.rules.size(), 1u);
  EXPECT_EQ(c.rules[0].strategy, Strategy::kNccl);
  EXPECT_EQ(strategyAt(c, 1), Strategy::kNccl);
  // Its reason keeps every timing and the self-check's outcome within Plan::reason, also with
  // three-digit timings and the longest arch policy text.
  t.cc_major = 10;
  PlanInputs in;
  in.topo = t;
  in.sync_auto = SyncMode::kGridDependency;
  in.sync_auto_reason = std::string(archPolicy(10, 0).why) + "; self-check passed (griddep 123.45 us, flag 234.56 us per call)";
  AutoTable d = speedCheckTable(sizes({{105.5, 120.5}, {110.5, 130.5}, {150.5, 160.5}, {300.5, 400.5}}));
  in.table = &d;
  Plan p;
  ASSERT_EQ(makePlan(in, Shape{1, 4096}, &p), Status::kSuccess) << lastError();
  std::string reason = p.reason;
  for (const char* part : {"speed check", "(8 KiB: one-shot 105.5 us, NCCL 120.5 us)", "self-check passed (griddep 123.45 us, flag 234.56 us per call)"})
    EXPECT_NE(reason.find(part), std::string::npos) << part << " missing: " << reason;
  // Each size quotes the timing that decided it; above the largest size checked, the NCCL path.
  ASSERT_EQ(makePlan(in, Shape{40, 4096}, &p), Status::kSuccess) << lastError();
  reason = p.reason;
  EXPECT_NE(reason.find("(512 KiB: one-shot 300.5 us, NCCL 400.5 us)"), std::string::npos) << reason;
  ASSERT_EQ(makePlan(in, Shape{65, 4096}, &p), Status::kSuccess) << lastError();
  reason = p.reason;
  EXPECT_EQ(p.strategy, Strategy::kNccl);
  EXPECT_NE(reason.find("(above the 512 KiB checked)"), std::string::npos) << reason;
}

// ---------------------------------------------------------------- tuning files
TEST(Tuning, RoundTrip) {
  const Topology t = h200Pair();
  AutoTable table;
  table.rules = {{1 << 20, Strategy::kOneShot}, {64 << 20, Strategy::kTwoShot}, {INT64_MAX, Strategy::kNccl}};
  AutoTable back;
  ASSERT_EQ(parseTuning(formatTuning(t, table), "mem", t, &back), Status::kSuccess) << lastError();
  ASSERT_EQ(back.rules.size(), 3u);
  EXPECT_EQ(back.rules[1].max_bytes, 64 << 20);
  EXPECT_EQ(back.rules[2].strategy, Strategy::kNccl);
  EXPECT_EQ(back.twoshot_min_tokens, 0);
  table.twoshot_min_tokens = 160;
  ASSERT_EQ(parseTuning(formatTuning(t, table), "mem", t, &back), Status::kSuccess) << lastError();
  EXPECT_EQ(back.twoshot_min_tokens, 160);
}

TEST(Tuning, RejectsCorruptOrMismatchedFiles) {
  const Topology t = h200Pair();
  const std::string head = "arfusion-tuning 1\narch 9.0\nlink nvlink\nworld 2\n";
  const std::pair<std::string, std::string> cases[] = {
      {"", "empty"},
      {"hello\n", "first line"},
      {"arfusion-tuning 2\n", "version"},
      {"arfusion-tuning 1\narch 12.0\nlink nvlink\nworld 2\nrule max oneshot\n", "arch"},
      {"arfusion-tuning 1\narch 9.0\nlink pcie\nworld 2\nrule max oneshot\n", "link"},
      {"arfusion-tuning 1\narch 9.0\nlink nvlink\nworld 4\nrule max oneshot\n", "world"},
      {head + "rule 100 fastest\nrule max nccl\n", "strategy"},
      {head + "rule 100 oneshot\nrule 50 nccl\nrule max nccl\n", "increasing"},
      {head + "rule 100 oneshot\n", "last rule"},
      {head + "rule -5 oneshot\nrule max nccl\n", "positive"},
      {head + "bogus 1\n", "unknown key"},
      {head + "twoshot-min-tokens -1\nrule max nccl\n", "twoshot-min-tokens"},
      {head + "twoshot-min-tokens many\nrule max nccl\n", "twoshot-min-tokens"},
  };
  for (const auto& c : cases) {
    AutoTable out;
    EXPECT_EQ(parseTuning(c.first, "f", t, &out), Status::kInvalidArgument) << c.second;
    EXPECT_NE(std::string(lastError()).find(c.second), std::string::npos) << c.second << " vs " << lastError();
  }
}

// ---------------------------------------------------------------- arch policy, names
TEST(Arch, PolicyPerArch) {
  EXPECT_EQ(archPolicy(9, 0).default_sync, SyncMode::kGridDependency);
  EXPECT_EQ(archPolicy(10, 0).default_sync, SyncMode::kGridDependency);
  EXPECT_EQ(archPolicy(12, 0).default_sync, SyncMode::kFlagBarrier);
  EXPECT_EQ(archPolicy(12, 1).default_sync, SyncMode::kFlagBarrier);
  EXPECT_EQ(archPolicy(8, 9).default_sync, SyncMode::kFlagBarrier);
  EXPECT_EQ(archPolicyMixed().default_sync, SyncMode::kFlagBarrier);
}

TEST(Names, StatusAndEnums) {
  EXPECT_STREQ(statusString(Status::kTimeout), "kTimeout");
  EXPECT_STREQ(statusString(static_cast<Status>(99)), "kUnknownStatus");
  EXPECT_STREQ(toString(Strategy::kTwoShot), "twoshot");
  EXPECT_STREQ(toString(SyncMode::kGridDependency), "griddep");
  Strategy s;
  EXPECT_TRUE(parseStrategy(toString(Strategy::kOneShot), &s));
  EXPECT_EQ(s, Strategy::kOneShot);
}

TEST(Api, NullCommunicatorIsAnErrorNotACrash) {
  EXPECT_EQ(allReduceAddRMSNorm(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 1, 1, DType::kBFloat16, 0.f, nullptr),
            Status::kInvalidArgument);
  EXPECT_NE(std::string(lastError()).find("null"), std::string::npos);
  Plan p;
  EXPECT_EQ(plan(nullptr, Shape{}, &p), Status::kInvalidArgument);
  EXPECT_EQ(commDestroy(nullptr), Status::kInvalidArgument);
  EXPECT_EQ(commCreate(nullptr, Config{}, nullptr), Status::kInvalidArgument);
}

// ---------------------------------------------------------------- randomized validation
// 200,000 random argument sets (pointers from a small address pool so that overlaps are common,
// extreme sizes, bad enums, NaN eps): validateArgs never crashes, and whenever it accepts, the
// invariants the kernels rely on hold. A rejected call must say why.
TEST(Validate, RandomizedArgumentsNeverBreakTheInvariants) {
  std::mt19937_64 rng(20261129);
  auto pick = [&](std::initializer_list<int64_t> v) { return *(v.begin() + rng() % v.size()); };
  int64_t accepted = 0;
  for (int it = 0; it < 200000; ++it) {
    RowArgs a;
    auto ptr = [&]() -> void* {
      if (rng() % 16 == 0) return nullptr;
      return reinterpret_cast<void*>(uintptr_t(0x10000000) + (rng() % 64) * 4096 + (rng() % 4) * 2);
    };
    a.input = ptr();
    a.residual_in = ptr();
    a.residual_out = rng() % 4 == 0 ? const_cast<void*>(a.residual_in) : ptr();
    a.gamma = ptr();
    a.out = rng() % 8 == 0 ? const_cast<void*>(a.input) : ptr();
    a.tokens = pick({-1, 0, 1, 2, 3, 17, 1000, int64_t(1) << 40, INT64_MAX});
    a.hidden = pick({-5, 0, 1, 7, 64, 4096, 65536, 65537, INT64_MAX});
    a.eps = static_cast<float>(pick({-1, 0, 1})) * 1e-6f;
    if (rng() % 50 == 0) a.eps = NAN;
    a.op = static_cast<Op>(rng() % 4);
    const DType d = static_cast<DType>(rng() % 4);
    const Status st = validateArgs(a, d);
    if (st != Status::kSuccess) {
      ASSERT_EQ(st, Status::kInvalidArgument);
      ASSERT_GT(std::strlen(lastError()), 0u);
      continue;
    }
    ++accepted;
    ASSERT_LE(static_cast<unsigned>(d), 2u);
    ASSERT_LE(static_cast<unsigned>(a.op), 2u);
    ASSERT_GE(a.tokens, 1);
    ASSERT_GE(a.hidden, 1);
    ASSERT_LE(a.hidden, kMaxHidden);
    ASSERT_LE(a.tokens * a.hidden, int64_t(1) << 40);
    ASSERT_NE(a.input, nullptr);
    ASSERT_EQ(reinterpret_cast<uintptr_t>(a.input) % elemSize(d), 0u);
    const uintptr_t bytes = uintptr_t(a.tokens * a.hidden) * elemSize(d);
    auto disjointOrSame = [&](const void* x, const void* y) {
      const auto p = reinterpret_cast<uintptr_t>(x), q = reinterpret_cast<uintptr_t>(y);
      return p == q || p + bytes <= q || q + bytes <= p;
    };
    if (a.op == Op::kAllReduce) {
      ASSERT_NE(a.out, nullptr);
      ASSERT_TRUE(disjointOrSame(a.input, a.out));
    } else {
      ASSERT_NE(a.residual_in, nullptr);
      ASSERT_NE(a.residual_out, nullptr);
      ASSERT_TRUE(disjointOrSame(a.residual_in, a.residual_out));
      ASSERT_TRUE(disjointOrSame(a.input, a.residual_out));
      ASSERT_NE(a.input, a.residual_out);
      if (a.op == Op::kAllReduceAddRMSNorm) {
        ASSERT_NE(a.out, nullptr);
        ASSERT_NE(a.gamma, nullptr);
        ASSERT_TRUE(a.eps >= 0.f);
        for (const void* x : std::initializer_list<const void*>{a.input, a.residual_in, a.residual_out}) {
          ASSERT_TRUE(disjointOrSame(x, a.out));
          ASSERT_NE(x, a.out);
        }
      }
    }
  }
  EXPECT_GT(accepted, 100);  // the generator does reach the accepting side
}

// ---------------------------------------------------------------- tuning from measurements
TEST(Tuning, TableFromMeasurementsPicksWinnersWithAMargin) {
  // bytes, oneshot, twoshot, nccl (us): numbers shaped like the 2 x H200 sweep.
  std::vector<SizeTiming> m = {
      {16384, 8.8, 12.3, 10.2},     // one-shot by 16%
      {131072, 9.8, 12.9, 10.7},    // one-shot by 9%
      {262144, 12.7, 13.4, 12.9},   // one-shot by 1.6%: inside the 3% margin -> NCCL
      {1048576, 28.6, 14.9, 17.3},  // two-shot
      {4194304, 101.4, 23.4, 36.6}, // two-shot
      {8388608, 209.2, 122.0, 58.7},  // NCCL
  };
  const AutoTable t = tableFromMeasurements(m, 0.03, "test");
  ASSERT_EQ(t.rules.size(), 4u);
  EXPECT_EQ(t.rules[0].max_bytes, 131072);
  EXPECT_EQ(t.rules[0].strategy, Strategy::kOneShot);
  EXPECT_EQ(t.rules[1].max_bytes, 262144);
  EXPECT_EQ(t.rules[1].strategy, Strategy::kNccl);
  EXPECT_EQ(t.rules[2].max_bytes, 4194304);
  EXPECT_EQ(t.rules[2].strategy, Strategy::kTwoShot);
  EXPECT_EQ(t.rules[3].max_bytes, INT64_MAX);
  EXPECT_EQ(t.rules[3].strategy, Strategy::kNccl);
  // And it survives the file round trip.
  AutoTable back;
  ASSERT_EQ(parseTuning(formatTuning(h200Pair(), t), "f", h200Pair(), &back), Status::kSuccess) << lastError();
  EXPECT_EQ(back.rules.size(), t.rules.size());
}

// The two-shot's token floor from a sweep: 2 x H200 bf16, session 12 call 4 (us, one-shot /
// two-shot per token count; benchmarks/results/2026-11-30-h200x2-v12/call4/sweep).
TEST(Tuning, TokenFloorFromMeasuredSweeps) {
  auto sweep = [](int64_t row_bytes, std::vector<std::array<double, 3>> v) {
    std::vector<SizeTiming> m;
    for (const auto& x : v) m.push_back({int64_t(x[0]) * row_bytes, x[1], x[2], 100.0, int64_t(x[0])});
    return m;
  };
  const auto h8192 = sweep(16384, {{16, 6.5, 10.6}, {32, 7.7, 10.8}, {64, 10.0, 12.8}, {91, 11.1, 13.6},
                                   {128, 12.9, 14.5}, {181, 17.1, 16.5}, {256, 20.1, 19.6}, {362, 28.6, 26.1},
                                   {512, 40.4, 34.5}, {1024, 81.1, 70.0}, {2048, 163.2, 126.2}});
  EXPECT_EQ(twoShotTokenFloor(h8192), 181);
  const auto h16384 = sweep(32768, {{8, 10.9, 22.5}, {32, 11.0, 23.0}, {64, 16.3, 27.1}, {128, 21.3, 31.8},
                                    {181, 32.5, 35.2}, {256, 40.2, 43.6}, {362, 63.0, 54.6}, {512, 78.8, 70.3},
                                    {1024, 164.3, 127.8}});
  EXPECT_EQ(twoShotTokenFloor(h16384), 362);
  // The two-shot everywhere: no floor; the one-shot everywhere: past the largest measured count.
  EXPECT_EQ(twoShotTokenFloor(sweep(16384, {{4, 9, 8}, {64, 12, 11}})), 0);
  EXPECT_EQ(twoShotTokenFloor(sweep(16384, {{4, 8, 9}, {64, 11, 12}})), 65);
  // What did not run, or has no token count, does not count.
  const double nan = std::nan("");
  EXPECT_EQ(twoShotTokenFloor({{8192, 5, nan, 9, 4}, {65536, 5, 9, 9, 0}}), 0);
  EXPECT_EQ(twoShotTokenFloor(sweep(16384, {{4, 8, nan}, {64, 11, 12}, {128, 15, 13}})), 128);
}

TEST(Tuning, TableFromMeasurementsNeverTrustsWhatDidNotRun) {
  const double nan = std::nan("");
  std::vector<SizeTiming> m = {{8192, nan, nan, 9.0}, {65536, 5.0, nan, 9.0}, {1 << 20, nan, nan, nan}};
  const AutoTable t = tableFromMeasurements(m, 0.03, "test");
  ASSERT_EQ(t.rules.size(), 3u);
  EXPECT_EQ(t.rules[0].strategy, Strategy::kNccl);
  EXPECT_EQ(t.rules[1].strategy, Strategy::kOneShot);
  EXPECT_EQ(t.rules[1].max_bytes, 65536);
  EXPECT_EQ(t.rules.back().strategy, Strategy::kNccl);  // nothing measured above: NCCL
  // Sizes come in any order.
  std::vector<SizeTiming> shuffled = {{4 << 20, 90, 20, 40}, {8192, 5, 9, 9}};
  const AutoTable u = tableFromMeasurements(shuffled, 0.03, "test");
  ASSERT_EQ(u.rules.size(), 3u);
  EXPECT_EQ(u.rules[0].strategy, Strategy::kOneShot);
  EXPECT_EQ(u.rules[1].strategy, Strategy::kTwoShot);
}

// The self-check fault hook's argument checks (no GPU needed; its effect is tested in test_gpu.cpp,
// SelfCheck.*).
TEST(SelfCheckApi, RejectsBadRanksAndFaults) {
  using arfusion::testing::SelfCheckFault;
  EXPECT_EQ(arfusion::testing::setSelfCheckFault(8, SelfCheckFault::kSlow), Status::kInvalidArgument);
  EXPECT_NE(std::string(arfusion::lastError()).find("outside"), std::string::npos);
  EXPECT_EQ(arfusion::testing::setSelfCheckFault(-2, SelfCheckFault::kSlow), Status::kInvalidArgument);
  EXPECT_EQ(arfusion::testing::setSelfCheckFault(0, static_cast<SelfCheckFault>(7)), Status::kInvalidArgument);
  EXPECT_NE(std::string(arfusion::lastError()).find("unknown fault"), std::string::npos);
  EXPECT_EQ(arfusion::testing::setSelfCheckFault(-1, SelfCheckFault::kNone), Status::kSuccess);
  using arfusion::testing::SpeedCheckFault;
  EXPECT_EQ(arfusion::testing::setSpeedCheckFault(8, SpeedCheckFault::kRun), Status::kInvalidArgument);
  EXPECT_NE(std::string(arfusion::lastError()).find("outside"), std::string::npos);
  EXPECT_EQ(arfusion::testing::setSpeedCheckFault(0, static_cast<SpeedCheckFault>(3)), Status::kInvalidArgument);
  EXPECT_NE(std::string(arfusion::lastError()).find("unknown fault"), std::string::npos);
  EXPECT_EQ(arfusion::testing::setSpeedCheckFault(-1, SpeedCheckFault::kNone), Status::kSuccess);
}
