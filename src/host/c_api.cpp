// The C ABI (include/arfusion/arfusion_c.h): thin conversions onto the C++ API. The C enums'
// values are the C++ ones; out-of-range values are refused here or by the C++ call they reach.
#include "arfusion/arfusion_c.h"

#include <nccl.h>

#include <cstring>
#include <new>

#include "arfusion/arfusion.h"
#include "c_handle.h"
#include "errors.h"

using arfusion::Status;

namespace {

arfusion_status_t st(Status s) { return static_cast<arfusion_status_t>(s); }

arfusion_status_t invalid(const char* message) { return st(arfusion::detail::fail(Status::kInvalidArgument, message)); }

bool inRange(int v, int hi) { return v >= 0 && v <= hi; }

arfusion::Communicator* commOf(arfusion_comm_t c) { return c ? c->comm : nullptr; }

}  // namespace

namespace arfusion::detail {

Config configFromC(const arfusion_config_t* c) {
  Config cfg;
  if (!c) return cfg;
  cfg.strategy = static_cast<Strategy>(c->strategy);
  cfg.sync_mode = static_cast<SyncMode>(c->sync_mode);
  cfg.workspace_bytes = c->workspace_bytes;
  cfg.timeout_seconds = c->timeout_seconds;
  cfg.tuning_file = c->tuning_file;
  cfg.self_check = c->self_check != 0;
  cfg.max_blocks = c->max_blocks;
  cfg.read_env = c->read_env != 0;
  return cfg;
}

arfusion_status_t checkConfigC(const arfusion_config_t* c) {
  if (!c) return ARFUSION_SUCCESS;
  if (c->version != ARFUSION_C_CONFIG_VERSION)
    return st(fail(Status::kInvalidArgument, "arfusion_config_t::version is not ARFUSION_C_CONFIG_VERSION (use arfusion_config_init)"));
  if (!inRange(c->strategy, 3) || !inRange(c->sync_mode, 2))
    return st(fail(Status::kInvalidArgument, "arfusion_config_t: strategy or sync_mode is not a valid value"));
  return ARFUSION_SUCCESS;
}

}  // namespace arfusion::detail

