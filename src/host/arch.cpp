// Per-arch dispatch policy.
//
// GridDependency (PDL) is the default only where it has been validated:
//   SM90  (H100/H200): validated on 2 x H200 with this library's tests (README, Results).
//   SM100 (B200/GB200): PDL is the shipping configuration of peer fused-allreduce kernels on this
//         arch; not run here, so the creation-time self-check (selfcheck.cpp) guards it.
// FlagBarrier everywhere else:
//   SM120/SM121 (RTX PRO 6000 / GB10 workstation Blackwell): a peer kernel's PDL path, enabled there
//         by widening an arch gate, ran 8x slower (1,870 -> 236 tok/s on 8 GPUs). Until it is measured
//         on that hardware, arfusion does not launch programmatically there.
//   Anything else (future or unknown arches, mixed groups): not validated, so not PDL.
// A user may still force either mode (Config::sync_mode, ARFUSION_SYNC); forcing GridDependency on
// an arch where it is not the default is logged as a warning.
// Thread block clusters (the one-shot's rows over 2 or 4 blocks) run only with GridDependency on the
// measured SM90 pair (plan.cpp), so SM120, on FlagBarrier, launches none.
#include "arch.h"

namespace arfusion::detail {

ArchPolicy archPolicy(int major, int minor) {
  (void)minor;
  if (major == 9)
    return {SyncMode::kGridDependency, true, "SM90: grid-dependency sync validated on H200"};
  if (major == 10)
    return {SyncMode::kGridDependency, false,
            "SM100: grid-dependency sync (peer-validated, not measured here)"};
  if (major == 12)
    return {SyncMode::kFlagBarrier, false,
            "SM12x: flag barrier (PDL not validated on workstation Blackwell; see README)"};
  return {SyncMode::kFlagBarrier, false, "arch not validated: flag barrier"};
}

ArchPolicy archPolicyMixed() {
  return {SyncMode::kFlagBarrier, false, "ranks on mixed architectures: flag barrier"};
}

}  // namespace arfusion::detail
