// GPU tests: every path, dtype, shape and op against the float64 reference and the NCCL path;
// special values, soaks, streams, two communicators, bad input, the single-GPU kernel.
#include <thread>

#include "gpu_tests.h"

using namespace gputest;

namespace {

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

}  // namespace

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

TEST(ThreadsNccl1, OneRankIsTheLocalAddRMSNorm) {
  std::string skip;
  const std::string err = runThreadsNccl(1, testConfig(), allShapes({{DType::kBFloat16, 17, 4096, 3, true}, {DType::kFloat32, 3, 1000, 4}}), &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(err, "");
}

// ------------------------------------------------------------------ 3..8 ranks, several per GPU

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

INSTANTIATE_TEST_SUITE_P(Ranks, LocalGroup, ::testing::Values(2, 3, 4, 5, 6, 7, 8));

// Rows over thread block clusters (the one-shot's Lamport kernel with 2 or 4 blocks per row),
// planned on the measured two-GPU pair only, forced here where they fit (testing::forceRowBlocks):
// every path of scenarioShape, the one-shot over clusters among them, against the reference. Rows
// of 8-64 KB, so that 2 and 4 blocks leave shares of at least 2 KiB; one and two passes.
TEST(ClusterRows, EveryShapeOnOneGpu) {
  std::string skip;
  for (int row_blocks : {2, 4}) {
    SCOPED_TRACE(std::to_string(row_blocks) + " blocks per row");
    const std::string err = runLocalGroup(2, testConfig(), 16, [row_blocks](RankCtx& ctx) -> std::string {
      if (arfusion::testing::forceRowBlocks(ctx.comm, row_blocks) != Status::kSuccess) return arfusion::lastError();
      int clustered = 0;
      uint64_t seed = 7700 + row_blocks * 10;
      for (const ShapeCase& c : {ShapeCase{DType::kBFloat16, 1, 4096, seed++, true}, ShapeCase{DType::kBFloat16, 3, 8192, seed++},
                                 ShapeCase{DType::kFloat16, 2, 16384, seed++}, ShapeCase{DType::kFloat32, 2, 8192, seed++},
                                 ShapeCase{DType::kFloat32, 1, 16384, seed++}}) {
        if (arfusion::commSetStrategy(ctx.comm, arfusion::Strategy::kOneShot, arfusion::SyncMode::kGridDependency) != Status::kSuccess)
          return arfusion::lastError();
        arfusion::Plan p;
        if (arfusion::plan(ctx.comm, arfusion::Shape{c.tokens, c.hidden, c.dtype}, &p) != Status::kSuccess) return arfusion::lastError();
        clustered += p.row_blocks == row_blocks;
        if (std::string e = scenarioShape(ctx, c); !e.empty()) return e;
      }
      return clustered >= 4 ? "" : "only " + std::to_string(clustered) + " of 5 shapes ran over clusters (occupancy?)";
    }, &skip);
    if (!skip.empty()) GTEST_SKIP() << skip;
    EXPECT_EQ(err, "");
  }
}

// Small and quick: the target of compute-sanitizer runs (the sanitize_* ctest entries).
TEST(Sanitize, SmallShapesTwoRanks) {
  std::string skip;
  const std::string err = runLocalGroup(2, testConfig(), 8,
                                        allShapes({{DType::kBFloat16, 3, 1024, 61, true}, {DType::kFloat32, 17, 2880, 62},
                                                   {DType::kFloat16, 5, 1000, 63, false, true}}),
                                        &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(err, "");
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
