// The public entry points (include/arfusion/arfusion.h): argument checks, then the communicator
// (communicator.cpp) or the single-GPU kernel.
#include "arfusion/arfusion.h"
#include "communicator.h"
#include "device_guard.h"
#include "errors.h"
#include "quant.h"
#include "validate.h"

namespace arfusion {
namespace {

using detail::DeviceGuard;
using detail::RowArgs;

Status checkComm(const Communicator* comm) {
  if (!comm) return detail::fail(Status::kInvalidArgument, "communicator is null");
  return Status::kSuccess;
}

}  // namespace

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
  // A refused GridDependency (arch.h gridDependencyAllowed; agreed at creation, so every rank
  // refuses alike) leaves the settings as they were.
  if (sync_mode == SyncMode::kGridDependency && strategy != Strategy::kNccl && comm->topo.fusion_ok && !comm->griddep_allowed)
    return detail::failf(Status::kNotSupported, "GridDependency sync refused: %s", comm->griddep_refusal.c_str());
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

Status allReduceAddRMSNorm(Communicator* comm, const NormArgs& args, cudaStream_t stream) {
  detail::clearError();
  ARF_TRY(checkComm(comm));
  RowArgs a;
  ARF_TRY(detail::normArgsToRow(args, &a));
  return comm->run(a, args.dtype, stream);
}

Status allReduceAddRMSNorm(Communicator* comm, const void* input, const void* residual_in, void* residual_out,
                           const void* gamma, void* norm_out, int64_t tokens, int64_t hidden, DType dtype, float eps,
                           cudaStream_t stream) {
  NormArgs args;
  args.input = input, args.residual_in = residual_in, args.residual_out = residual_out, args.gamma = gamma;
  args.norm_out = norm_out, args.tokens = tokens, args.hidden = hidden, args.dtype = dtype, args.eps = eps;
  return allReduceAddRMSNorm(comm, args, stream);
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

Status addRMSNorm(const NormArgs& args, cudaStream_t stream) {
  detail::clearError();
  RowArgs a;
  ARF_TRY(detail::normArgsToRow(args, &a));
  const DType dtype = args.dtype;
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

Status addRMSNorm(const void* x, const void* residual_in, void* residual_out, const void* gamma, void* norm_out,
                  int64_t tokens, int64_t hidden, DType dtype, float eps, cudaStream_t stream) {
  NormArgs args;
  args.input = x, args.residual_in = residual_in, args.residual_out = residual_out, args.gamma = gamma;
  args.norm_out = norm_out, args.tokens = tokens, args.hidden = hidden, args.dtype = dtype, args.eps = eps;
  return addRMSNorm(args, stream);
}

Status quantBufferBytes(QuantFormat format, ScaleLayout layout, int64_t tokens, int64_t hidden, size_t* values_bytes,
                        size_t* scale_bytes) {
  detail::clearError();
  return detail::quantSizes(format, layout, tokens, hidden, values_bytes, scale_bytes);
}

}  // namespace arfusion
