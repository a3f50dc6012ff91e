// The public entry points: validate, plan, then launch the fused kernel or the NCCL path.
#include <cstdio>
#include <thread>
#include <vector>

#include "arfusion/arfusion.h"
#include "arfusion/testing.h"
#include "communicator.h"
#include "device_guard.h"
#include "env.h"
#include "errors.h"
#include "plan.h"
#include "validate.h"

namespace arfusion {
namespace detail {
void setSelfCheckFault(int rank, testing::SelfCheckFault fault);  // selfcheck.cpp
void setSpeedCheckFault(int rank, testing::SpeedCheckFault fault);  // selfcheck.cpp
}  // namespace detail
namespace {

using detail::DeviceGuard;
using detail::RowArgs;

ncclDataType_t ncclType(DType d) {
  switch (d) {
    case DType::kFloat16: return ncclFloat16;
    case DType::kBFloat16: return ncclBfloat16;
    case DType::kFloat32: return ncclFloat32;
  }
  return ncclFloat32;
}

// The NCCL path: ncclAllReduce, then the fused add-RMSNorm kernel in place.
Status ncclPath(Communicator* c, const RowArgs& a, DType dtype, bool vector, cudaStream_t stream) {
  const size_t count = static_cast<size_t>(a.tokens * a.hidden);
  if (c->world == 1) {  // no communication: the epilogue straight from the input
    ARF_CUDA(detail::launchAddRMSNorm(a, dtype, vector, stream));
    return Status::kSuccess;
  }
  const ncclDataType_t t = ncclType(dtype);
  switch (a.op) {
    case Op::kAllReduce:
      ARF_NCCL(ncclAllReduce(a.input, a.out, count, t, ncclSum, c->nccl, stream));
      return Status::kSuccess;
    case Op::kAllReduceAddRMSNorm: {
      ARF_NCCL(ncclAllReduce(a.input, a.out, count, t, ncclSum, c->nccl, stream));
      RowArgs b = a;
      b.input = a.out;  // reduce into norm_out, normalise in place
      ARF_CUDA(detail::launchAddRMSNorm(b, dtype, vector, stream));
      return Status::kSuccess;
    }
    case Op::kAllReduceAdd: {
      // The sum goes to residual_out, or, in place (residual_out == residual_in, which the sum must
      // not overwrite before the add has read it), to the scratch buffer. Both go in the same
      // chunks of at most scratch_bytes, so that the NCCL calls are the same on every rank
      // whether or not ranks agree on aliasing (NCCL would pair calls of different counts).
      // A failure does not stop the loop: the peers' NCCL calls of the later chunks, which have
      // no timeout, would wait for this rank's forever. Every chunk's allreduce is issued and the
      // first failure is returned at the end.
      const bool in_place = a.residual_out == a.residual_in;
      const size_t row_bytes = static_cast<size_t>(a.hidden) * detail::elemSize(dtype);
      const int64_t rows_per_chunk = static_cast<int64_t>(c->scratch_bytes / row_bytes);
      ncclResult_t reduced = ncclSuccess;
      cudaError_t launched = cudaSuccess;
      for (int64_t r0 = 0; r0 < a.tokens; r0 += rows_per_chunk) {
        const int64_t rows = std::min(rows_per_chunk, a.tokens - r0);
        const size_t off = static_cast<size_t>(r0) * row_bytes;
        void* sum = in_place ? c->scratch : static_cast<char*>(a.residual_out) + off;
        const ncclResult_t e = ncclAllReduce(static_cast<const char*>(a.input) + off, sum,
                                             static_cast<size_t>(rows * a.hidden), t, ncclSum, c->nccl, stream);
        if (reduced == ncclSuccess) reduced = e;
        RowArgs b = a;
        b.input = sum;
        b.residual_in = static_cast<const char*>(a.residual_in) + off;
        b.residual_out = static_cast<char*>(a.residual_out) + off;
        b.tokens = rows;
        if (launched == cudaSuccess && reduced == ncclSuccess)
          launched = detail::launchAddRMSNorm(b, dtype, vector && (reinterpret_cast<uintptr_t>(b.residual_out) % 16 == 0), stream);
      }
      if (reduced != ncclSuccess)
        return detail::failf(Status::kNcclError, "ncclAllReduce failed: %s", ncclGetErrorString(reduced));
      if (launched != cudaSuccess)
        return detail::failf(Status::kCudaError, "launching the add-RMSNorm kernel failed: %s", cudaGetErrorString(launched));
      return Status::kSuccess;
    }
  }
  return detail::fail(Status::kInternalError, "unknown op");
}

Status checkComm(const Communicator* comm) {
  if (!comm) return detail::fail(Status::kInvalidArgument, "communicator is null");
  return Status::kSuccess;
}

}  // namespace

Status Communicator::runPlanned(const RowArgs& a, DType dtype, bool vector, const Plan& plan, cudaStream_t stream) {
  if (plan.strategy == Strategy::kNccl) return ncclPath(this, a, dtype, vector, stream);
  detail::FusedLaunch launch;
  launch.blocks = plan.blocks;
  launch.rows_per_step = plan.rows_per_step;
  launch.vector = vector;
  launch.sync = plan.sync_mode;
  launch.dtype = dtype;
  // Recomputed rather than read from the plan: the self-check runs one plan in both sync modes.
  launch.lamport = detail::usesLamport(topo, Shape{a.tokens, a.hidden, dtype, a.op}, plan.strategy, plan.sync_mode,
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
  ARF_TRY(detail::makePlan(planInputs(), Shape{a.tokens, a.hidden, dtype, a.op}, &p));
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

Status commCreate(ncclComm_t nccl, const Config& config, Communicator** comm) {
  detail::clearError();
  if (!comm) return detail::fail(Status::kInvalidArgument, "comm (output) is null");
  *comm = nullptr;
  if (!nccl) return detail::fail(Status::kInvalidArgument, "nccl communicator is null");
  std::unique_ptr<detail::Bootstrap> boot;
  ARF_TRY(detail::makeNcclBootstrap(nccl, &boot));
  int nccl_dev = -1, cur = -1;
  std::string pre_error;
  if (ncclCommCuDevice(nccl, &nccl_dev) != ncclSuccess || cudaGetDevice(&cur) != cudaSuccess)
    pre_error = "cannot query the NCCL communicator's device or the current device";
  else if (cur != nccl_dev)
    pre_error = "current CUDA device " + std::to_string(cur) + " is not the NCCL communicator's device " + std::to_string(nccl_dev);
  return detail::createCommunicator(std::move(boot), nccl, config, comm, 0, pre_error);
}

Status commDestroy(Communicator* comm) {
  detail::clearError();
  ARF_TRY(checkComm(comm));
  delete comm;
  return Status::kSuccess;
}

Status commAbort(Communicator* comm) {
  detail::clearError();
  ARF_TRY(checkComm(comm));
  int expected = 0;
  comm->failed.compare_exchange_strong(expected, static_cast<int>(Status::kAborted));
  {
    std::lock_guard<std::mutex> lock(comm->failure_mu);
    if (comm->failure_detail.empty()) comm->failure_detail = "commAbort() was called";
  }
  // The kernels poll the abort word in device memory; a copy on a stream of its own runs on a copy
  // engine beside them. It is not waited for (abort never blocks); destroy synchronises the device.
  reinterpret_cast<volatile uint32_t*>(&comm->ctl->abort_src)[0] = detail::kStopAbort;
  DeviceGuard guard(comm->device);
  const cudaError_t e = cudaMemcpyAsync(comm->dev.abort_flag, &comm->ctl->abort_src,
                                        sizeof(uint32_t), cudaMemcpyHostToDevice, comm->abort_stream);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return detail::failf(Status::kCudaError, "commAbort: writing the abort word failed: %s", cudaGetErrorString(e));
  }
  return Status::kSuccess;
}

Status commGetAsyncError(Communicator* comm, const char** detail) {
  detail::clearError();
  ARF_TRY(checkComm(comm));
  const Status st = comm->checkHealth();
  if (detail) *detail = st == Status::kSuccess ? "" : lastError();
  return st;
}

Status commInfo(const Communicator* comm, int* rank, int* world_size, int* device) {
  detail::clearError();
  ARF_TRY(checkComm(comm));
  if (rank) *rank = comm->rank;
  if (world_size) *world_size = comm->world;
  if (device) *device = comm->device;
  return Status::kSuccess;
}

Status commSetStrategy(Communicator* comm, Strategy strategy, SyncMode sync_mode) {
  detail::clearError();
  ARF_TRY(checkComm(comm));
  if (static_cast<unsigned>(strategy) > 3 || static_cast<unsigned>(sync_mode) > 2)
    return detail::fail(Status::kInvalidArgument, "strategy or sync_mode is not a valid enum value");
  std::lock_guard<std::mutex> lock(comm->call_mu);
  comm->strategy = strategy;
  comm->sync = sync_mode;
  return Status::kSuccess;
}

Status plan(const Communicator* comm, const Shape& shape, Plan* out) {
  detail::clearError();
  ARF_TRY(checkComm(comm));
  if (!out) return detail::fail(Status::kInvalidArgument, "out is null");
  if (shape.tokens < 1 || shape.hidden < 1 || shape.hidden > detail::kMaxHidden || static_cast<unsigned>(shape.dtype) > 2 ||
      static_cast<unsigned>(shape.op) > 2)
    return detail::fail(Status::kInvalidArgument, "shape has tokens < 1, hidden outside [1, 65536], or a bad dtype/op");
  if (shape.tokens > (int64_t(1) << 40) / shape.hidden) return detail::fail(Status::kInvalidArgument, "tokens x hidden is too large");
  std::lock_guard<std::mutex> lock(const_cast<Communicator*>(comm)->call_mu);
  return detail::makePlan(comm->planInputs(), shape, out);
}

Status allReduceAddRMSNorm(Communicator* comm, const void* input, const void* residual_in, void* residual_out,
                           const void* gamma, void* norm_out, int64_t tokens, int64_t hidden, DType dtype, float eps,
                           cudaStream_t stream) {
  detail::clearError();
  ARF_TRY(checkComm(comm));
  return comm->run(detail::makeRowArgs(Op::kAllReduceAddRMSNorm, input, residual_in, residual_out, gamma, norm_out, tokens,
                                       hidden, eps),
                   dtype, stream);
}

Status allReduceAdd(Communicator* comm, const void* input, const void* residual_in, void* residual_out, int64_t tokens,
                    int64_t hidden, DType dtype, cudaStream_t stream) {
  detail::clearError();
  ARF_TRY(checkComm(comm));
  return comm->run(detail::makeRowArgs(Op::kAllReduceAdd, input, residual_in, residual_out, nullptr, nullptr, tokens, hidden, 0.f),
                   dtype, stream);
}

Status allReduce(Communicator* comm, const void* input, void* out, int64_t tokens, int64_t hidden, DType dtype,
                 cudaStream_t stream) {
  detail::clearError();
  ARF_TRY(checkComm(comm));
  return comm->run(detail::makeRowArgs(Op::kAllReduce, input, nullptr, nullptr, nullptr, out, tokens, hidden, 0.f), dtype, stream);
}

Status addRMSNorm(const void* x, const void* residual_in, void* residual_out, const void* gamma, void* norm_out,
                  int64_t tokens, int64_t hidden, DType dtype, float eps, cudaStream_t stream) {
  detail::clearError();
  const RowArgs a =
      detail::makeRowArgs(Op::kAllReduceAddRMSNorm, x, residual_in, residual_out, gamma, norm_out, tokens, hidden, eps);
  // x may be norm_out here (the NCCL path normalises in place); the collectives forbid it.
  ARF_TRY(detail::validateArgs(a, dtype, /*input_may_be_out=*/true));
  int device = 0;
  ARF_CUDA(cudaGetDevice(&device));
  bool capturing = false;
  ARF_TRY(detail::validateStream(stream, device, &capturing));
  if (!capturing) ARF_TRY(detail::validatePointers(a, dtype, device));
  ARF_CUDA(detail::launchAddRMSNorm(a, dtype, detail::vectorizable(a, dtype), stream));
  return Status::kSuccess;
}

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
  detail::setSelfCheckFault(rank, fault);
  return Status::kSuccess;
}

Status setSpeedCheckFault(int rank, SpeedCheckFault fault) {
  ARF_TRY(checkFaultArgs("setSpeedCheckFault", rank,
                         fault == SpeedCheckFault::kNone || fault == SpeedCheckFault::kRun || fault == SpeedCheckFault::kFusedSlow));
  detail::setSpeedCheckFault(rank, fault);
  return Status::kSuccess;
}

Status setEpochs(Communicator* comm, uint32_t value) {
  detail::clearError();
  if (!comm) return detail::fail(Status::kInvalidArgument, "setEpochs: null communicator");
  const int blocks = comm->dev.max_blocks;
  if (blocks == 0) return Status::kSuccess;  // no fused kernels, no epochs
  DeviceGuard guard(comm->device);
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
