// CPU tests: tuning files and Auto tables from measurements.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>

#include "arfusion/arfusion.h"
#include "cpu_helpers.h"
#include "host/tuning_file.h"

using namespace arfusion;
using namespace arfusion::detail;
using namespace cputest;

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

// The two-shot's token floor from a measured sweep: 2 x H200 NVLink, bf16 (us, one-shot / two-shot
// per token count).
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
