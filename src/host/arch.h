// The arch policy: which sync mode each GPU architecture gets by default, and why.
// This is the only place that knows about compute capabilities (src/host/arch.cpp).
#pragma once

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

}  // namespace arfusion::detail
