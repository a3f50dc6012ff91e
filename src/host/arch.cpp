// The arch dispatch: which sync mode each GPU architecture gets by default, and why. The only place
// that knows about compute capabilities (docs/design.md, "Sync modes and the arch policy").
//
// GridDependency (PDL) is the default only where it has been validated:
//   SM90  (H100/H200): validated by this library's tests on H200 (one GPU and the NVLink pair).
//   SM100 (B200/GB200): PDL is the shipping configuration of peer fused-allreduce kernels there;
//         not run here, so the creation-time self-check guards it.
// FlagBarrier everywhere else:
//   SM120/SM121 (RTX PRO 6000, GB10 workstation Blackwell): a peer kernel's PDL path, enabled there
//         by widening an arch gate, ran 8x slower (1,870 -> 236 tok/s on 8 GPUs). Until measured
//         on that hardware, arfusion does not launch programmatically there.
//   Anything else (future or unknown arches, mixed groups): not validated, so not PDL.
// Thread block clusters (the one-shot's rows over 2 or 4 blocks) are planned only on the measured
// SM90 pair with GridDependency (auto_table.h), so SM120 launches none.
#include "arch.h"

namespace arfusion::detail {

ArchPolicy archPolicy(int major, int minor) {
  (void)minor;
  if (major == 9) return {SyncMode::kGridDependency, true, "SM90: grid-dependency sync validated on H200"};
  if (major == 10) return {SyncMode::kGridDependency, false, "SM100: grid-dependency sync (peer-validated, not measured here)"};
  if (major == 12)
    return {SyncMode::kFlagBarrier, false, "SM12x: flag barrier (grid-dependency sync not validated on workstation Blackwell)"};
  return {SyncMode::kFlagBarrier, false, "arch not validated: flag barrier"};
}

ArchPolicy archPolicyMixed() { return {SyncMode::kFlagBarrier, false, "ranks on mixed architectures: flag barrier"}; }

}  // namespace arfusion::detail

namespace arfusion::detail {

bool gridDependencyAllowed(const ArchPolicy& pol, GridDepCheck check, std::string* why) {
  switch (check) {
    case GridDepCheck::kPassed: return true;
    case GridDepCheck::kWrongResult:
      *why = "grid-dependency sync gave wrong results in the creation-time self-check";
      return false;
    case GridDepCheck::kSlower:
      *why = "grid-dependency sync was slower than the flag barrier in the creation-time self-check";
      return false;
    case GridDepCheck::kNotRun:
      if (pol.default_sync == SyncMode::kGridDependency) return true;
      *why = std::string(pol.why) + ", and the self-check did not run: force GridDependency at creation "
             "(Config::sync_mode or ARFUSION_SYNC=griddep) to run it";
      return false;
  }
  return false;
}

}  // namespace arfusion::detail
