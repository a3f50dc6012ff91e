// The arch policy: which sync mode each GPU architecture gets by default, and when a GridDependency
// forced by the user may be used (arch.cpp, the only place that knows about compute capabilities).
#pragma once

#include <string>

#include "arfusion/arfusion.h"

namespace arfusion::detail {

struct ArchPolicy {
  SyncMode default_sync;  // what SyncMode::kAuto means on this arch before the self-check
  bool measured_here;     // an Auto table measured on this arch exists (auto_table.h)
  const char* why;        // one line for plan() and the doctor
};

// Policy for a group whose ranks all have compute capability major.minor. A group of mixed
// capabilities gets archPolicyMixed().
ArchPolicy archPolicy(int major, int minor);
ArchPolicy archPolicyMixed();

// What the creation-time self-check found about GridDependency on this group (the same on every rank).
enum class GridDepCheck { kNotRun, kPassed, kWrongResult, kSlower };

// Whether GridDependency may be used when the user forces it: where the self-check passed, or where
// it did not run but the arch policy picks GridDependency anyway. Refused where the check failed, and
// where it did not run on an arch where GridDependency is not validated (forcing it at creation runs
// the check there). *why says why not.
bool gridDependencyAllowed(const ArchPolicy& policy, GridDepCheck check, std::string* why);

}  // namespace arfusion::detail
