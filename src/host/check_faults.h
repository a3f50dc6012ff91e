// What the tests inject into creation (src/testing/testing.h sets it): faults of the creation-time
// checks (no GPU here fails the GridDependency self-check on its own, and the speed check runs only
// where no measured table applies), and the arch policy of another GPU (the SM120 paths, forced on
// the GPUs at hand). Internal to the library (hidden symbols): only the arfusion_testing library,
// linked statically, reaches them.
#pragma once

#include <atomic>

#include "kernels/kernels.h"

namespace arfusion::detail {

// Values of the testing enums (testing::SelfCheckFault, testing::SpeedCheckFault).
enum : int { kSelfCheckNoFault = 0, kSelfCheckWrongResult = 1, kSelfCheckSlow = 2 };
enum : int { kSpeedCheckNoFault = 0, kSpeedCheckRun = 1, kSpeedCheckFusedSlow = 2 };

struct CheckFaults {
  std::atomic<int> self_check[kMaxRanks];   // per rank of the communicators created next
  std::atomic<int> speed_check[kMaxRanks];
  std::atomic<int> arch_policy{0};          // major * 10 + minor whose policy applies; 0: the GPU's own
};
CheckFaults& checkFaults();

// Sets rank `rank`'s fault (every rank for -1) in one of the tables.
void storeFault(std::atomic<int> (&faults)[kMaxRanks], int rank, int value);
// Whether this rank asks for the speed check to run wherever it would not.
bool speedCheckForced(int rank);

}  // namespace arfusion::detail
