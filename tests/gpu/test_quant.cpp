// GPU tests: the quantized outputs and the other NormArgs options (no residual, Gemma weights,
// outputs left out) on every path: the conversions as compiled for the device, the single-GPU
// add-RMSNorm-quant kernel, local groups of 2-8 ranks, two ranks over NCCL.
#include "gpu_tests.h"

using namespace gputest;
using arfusion::QuantFormat;
using arfusion::ScaleLayout;

// The library's E4M3 and E2M1 conversions as the device runs them, against the nearest-code
// reference, on every bf16 and fp16 value, every tie and its neighbours, and 2^24 random fp32 bits.
TEST(Quant, DeviceConversionsMatchTheReference) {
  if (gpuCount() < 1) GTEST_SKIP() << "needs a GPU";
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  const std::vector<float> x = conversionSample(size_t(1) << 24, 7);
  float* din = nullptr;
  uint8_t *d4 = nullptr, *d2 = nullptr;
  ASSERT_EQ(cudaMalloc(&din, x.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d4, x.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d2, x.size()), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(din, x.data(), x.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(convertOnDevice(din, d4, d2, x.size(), nullptr), cudaSuccess);
  std::vector<uint8_t> e4(x.size()), e2(x.size());
  ASSERT_EQ(cudaMemcpy(e4.data(), d4, x.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(e2.data(), d2, x.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  int64_t bad = 0;
  for (size_t i = 0; i < x.size(); ++i)
    if ((e4[i] != e4m3Nearest(x[i]) || e2[i] != e2m1Nearest(x[i])) && bad++ < 5)
      ADD_FAILURE() << x[i] << ": device e4m3 " << int(e4[i]) << " e2m1 " << int(e2[i]) << ", reference " << int(e4m3Nearest(x[i]))
                    << " " << int(e2m1Nearest(x[i]));
  EXPECT_EQ(bad, 0) << "of " << x.size();
  for (void* p : {static_cast<void*>(din), static_cast<void*>(d4), static_cast<void*>(d2)}) cudaFree(p);
}

// The single-GPU add-RMSNorm-quant kernel (the NCCL path's epilogue): every format and layout,
// three dtypes, rows of one, two and four vectors per thread, token counts around the layouts'
// padding (4, 128), NVFP4 rows whose last swizzled column tile is part padding (2064 = 129
// blocks); the other options alone and together; each also in place (checkAddRMSNormQuant); and
// bf16 calls of many rows, which take kernels of their own (rmsnorm.cu, kManyRows).
TEST(Quant, SingleGpuKernelEveryFormatLayoutAndOption) {
  if (gpuCount() < 1) GTEST_SKIP() << "needs a GPU";
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  uint64_t seed = 300;
  for (const QuantCase& q : everyQuantCase())
    for (DType d : {DType::kBFloat16, DType::kFloat16, DType::kFloat32})
      for (int64_t t : {1, 5, 130})
        for (int64_t h : {1024, 2064, 7168, 16384}) {
          if (d == DType::kFloat32 && h > 8192) continue;
          if (h % 128 != 0 && q.format == arfusion::QuantFormat::kFp8PerGroup) continue;  // whole groups only
          const QuantShapeCase c{d, t, h, seed++, q, seed % 3 == 0, seed % 5 == 0};
          EXPECT_EQ(checkAddRMSNormQuant(c), "") << toString(q.format) << "/" << toString(q.layout) << " " << arfusion::toString(d)
                                                 << " " << t << " x " << h;
        }
  for (bool gemma : {false, true})
    for (bool no_residual : {false, true})
      EXPECT_EQ(checkAddRMSNormQuant(QuantShapeCase{DType::kBFloat16, 9, 4096, seed++, QuantCase{}, gemma, no_residual}), "")
          << "gemma " << gemma << ", no residual " << no_residual;
  for (const QuantCase& q : everyQuantCase())
    for (int64_t h : {2048, 7168}) {
      const QuantShapeCase c{DType::kBFloat16, 2100, h, seed++, q, h == 2048, seed % 3 == 0};
      EXPECT_EQ(checkAddRMSNormQuant(c), "") << toString(q.format) << "/" << toString(q.layout) << " 2100 x " << h;
    }
  EXPECT_EQ(checkAddRMSNormQuant(QuantShapeCase{DType::kBFloat16, 2100, 8192, seed++, QuantCase{}, true, true}), "") << "gemma, 2100 rows";
}

// For compute-sanitizer (tests/CMakeLists.txt): every format and layout once per vectors-per-thread
// variant, small enough to run instrumented.
TEST(Quant, SanitizeSmallShapes) {
  if (gpuCount() < 1) GTEST_SKIP() << "needs a GPU";
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  uint64_t seed = 900;
  for (const QuantCase& q : everyQuantCase())
    for (int64_t h : {1024, 7168, 16384}) {
      const QuantShapeCase c{DType::kBFloat16, 3, h, seed++, q, h == 7168, h == 1024};
      EXPECT_EQ(checkAddRMSNormQuant(c), "") << toString(q.format) << "/" << toString(q.layout) << " 3 x " << h;
    }
  for (int i : {1, 7})  // the kernels for many rows (rmsnorm.cu, kManyRows)
    EXPECT_EQ(checkAddRMSNormQuant(QuantShapeCase{DType::kBFloat16, 2100, 1024, seed++, everyQuantCase()[i]}), "") << i << ", 2100 rows";
}

namespace {
Scenario quantScenario(std::vector<QuantShapeCase> cases) {
  return [cases](RankCtx& ctx) -> std::string {
    for (const QuantShapeCase& c : cases)
      if (std::string e = scenarioQuant(ctx, c); !e.empty()) return e;
    return "";
  };
}
std::vector<QuantShapeCase> groupQuantCases() {
  std::vector<QuantShapeCase> v;
  uint64_t seed = 400;
  for (const QuantCase& q : everyQuantCase()) {
    v.push_back({DType::kBFloat16, 3, 4096, seed++, q});
    v.push_back({DType::kFloat32, 17, 1024, seed++, q, true});
  }
  v.push_back({DType::kFloat16, 129, 2048, seed++, everyQuantCase()[2], false, true});
  v.push_back({DType::kBFloat16, 5, 8192, seed++, QuantCase{}, true, true});  // options without a quantized output
  v.push_back({DType::kBFloat16, 2, 2064, seed++, everyQuantCase().back()});  // NVFP4 swizzled, a part-padding column tile
  // Rows of two and four vectors per thread with a quantized output (at two ranks the two-shot's
  // kernels per format at two, its kernel for every format at four), which the rows above leave out.
  for (int i : {0, 1, 2, 6}) v.push_back({DType::kBFloat16, 2, 8192, seed++, everyQuantCase()[i]});
  for (int i : {5, 7}) v.push_back({DType::kFloat16, 3, 6144, seed++, everyQuantCase()[i], i == 5});
  for (int i : {1, 7}) v.push_back({DType::kBFloat16, 2, 16384, seed++, everyQuantCase()[i]});
  return v;
}
}  // namespace

// Every path of a local group (2-8 ranks, one GPU): the quantized bytes equal the recipe on every
// rank and every path.
TEST_P(LocalGroup, QuantizedOutputsAndNormOptions) {
  std::string skip;
  const std::string err = runLocalGroup(GetParam(), testConfig(), 16, quantScenario(groupQuantCases()), &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(err, "");
}

// The two-shot with several steps per block (its split epilogue, RowEpilogue::runOnHalf) and the
// one-shot with several rows per step, quantized.
TEST(LocalGroupQuant, SeveralStepsPerBlock) {
  std::string skip;
  const std::string err = runLocalGroup(2, testConfig(), 16,
                                        quantScenario({{DType::kBFloat16, 4200, 1024, 501, everyQuantCase()[4]},
                                                       {DType::kFloat16, 4200, 1024, 502, everyQuantCase()[7], true},
                                                       {DType::kBFloat16, 2100, 2048, 503, everyQuantCase()[1], false, true}}),
                                        &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(err, "");
}

// Two ranks over NCCL: every fused path bit for bit with the NCCL path (ncclAllReduce, then the
// single-GPU add-RMSNorm-quant kernel).
TEST(ThreadsNccl2, QuantizedOutputsMatchTheNcclPath) {
  std::string skip;
  const std::string err = runThreadsNccl(2, testConfig(), quantScenario(groupQuantCases()), &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(err, "");
}