extern "C" {

const char* arfusion_status_string(arfusion_status_t status) {
  return arfusion::statusString(static_cast<Status>(status));
}

const char* arfusion_last_error(void) { return arfusion::lastError(); }

void arfusion_version(int* major, int* minor, int* patch) {
  if (major) *major = ARFUSION_VERSION_MAJOR;
  if (minor) *minor = ARFUSION_VERSION_MINOR;
  if (patch) *patch = ARFUSION_VERSION_PATCH;
}

void arfusion_config_init(arfusion_config_t* config) {
  if (!config) return;
  const arfusion::Config d;
  config->version = ARFUSION_C_CONFIG_VERSION;
  config->strategy = static_cast<int>(d.strategy);
  config->sync_mode = static_cast<int>(d.sync_mode);
  config->workspace_bytes = d.workspace_bytes;
  config->timeout_seconds = d.timeout_seconds;
  config->tuning_file = d.tuning_file;
  config->self_check = d.self_check;
  config->max_blocks = d.max_blocks;
  config->read_env = d.read_env;
}

arfusion_status_t arfusion_get_unique_id(void* id) {
  arfusion::detail::clearError();
  if (!id) return invalid("id is null");
  static_assert(sizeof(ncclUniqueId) == ARFUSION_UNIQUE_ID_BYTES, "ncclUniqueId has another size");
  ncclUniqueId u;
  const ncclResult_t r = ncclGetUniqueId(&u);
  if (r != ncclSuccess) return st(arfusion::detail::failf(Status::kNcclError, "ncclGetUniqueId failed: %s", ncclGetErrorString(r)));
  std::memcpy(id, &u, sizeof u);
  return ARFUSION_SUCCESS;
}

arfusion_status_t arfusion_comm_create(const void* unique_id, int world_size, int rank, const arfusion_config_t* config,
                                       arfusion_comm_t* comm) {
  arfusion::detail::clearError();
  if (!comm) return invalid("comm is null");
  *comm = nullptr;
  if (!unique_id) return invalid("unique_id is null");
  if (world_size < 1 || rank < 0 || rank >= world_size)
    return st(arfusion::detail::failf(Status::kInvalidArgument, "rank %d of world size %d is not valid", rank, world_size));
  if (arfusion_status_t s = arfusion::detail::checkConfigC(config); s != ARFUSION_SUCCESS) return s;
  ncclUniqueId u;
  std::memcpy(&u, unique_id, sizeof u);
  ncclComm_t nccl = nullptr;
  const ncclResult_t r = ncclCommInitRank(&nccl, world_size, u, rank);
  if (r != ncclSuccess)
    return st(arfusion::detail::failf(Status::kNcclError, "ncclCommInitRank failed: %s", ncclGetErrorString(r)));
  arfusion::Communicator* c = nullptr;
  const Status s = arfusion::commCreate(nccl, arfusion::detail::configFromC(config), &c);
  if (s != Status::kSuccess) {
    ncclCommDestroy(nccl);  // keeps commCreate's message: ncclCommDestroy does not touch it
    return st(s);
  }
  *comm = new (std::nothrow) arfusion_comm{c, nccl};
  if (!*comm) {
    arfusion::commDestroy(c);
    ncclCommDestroy(nccl);
    return st(arfusion::detail::fail(Status::kInternalError, "out of host memory"));
  }
  return ARFUSION_SUCCESS;
}

arfusion_status_t arfusion_comm_create_nccl(void* nccl_comm, const arfusion_config_t* config, arfusion_comm_t* comm) {
  arfusion::detail::clearError();
  if (!comm) return invalid("comm is null");
  *comm = nullptr;
  if (!nccl_comm) return invalid("nccl_comm is null");
  if (arfusion_status_t s = arfusion::detail::checkConfigC(config); s != ARFUSION_SUCCESS) return s;
  arfusion::Communicator* c = nullptr;
  const Status s = arfusion::commCreate(static_cast<ncclComm_t>(nccl_comm), arfusion::detail::configFromC(config), &c);
  if (s != Status::kSuccess) return st(s);
  *comm = new (std::nothrow) arfusion_comm{c, nullptr};
  if (!*comm) {
    arfusion::commDestroy(c);
    return st(arfusion::detail::fail(Status::kInternalError, "out of host memory"));
  }
  return ARFUSION_SUCCESS;
}

arfusion_status_t arfusion_comm_destroy(arfusion_comm_t comm) {
  arfusion::detail::clearError();
  if (!comm) return invalid("comm is null");
  const Status s = arfusion::commDestroy(comm->comm);
  if (s != Status::kSuccess) return st(s);  // the handle stays valid: nothing was freed
  ncclResult_t r = ncclSuccess;
  if (comm->owned_nccl) r = ncclCommDestroy(comm->owned_nccl);
  delete comm;
  if (r != ncclSuccess) return st(arfusion::detail::failf(Status::kNcclError, "ncclCommDestroy failed: %s", ncclGetErrorString(r)));
  return ARFUSION_SUCCESS;
}

arfusion_status_t arfusion_comm_abort(arfusion_comm_t comm) { return st(arfusion::commAbort(commOf(comm))); }

arfusion_status_t arfusion_comm_get_async_error(arfusion_comm_t comm, const char** detail) {
  return st(arfusion::commGetAsyncError(commOf(comm), detail));
}

arfusion_status_t arfusion_comm_info(arfusion_comm_t comm, int* rank, int* world_size, int* device) {
  return st(arfusion::commInfo(commOf(comm), rank, world_size, device));
}

arfusion_status_t arfusion_comm_set_strategy(arfusion_comm_t comm, int strategy, int sync_mode) {
  return st(arfusion::commSetStrategy(commOf(comm), static_cast<arfusion::Strategy>(strategy),
                                      static_cast<arfusion::SyncMode>(sync_mode)));
}

arfusion_status_t arfusion_plan(arfusion_comm_t comm, int64_t tokens, int64_t hidden, int dtype, int op, int extended,
                                arfusion_plan_t* plan) {
  arfusion::detail::clearError();
  if (!plan) return invalid("plan is null");
  if (!inRange(op, 2)) return invalid("op is not a valid value");
  arfusion::Plan p;
  const Status s = arfusion::plan(commOf(comm), arfusion::Shape{tokens, hidden, static_cast<arfusion::DType>(dtype),
                                                                static_cast<arfusion::Op>(op), extended != 0},
                                  &p);
  if (s != Status::kSuccess) return st(s);
  plan->strategy = static_cast<int>(p.strategy);
  plan->sync_mode = static_cast<int>(p.sync_mode);
  plan->blocks = p.blocks;
  plan->rows_per_step = p.rows_per_step;
  plan->lamport = p.lamport;
  plan->row_blocks = p.row_blocks;
  static_assert(sizeof plan->reason == sizeof p.reason, "Plan::reason and arfusion_plan_t::reason differ");
  std::memcpy(plan->reason, p.reason, sizeof p.reason);
  return ARFUSION_SUCCESS;
}

arfusion_status_t arfusion_allreduce(arfusion_comm_t comm, const void* input, void* out, int64_t tokens, int64_t hidden,
                                     int dtype, arfusion_stream_t stream) {
  return st(arfusion::allReduce(commOf(comm), input, out, tokens, hidden, static_cast<arfusion::DType>(dtype),
                                static_cast<cudaStream_t>(stream)));
}

arfusion_status_t arfusion_allreduce_add(arfusion_comm_t comm, const void* input, const void* residual_in, void* residual_out,
                                         int64_t tokens, int64_t hidden, int dtype, arfusion_stream_t stream) {
  return st(arfusion::allReduceAdd(commOf(comm), input, residual_in, residual_out, tokens, hidden,
                                   static_cast<arfusion::DType>(dtype), static_cast<cudaStream_t>(stream)));
}

arfusion_status_t arfusion_allreduce_add_rmsnorm(arfusion_comm_t comm, const void* input, const void* residual_in,
                                                 void* residual_out, const void* gamma, void* norm_out, int64_t tokens,
                                                 int64_t hidden, int dtype, float eps, arfusion_stream_t stream) {
  return st(arfusion::allReduceAddRMSNorm(commOf(comm), input, residual_in, residual_out, gamma, norm_out, tokens, hidden,
                                          static_cast<arfusion::DType>(dtype), eps, static_cast<cudaStream_t>(stream)));
}

void arfusion_norm_args_init(arfusion_norm_args_t* args) {
  if (!args) return;
  const arfusion::NormArgs d;
  std::memset(args, 0, sizeof *args);
  args->version = ARFUSION_C_NORM_ARGS_VERSION;
  args->dtype = static_cast<int>(d.dtype);
  args->eps = d.eps;
  args->quant_format = static_cast<int>(d.quant.format);
  args->quant_layout = static_cast<int>(d.quant.layout);
}

}  // extern "C"

