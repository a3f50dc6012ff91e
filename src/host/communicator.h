// The communicator: owns the peer workspace, the control words and everything agreed at creation;
// runs one call (validate, plan, launch). Created by create.cpp, used by api.cpp.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "arfusion/arfusion.h"
#include "auto_table.h"
#include "bootstrap.h"
#include "kernels/kernels.h"
#include "plan.h"
#include "topology.h"
#include "workspace.h"

namespace arfusion {

namespace detail {

// Collective: creates rank boot->rank()'s communicator. nccl may be null (test groups: no NCCL
// path). max_blocks_cap > 0 caps the fused grid below the SM count (groups that put several ranks
// on one GPU need every rank's blocks resident at once). pre_error: a failure the caller found
// before creation (a wrong current device), exchanged like any other so that every rank fails
// together instead of one waiting for the others.
Status createCommunicator(std::unique_ptr<Bootstrap> boot, ncclComm_t nccl, const Config& config, Communicator** out,
                          int max_blocks_cap = 0, const std::string& pre_error = "");

// Fused blocks of the live communicators per device in this process (a warning when they could not
// all be resident at once: Config::max_blocks). Adds `delta` to `device`'s count, returns the new count.
int addFusedBlocks(int device, int delta);

}  // namespace detail

class Communicator {
 public:
  ~Communicator();

  // Identity
  int rank = 0, world = 1, device = -1;  // device: -1 until creation has queried it
  ncclComm_t nccl = nullptr;
  std::unique_ptr<detail::Bootstrap> boot;

  // Agreed at creation (identical on every rank)
  Config config;
  std::string tuning_file_storage;  // owns config.tuning_file
  detail::Topology topo;
  detail::AutoTable table;
  SyncMode sync_auto = SyncMode::kFlagBarrier;
  std::string sync_auto_reason;
  bool griddep_allowed = true;  // a forced GridDependency may be used (arch.h gridDependencyAllowed)
  std::string griddep_refusal;  // why not

  // Current settings (commSetStrategy)
  Strategy strategy = Strategy::kAuto;
  SyncMode sync = SyncMode::kAuto;

  // Memory
  void* workspace = nullptr;
  std::vector<void*> peer_base;  // each rank's workspace as mapped here
  std::vector<bool> peer_ipc;    // mapped through cudaIpcOpenMemHandle (closed on destroy)
  detail::ControlWords* ctl = nullptr;      // host view
  detail::ControlWords* ctl_dev = nullptr;  // device view of the same pinned memory
  // commAbort()'s copy into the abort word (runs beside spinning kernels) and creation's memsets.
  cudaStream_t abort_stream = nullptr;
  int registered_blocks = 0;  // this communicator's share in the per-device block count
  void* scratch = nullptr;    // NCCL path, in-place allReduceAdd
  size_t scratch_bytes = 0;
  detail::DeviceComm dev{};
  int test_row_blocks = 0;  // test only (testing::forceRowBlocks): the one-shot's cluster size where it fits

  // One call in flight: an eager call is ordered after the previous one even on another stream
  // (this event; waiting on a never-recorded event is a no-op). call_mu serialises host threads.
  cudaEvent_t last_call = nullptr;
  std::mutex call_mu;

  // Failure state: kSuccess, or the Status of the first device-side failure.
  std::atomic<int> failed{0};
  std::string failure_detail;
  std::mutex failure_mu;

  detail::PlanInputs planInputs() const;
  // Reads the control words; turns a device-side failure into the communicator's failed state.
  Status checkHealth();
  // One call: validated, planned, launched (communicator.cpp).
  Status run(const detail::RowArgs& args, DType dtype, cudaStream_t stream);
  // A planned call on the fused path or the NCCL path (also used by the creation-time checks).
  Status runPlanned(const detail::RowArgs& args, DType dtype, bool vector, const Plan& plan, cudaStream_t stream);
};

}  // namespace arfusion
