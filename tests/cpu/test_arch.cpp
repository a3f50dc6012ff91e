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

// A forced GridDependency runs only where the self-check vouched for it, or where the policy picks
// it anyway; everything else is refused with a reason (arch.cpp gridDependencyAllowed).
TEST(Arch, ForcedGridDependencyOnlyWhereCheckedOrValidated) {
  std::string why;
  for (int major : {9, 10, 12, 8}) {
    const ArchPolicy pol = archPolicy(major, 0);
    const bool policy = pol.default_sync == SyncMode::kGridDependency;
    EXPECT_TRUE(gridDependencyAllowed(pol, GridDepCheck::kPassed, &why)) << major;
    why.clear();
    EXPECT_FALSE(gridDependencyAllowed(pol, GridDepCheck::kWrongResult, &why)) << major;
    EXPECT_NE(why.find("wrong results"), std::string::npos) << why;
    why.clear();
    EXPECT_FALSE(gridDependencyAllowed(pol, GridDepCheck::kSlower, &why)) << major;
    EXPECT_NE(why.find("slower"), std::string::npos) << why;
    why.clear();
    EXPECT_EQ(gridDependencyAllowed(pol, GridDepCheck::kNotRun, &why), policy) << major;
    if (!policy) {
      EXPECT_NE(why.find("self-check did not run"), std::string::npos) << why;
    }
  }
  EXPECT_FALSE(gridDependencyAllowed(archPolicyMixed(), GridDepCheck::kNotRun, &why));
}

TEST(TestingApi, RejectsBadArguments) {
  using namespace arfusion::testing;
  EXPECT_EQ(setArchPolicy(100, 0), Status::kInvalidArgument);
  EXPECT_EQ(setArchPolicy(12, 10), Status::kInvalidArgument);
  EXPECT_EQ(setArchPolicy(0, 0), Status::kSuccess);
  EXPECT_EQ(forceRowBlocks(nullptr, 4), Status::kInvalidArgument);
  EXPECT_EQ(skipClusterPartialSums(nullptr, true), Status::kInvalidArgument);
  EXPECT_NE(std::string(lastError()).find("null"), std::string::npos);
}