namespace {

// The C++ NormArgs of a C one; the C++ calls validate every field (enums included).
arfusion_status_t toNormArgs(const arfusion_norm_args_t* c, arfusion::NormArgs* a) {
  if (!c) return invalid("args is null");
  if (c->version != ARFUSION_C_NORM_ARGS_VERSION)
    return invalid("arfusion_norm_args_t::version is not ARFUSION_C_NORM_ARGS_VERSION (use arfusion_norm_args_init)");
  a->input = c->input, a->residual_in = c->residual_in, a->residual_out = c->residual_out, a->gamma = c->gamma;
  a->norm_out = c->norm_out, a->tokens = c->tokens, a->hidden = c->hidden, a->dtype = static_cast<arfusion::DType>(c->dtype);
  a->eps = c->eps, a->gemma = c->gemma != 0;
  a->quant.format = static_cast<arfusion::QuantFormat>(c->quant_format);
  a->quant.layout = static_cast<arfusion::ScaleLayout>(c->quant_layout);
  a->quant.values = c->quant_values, a->quant.scales = c->quant_scales, a->quant.scale = c->quant_scale;
  a->quant.pow2_scales = c->quant_pow2_scales != 0;
  return ARFUSION_SUCCESS;
}

}  // namespace

extern "C" {

arfusion_status_t arfusion_allreduce_add_rmsnorm_ex(arfusion_comm_t comm, const arfusion_norm_args_t* args,
                                                    arfusion_stream_t stream) {
  arfusion::detail::clearError();
  arfusion::NormArgs a;
  if (arfusion_status_t s = toNormArgs(args, &a); s != ARFUSION_SUCCESS) return s;
  return st(arfusion::allReduceAddRMSNorm(commOf(comm), a, static_cast<cudaStream_t>(stream)));
}

arfusion_status_t arfusion_add_rmsnorm(const arfusion_norm_args_t* args, arfusion_stream_t stream) {
  arfusion::detail::clearError();
  arfusion::NormArgs a;
  if (arfusion_status_t s = toNormArgs(args, &a); s != ARFUSION_SUCCESS) return s;
  return st(arfusion::addRMSNorm(a, static_cast<cudaStream_t>(stream)));
}

arfusion_status_t arfusion_quant_buffer_bytes(int format, int layout, int64_t tokens, int64_t hidden, size_t* values_bytes,
                                              size_t* scale_bytes) {
  return st(arfusion::quantBufferBytes(static_cast<arfusion::QuantFormat>(format), static_cast<arfusion::ScaleLayout>(layout),
                                       tokens, hidden, values_bytes, scale_bytes));
}

}  // extern "C"
