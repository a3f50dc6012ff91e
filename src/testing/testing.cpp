// The arfusion_testing library: test groups without NCCL and fault injection (testing.h).
#include "testing/testing.h"

#include <string>
#include <thread>
#include <vector>

#include "host/check_faults.h"
#include "host/communicator.h"
#include "host/device_guard.h"
#include "host/errors.h"

namespace arfusion {
namespace testing {

Status createGroup(int world, const int* devices, const Config& config, std::vector<Communicator*>* comms,
                   int max_blocks) {
  detail::clearError();
  if (world < 1 || world > detail::kMaxRanks || !devices || !comms)
    return detail::fail(Status::kInvalidArgument, "createGroup: world must be 1..8 and devices/comms non-null");
  auto shared = detail::makeLocalExchange(world);
  comms->assign(world, nullptr);
  std::vector<Status> st(world, Status::kSuccess);
  std::vector<std::string> err(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      cudaSetDevice(devices[r]);
      st[r] = detail::createCommunicator(detail::makeLocalBootstrap(shared, r), nullptr, config, &(*comms)[r], max_blocks);
      err[r] = lastError();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) {
    if (st[r] != Status::kSuccess) {
      for (Communicator* c : *comms) delete c;
      comms->assign(world, nullptr);
      return detail::failf(st[r], "rank %d: %s", r, err[r].c_str());
    }
  }
  return Status::kSuccess;
}

Status skipAllGatherSignals(Communicator* comm, bool on) {
  detail::clearError();
  if (!comm) return detail::fail(Status::kInvalidArgument, "skipAllGatherSignals: null communicator");
  comm->dev.test_skip_ag_signal = on ? 1 : 0;
  return Status::kSuccess;
}

namespace {
// The arguments of the creation-check fault hooks: a rank in -1..kMaxRanks-1, a known fault.
Status checkFaultArgs(const char* fn, int rank, bool known_fault) {
  detail::clearError();
  if (rank < -1 || rank >= detail::kMaxRanks)
    return detail::failf(Status::kInvalidArgument, "%s: rank %d outside -1..%d", fn, rank, detail::kMaxRanks - 1);
  if (!known_fault) return detail::failf(Status::kInvalidArgument, "%s: unknown fault", fn);
  return Status::kSuccess;
}
}  // namespace

Status setSelfCheckFault(int rank, SelfCheckFault fault) {
  ARF_TRY(checkFaultArgs("setSelfCheckFault", rank,
                         fault == SelfCheckFault::kNone || fault == SelfCheckFault::kWrongResult || fault == SelfCheckFault::kSlow));
  detail::storeFault(detail::checkFaults().self_check, rank, int(fault));
  return Status::kSuccess;
}

Status setSpeedCheckFault(int rank, SpeedCheckFault fault) {
  ARF_TRY(checkFaultArgs("setSpeedCheckFault", rank,
                         fault == SpeedCheckFault::kNone || fault == SpeedCheckFault::kRun || fault == SpeedCheckFault::kFusedSlow));
  detail::storeFault(detail::checkFaults().speed_check, rank, int(fault));
  return Status::kSuccess;
}

Status setArchPolicy(int major, int minor) {
  detail::clearError();
  if (major < 0 || major > 99 || minor < 0 || minor > 9)
    return detail::failf(Status::kInvalidArgument, "setArchPolicy: %d.%d is not a compute capability", major, minor);
  detail::checkFaults().arch_policy.store(major * 10 + minor);
  return Status::kSuccess;
}

Status forceRowBlocks(Communicator* comm, int row_blocks) {
  detail::clearError();
  if (!comm) return detail::fail(Status::kInvalidArgument, "forceRowBlocks: null communicator");
  if (row_blocks < 0 || row_blocks == 3 || row_blocks > detail::kMaxRowBlocks)
    return detail::failf(Status::kInvalidArgument, "forceRowBlocks: %d is not 0, 1, 2 or 4", row_blocks);
  std::lock_guard<std::mutex> lock(comm->call_mu);
  comm->test_row_blocks = row_blocks;
  return Status::kSuccess;
}

Status skipClusterPartialSums(Communicator* comm, bool on) {
  detail::clearError();
  if (!comm) return detail::fail(Status::kInvalidArgument, "skipClusterPartialSums: null communicator");
  comm->dev.test_cluster_skip_partial = on ? 1 : 0;
  return Status::kSuccess;
}

Status setEpochs(Communicator* comm, uint32_t value) {
  detail::clearError();
  if (!comm) return detail::fail(Status::kInvalidArgument, "setEpochs: null communicator");
  const int blocks = comm->dev.max_blocks;
  if (blocks == 0) return Status::kSuccess;  // no fused kernels, no epochs
  detail::DeviceGuard guard(comm->device);
  // Its own non-blocking stream: a peer sharing this GPU may have a kernel waiting for this rank,
  // which a copy on the legacy default stream would wait for in turn.
  cudaStream_t s = nullptr;
  ARF_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const std::vector<uint32_t> epochs(static_cast<size_t>(blocks), value);
  cudaError_t e = cudaEventSynchronize(comm->last_call);
  if (e == cudaSuccess)
    e = cudaMemcpyAsync(comm->dev.epochs, epochs.data(), epochs.size() * sizeof(uint32_t), cudaMemcpyHostToDevice, s);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
  ARF_CUDA(e);
  return Status::kSuccess;
}

}  // namespace testing
}  // namespace arfusion

static_assert(int(arfusion::testing::SelfCheckFault::kWrongResult) == arfusion::detail::kSelfCheckWrongResult &&
                  int(arfusion::testing::SelfCheckFault::kSlow) == arfusion::detail::kSelfCheckSlow,
              "testing::SelfCheckFault and check_faults.h disagree");
static_assert(int(arfusion::testing::SpeedCheckFault::kRun) == arfusion::detail::kSpeedCheckRun &&
                  int(arfusion::testing::SpeedCheckFault::kFusedSlow) == arfusion::detail::kSpeedCheckFusedSlow,
              "testing::SpeedCheckFault and check_faults.h disagree");
