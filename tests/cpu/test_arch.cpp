// CPU tests: the arch policy, enum names, and the test hooks' argument checks.
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
#include "host/arch.h"
#include "host/names.h"
#include "testing/testing.h"

using namespace arfusion;
using namespace arfusion::detail;
using namespace cputest;

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
