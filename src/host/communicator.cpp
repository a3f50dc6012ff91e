// The communicator's life after creation: one call (validate, plan, launch), health, teardown.
#include "communicator.h"

#include <cstdio>

#include "device_guard.h"
#include "errors.h"
#include "nccl_path.h"
#include "validate.h"

namespace arfusion {

using detail::RowArgs;
using detail::DeviceGuard;

Communicator::~Communicator() {
  if (registered_blocks) detail::addFusedBlocks(device, -registered_blocks);
  if (device < 0) return;  // creation failed before it had a device, and so before any allocation
  detail::DeviceGuard guard(device);
  // The whole device, not last_call: launches of captured graphs are not tracked by it, and the
  // cudaFree below waits for the device anyway.
  cudaDeviceSynchronize();
  for (size_t r = 0; r < peer_base.size(); ++r)
    if (peer_ipc[r]) cudaIpcCloseMemHandle(peer_base[r]);
  if (workspace) cudaFree(workspace);
  if (scratch) cudaFree(scratch);
  if (ctl) cudaFreeHost(ctl);
  if (last_call) cudaEventDestroy(last_call);
  if (abort_stream) cudaStreamDestroy(abort_stream);
  (void)cudaGetLastError();
}

detail::PlanInputs Communicator::planInputs() const {
  detail::PlanInputs in;
  in.topo = topo;
  in.strategy = strategy;
  in.sync = sync;
  in.sync_auto = sync_auto;
  in.sync_auto_reason = sync_auto_reason;
  in.griddep_allowed = griddep_allowed;
  in.griddep_refusal = griddep_refusal;
  in.table = &table;
  in.test_row_blocks = test_row_blocks;
  return in;
}

Status Communicator::checkHealth() {
  // The kernel writes the details, a system fence, then the code: the code read with acquire
  // ordering, the details after it (an Arm host such as Grace could otherwise see stale details).
  const uint32_t code = __atomic_load_n(&ctl->error[0], __ATOMIC_ACQUIRE);
  const volatile uint32_t* err = ctl->error;
  if (code != detail::kErrNone && failed.load() == 0) {
    std::lock_guard<std::mutex> lock(failure_mu);
    char buf[240];
    if (code == detail::kErrMismatch)
      std::snprintf(buf, sizeof buf,
                    "mismatch on device: block %u was paired with a call of rank %u that has another op, dtype, "
                    "shape, strategy or sync mode (epoch %u); every rank must make the same calls in the same order",
                    err[1] >> 8, err[1] & 0xff, err[2]);
    else if ((err[1] & 0xff) == detail::kPeerOwnCluster)
      std::snprintf(buf, sizeof buf, "%s on device: block %u waited for the blocks of its own cluster at epoch %u",
                    code == detail::kErrAbort ? "abort" : "timeout", err[1] >> 8, err[2]);
    else
      std::snprintf(buf, sizeof buf, "%s on device: block %u waited for rank %u at epoch %u",
                    code == detail::kErrAbort ? "abort" : "timeout", err[1] >> 8, err[1] & 0xff, err[2]);
    failure_detail = buf;
    const Status st = code == detail::kErrMismatch ? Status::kMismatch
                      : code == detail::kErrAbort  ? Status::kAborted
                                                   : Status::kTimeout;
    failed.store(static_cast<int>(st));
  }
  const int f = failed.load();
  if (f == 0) return Status::kSuccess;
  std::lock_guard<std::mutex> lock(failure_mu);
  return detail::failf(static_cast<Status>(f), "communicator failed earlier (%s); destroy it", failure_detail.c_str());
}

Status Communicator::runPlanned(const RowArgs& a, DType dtype, bool vector, const Plan& plan, cudaStream_t stream) {
  if (plan.strategy == Strategy::kNccl) return detail::ncclPath(this, a, dtype, vector, stream);
  detail::FusedLaunch launch;
  launch.blocks = plan.blocks;
  launch.rows_per_step = plan.rows_per_step;
  launch.vector = vector;
  launch.sync = plan.sync_mode;
  launch.dtype = dtype;
  // Recomputed rather than read from the plan: the self-check runs one plan in both sync modes.
  launch.lamport = detail::usesLamport(topo, Shape{a.tokens, a.hidden, dtype, a.op, a.ext}, plan.strategy, plan.sync_mode,
                                       plan.blocks, plan.rows_per_step);
  // (A flag kernel given a plan's larger grid leaves the blocks without a row idle.)
  launch.row_blocks = launch.lamport && plan.strategy == Strategy::kOneShot ? plan.row_blocks : 1;
  RowArgs signed_args = a;
  signed_args.sig = detail::callSignature(a, launch, plan.strategy);
  const cudaError_t e = plan.strategy == Strategy::kOneShot ? detail::launchOneShot(dev, signed_args, launch, stream)
                                                             : detail::launchTwoShot(dev, signed_args, launch, stream);
  if (e != cudaSuccess)
    return detail::failf(Status::kCudaError, "launching the %s kernel failed: %s", toString(plan.strategy), cudaGetErrorString(e));
  return Status::kSuccess;
}

Status Communicator::run(const RowArgs& a, DType dtype, cudaStream_t stream) {
  ARF_TRY(detail::validateArgs(a, dtype));
  bool capturing = false;
  ARF_TRY(detail::validateStream(stream, device, &capturing));
  ARF_TRY(checkHealth());
  DeviceGuard guard(device);
  if (!capturing) ARF_TRY(detail::validatePointers(a, dtype, device));
  std::lock_guard<std::mutex> lock(call_mu);
  Plan p;
  ARF_TRY(detail::makePlan(planInputs(), Shape{a.tokens, a.hidden, dtype, a.op, a.ext}, &p));
  // One call in flight per communicator: an eager call first waits for the previous one, on
  // whatever stream it ran (two calls in flight would share epochs and slots and could wait on
  // each other forever). Unconditional: a stream handle can be reused after its stream was
  // destroyed, and on the same stream the wait costs nothing. Inside a capture this ordering is
  // the caller's (header, "Conventions").
  if (!capturing) ARF_CUDA(cudaStreamWaitEvent(stream, last_call, 0));
  ARF_TRY(runPlanned(a, dtype, detail::vectorizable(a, dtype), p, stream));
  if (!capturing) ARF_CUDA(cudaEventRecord(last_call, stream));
  return Status::kSuccess;
}

}  // namespace arfusion
