// CPU tests: the ARFUSION_* environment variables.
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
#include "host/env.h"

using namespace arfusion;
using namespace arfusion::detail;
using namespace cputest;

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
