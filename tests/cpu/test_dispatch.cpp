// CPU tests: the kernel variants a launch can pick, and the fused launch configuration.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "arfusion/arfusion.h"
#include "cpu_helpers.h"
#include "kernels/dispatch.cuh"

using namespace arfusion;
using namespace arfusion::detail;
using namespace cputest;

// The kernel preload (kernels.h, preloadKernels) walks forEachVariant; a launch picks its kernel
// with dispatchVariant. Every variant a launch can pick must be walked (or it would load lazily,
// the two-communicator deadlock of kernels.h preloadKernels), and nothing else (or dead kernels get built and loaded).
namespace {
using VariantKey = std::tuple<int, int, int, bool, int>;  // dtype, VEC, kVpt, kExt, kFormat
template <typename V>
VariantKey keyOf(V) {
  using T = typename V::type;
  const int dtype = std::is_same_v<T, float> ? 0 : std::is_same_v<T, __half> ? 1 : 2;
  return {dtype, V::vec, V::vpt, V::ext, V::format};
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
      for (bool ext : {false, true})
        for (uint8_t quant = kQuantNone; quant <= kQuantNvfp4; ++quant)
          for (int64_t hidden = 1; hidden <= 40000; hidden += hidden < 9000 ? 1 : 97) {
            if (ext && (!vector || hidden * (d == DType::kFloat32 ? 4 : 2) > 32768)) continue;  // refused before dispatch
            if (quant != kQuantNone && !ext) continue;  // a quantized output is an extended call (validate.cpp)
            arfusion::detail::dispatchVariant(d, vector, hidden, ext, quant, [&](auto v) {
              picked.insert(keyOf(v));
              EXPECT_EQ(decltype(v)::format, int(quant));
              return cudaSuccess;
            });
          }
  EXPECT_EQ(walked, picked);
  // 3 dtypes x (kVpt 1, 2, 4 on the vector path + the scalar path), and the extended epilogue's
  // kVpt 1, 2, 4 on the vector path, without a quantized output and with each of the four formats.
  EXPECT_EQ(walked.size(), 57u);
}

// The fused kernels compile their plain and extended epilogues in separate files: the two halves
// must together walk every variant, each exactly once, and dispatch must refuse the other half's.
TEST(Dispatch, ThePlainAndExtendedHalvesPartitionTheVariants) {
  using arfusion::detail::Epilogues;
  std::set<VariantKey> all, plain, extended;
  auto into = [](std::set<VariantKey>* s) {
    return [s](auto v) {
      s->insert(keyOf(v));
      return cudaSuccess;
    };
  };
  ASSERT_EQ(arfusion::detail::forEachVariant(into(&all)), cudaSuccess);
  ASSERT_EQ(arfusion::detail::forEachVariant<Epilogues::kPlain>(into(&plain)), cudaSuccess);
  ASSERT_EQ(arfusion::detail::forEachVariant<Epilogues::kExtended>(into(&extended)), cudaSuccess);
  for (const VariantKey& k : plain) EXPECT_FALSE(std::get<3>(k));
  for (const VariantKey& k : extended) EXPECT_TRUE(std::get<3>(k));
  std::set<VariantKey> both = plain;
  both.insert(extended.begin(), extended.end());
  EXPECT_EQ(both, all);
  EXPECT_EQ(plain.size() + extended.size(), all.size());
  int called = 0;
  auto count = [&](auto) {
    ++called;
    return cudaSuccess;
  };
  EXPECT_EQ(arfusion::detail::dispatchVariant<Epilogues::kPlain>(DType::kBFloat16, true, 4096, true, kQuantNone, count), cudaErrorInvalidValue);
  EXPECT_EQ(arfusion::detail::dispatchVariant<Epilogues::kExtended>(DType::kBFloat16, true, 4096, false, kQuantNone, count), cudaErrorInvalidValue);
  EXPECT_EQ(called, 0);
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

// Who writes the NVFP4 swizzled layout's padding lines (planPaddingLines): enough blocks for a
// column tile per warp, blocks without a row added where the rows take fewer, only in the launch
// that holds the last row and only where the last tile has lines without a real row; and the
// workers' shares (RowEpilogue::paddingLines) cover every column tile once.
TEST(Dispatch, PaddingLinesGoToEnoughBlocksInTheLastLaunch) {
  using namespace arfusion::detail;
  auto args = [](int64_t tokens, int64_t hidden, uint8_t quant = kQuantNvfp4, uint8_t layout = kLayoutSwizzled128x4) {
    RowArgs a;
    a.ext = true;
    a.quant = quant;
    a.scale_layout = layout;
    a.tokens = a.q_tokens = tokens;
    a.hidden = hidden;
    a.scale_rows = scaleRows(layout, tokens);
    a.scale_cols = roundUp(hidden / kNvfp4BlockSize, 4);
    return a;
  };
  struct Case {
    int64_t tokens, hidden, row_blocks;
    int added, workers;
  };
  for (const Case& c : {Case{1, 4096, 1, 4, 4},      // 64 column tiles: 4 blocks of 16 warps, all added
                        Case{16, 8192, 16, 0, 8},    // 128 tiles: 8 of the 16 row blocks
                        Case{5, 16384, 5, 16, 16},   // 256 tiles: the most, 16
                        Case{130, 1024, 130, 0, 1},  // 16 tiles: one block; 2 real rows in the last tile
                        Case{31, 2048, 31, 0, 2},    // 31 real rows: line 31 is padding whole
                        Case{32, 2048, 32, 0, 0},    // 32 real rows: no line is padding whole
                        Case{200, 4096, 200, 0, 0},  // 72 real rows in the last tile
                        Case{128, 4096, 128, 0, 0},  // no padding row
                        Case{1, 3072, 2, 3, 3},      // 48 tiles: 3 added, though 2 row blocks could share
                        Case{3, 16384, 16, 0, 16}}) {  // as many row blocks as workers: theirs
    RowArgs a = args(c.tokens, c.hidden);
    EXPECT_EQ(planPaddingLines(a, c.row_blocks), c.added) << c.tokens << " x " << c.hidden;
    EXPECT_TRUE(a.padding_by_blocks);
    EXPECT_EQ(a.pad_blocks, c.added);
    EXPECT_EQ(a.pad_workers, c.workers) << c.tokens << " x " << c.hidden;
    // Warp v of worker k takes tiles v * W + k + n * 16 * W: every tile once.
    const int tiles = int(a.scale_cols / 4), warps = kThreads / 32;
    std::vector<int> seen(tiles, 0);
    for (int k = 0; k < a.pad_workers; ++k)
      for (int v = 0; v < warps; ++v)
        for (int w = v * a.pad_workers + k; w < tiles; w += warps * a.pad_workers) ++seen[w];
    if (a.pad_workers > 0) {
      for (int w = 0; w < tiles; ++w) EXPECT_EQ(seen[w], 1) << "tile " << w << " of " << c.tokens << " x " << c.hidden;
    }
  }
  // A chunk of the NCCL path before the last: its rows leave the lines to the last chunk's blocks.
  RowArgs chunk = args(20, 4096);
  chunk.tokens = 12;
  EXPECT_EQ(planPaddingLines(chunk, 12), 0);
  EXPECT_TRUE(chunk.padding_by_blocks);
  EXPECT_EQ(chunk.pad_workers, 0);
  chunk.q_row0 = 8;  // the last chunk: rows 8 .. 19
  EXPECT_EQ(planPaddingLines(chunk, 12), 0);
  EXPECT_EQ(chunk.pad_workers, 4);
  // Other formats and layouts have no such lines.
  RowArgs linear = args(1, 4096, kQuantNvfp4, kLayoutLinear);
  EXPECT_EQ(planPaddingLines(linear, 1), 0);
  EXPECT_EQ(linear.pad_workers, 0);
  RowArgs fp8 = args(1, 4096, kQuantFp8PerGroup, kLayoutColumnMajor);
  EXPECT_EQ(planPaddingLines(fp8, 1), 0);
  EXPECT_EQ(fp8.pad_workers, 0);
}
