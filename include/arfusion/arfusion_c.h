/* arfusion C ABI: everything arfusion.h offers, for callers that cannot use C++ (Python through
 * ctypes, other languages' FFIs). Plain C: opaque handles, int status codes with the values of
 * arfusion::Status, int enums with the values of the C++ enums, structs with a version field.
 * The semantics of every call are those of its C++ counterpart in arfusion.h (named beside it);
 * docs/api.md has the conventions (errors, streams and graphs, lifetime).
 *
 * Creation without an ncclComm_t in hand: rank 0 calls arfusion_get_unique_id(), the caller's
 * process group broadcasts the 128 bytes, and every rank calls arfusion_comm_create() with them,
 * its rank and the world size, its CUDA device current. The NCCL communicator made there belongs to
 * the arfusion communicator and is destroyed with it. */
#ifndef ARFUSION_ARFUSION_C_H
#define ARFUSION_ARFUSION_C_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define ARFUSION_C_API
#else
#define ARFUSION_C_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes (arfusion::Status). */
typedef int arfusion_status_t;
enum {
  ARFUSION_SUCCESS = 0,
  ARFUSION_INVALID_ARGUMENT = 1, /* nothing was written */
  ARFUSION_NOT_SUPPORTED = 2,
  ARFUSION_CUDA_ERROR = 3,
  ARFUSION_NCCL_ERROR = 4,
  ARFUSION_TIMEOUT = 5,
  ARFUSION_ABORTED = 6,
  ARFUSION_INTERNAL_ERROR = 7,
  ARFUSION_MISMATCH = 8
};
/* arfusion::DType, Strategy, SyncMode, Op, QuantFormat, ScaleLayout. */
enum { ARFUSION_FLOAT16 = 0, ARFUSION_BFLOAT16 = 1, ARFUSION_FLOAT32 = 2 };
enum { ARFUSION_STRATEGY_AUTO = 0, ARFUSION_STRATEGY_ONESHOT = 1, ARFUSION_STRATEGY_TWOSHOT = 2, ARFUSION_STRATEGY_NCCL = 3 };
enum { ARFUSION_SYNC_AUTO = 0, ARFUSION_SYNC_GRID_DEPENDENCY = 1, ARFUSION_SYNC_FLAG_BARRIER = 2 };
enum { ARFUSION_OP_ALLREDUCE = 0, ARFUSION_OP_ALLREDUCE_ADD = 1, ARFUSION_OP_ALLREDUCE_ADD_RMSNORM = 2 };
enum {
  ARFUSION_QUANT_NONE = 0,
  ARFUSION_QUANT_FP8 = 1,
  ARFUSION_QUANT_FP8_PER_TOKEN = 2,
  ARFUSION_QUANT_FP8_PER_GROUP = 3,
  ARFUSION_QUANT_NVFP4 = 4
};
enum { ARFUSION_LAYOUT_LINEAR = 0, ARFUSION_LAYOUT_COLUMN_MAJOR = 1, ARFUSION_LAYOUT_UE8M0_PACKED = 2, ARFUSION_LAYOUT_SWIZZLED_128X4 = 3 };

typedef struct arfusion_comm* arfusion_comm_t; /* opaque */
typedef void* arfusion_stream_t;               /* a cudaStream_t (0: the legacy default stream) */

/* The status's name, "kSuccess", "kInvalidArgument", ... (statusString). Never null. */
ARFUSION_C_API const char* arfusion_status_string(arfusion_status_t status);
/* The detailed message of this thread's last failed call ("" after a success) (lastError). */
ARFUSION_C_API const char* arfusion_last_error(void);
ARFUSION_C_API void arfusion_version(int* major, int* minor, int* patch);

/* arfusion::Config. Fill with arfusion_config_init(), then change what you need. */
#define ARFUSION_C_CONFIG_VERSION 1u
typedef struct {
  unsigned version;       /* leave as arfusion_config_init() set it */
  int strategy;           /* ARFUSION_STRATEGY_* */
  int sync_mode;          /* ARFUSION_SYNC_* */
  size_t workspace_bytes; /* >= 1 MiB */
  double timeout_seconds; /* > 0 */
  const char* tuning_file;
  int self_check;         /* 0 or 1 */
  int max_blocks;         /* 0: the SM count */
  int read_env;           /* 0 or 1: ARFUSION_* variables override the fields */
} arfusion_config_t;
ARFUSION_C_API void arfusion_config_init(arfusion_config_t* config);

/* Creation (commCreate) and teardown. config may be null (the defaults). */
#define ARFUSION_UNIQUE_ID_BYTES 128
ARFUSION_C_API arfusion_status_t arfusion_get_unique_id(void* id /* ARFUSION_UNIQUE_ID_BYTES */);
ARFUSION_C_API arfusion_status_t arfusion_comm_create(const void* unique_id, int world_size, int rank,
                                                      const arfusion_config_t* config, arfusion_comm_t* comm);
/* Over the caller's ncclComm_t, which must outlive the communicator. */
ARFUSION_C_API arfusion_status_t arfusion_comm_create_nccl(void* nccl_comm, const arfusion_config_t* config,
                                                           arfusion_comm_t* comm);
ARFUSION_C_API arfusion_status_t arfusion_comm_destroy(arfusion_comm_t comm);
ARFUSION_C_API arfusion_status_t arfusion_comm_abort(arfusion_comm_t comm);
/* detail may be null; the message stays valid until this thread's next call. */
ARFUSION_C_API arfusion_status_t arfusion_comm_get_async_error(arfusion_comm_t comm, const char** detail);
ARFUSION_C_API arfusion_status_t arfusion_comm_info(arfusion_comm_t comm, int* rank, int* world_size, int* device);
ARFUSION_C_API arfusion_status_t arfusion_comm_set_strategy(arfusion_comm_t comm, int strategy, int sync_mode);

/* arfusion::Plan of a shape (plan). */
typedef struct {
  int strategy, sync_mode, blocks, rows_per_step, lamport, row_blocks;
  char reason[256];
} arfusion_plan_t;
ARFUSION_C_API arfusion_status_t arfusion_plan(arfusion_comm_t comm, int64_t tokens, int64_t hidden, int dtype, int op,
                                               int extended, arfusion_plan_t* plan);

/* The collectives (allReduce, allReduceAdd, allReduceAddRMSNorm). */
ARFUSION_C_API arfusion_status_t arfusion_allreduce(arfusion_comm_t comm, const void* input, void* out, int64_t tokens,
                                                    int64_t hidden, int dtype, arfusion_stream_t stream);
ARFUSION_C_API arfusion_status_t arfusion_allreduce_add(arfusion_comm_t comm, const void* input, const void* residual_in,
                                                        void* residual_out, int64_t tokens, int64_t hidden, int dtype,
                                                        arfusion_stream_t stream);
ARFUSION_C_API arfusion_status_t arfusion_allreduce_add_rmsnorm(arfusion_comm_t comm, const void* input,
                                                                const void* residual_in, void* residual_out,
                                                                const void* gamma, void* norm_out, int64_t tokens,
                                                                int64_t hidden, int dtype, float eps,
                                                                arfusion_stream_t stream);

/* arfusion::NormArgs: the fused op with every option (quantized output, no residual, Gemma
 * weights, outputs left out). Fill with arfusion_norm_args_init(). */
#define ARFUSION_C_NORM_ARGS_VERSION 1u
typedef struct {
  unsigned version;
  const void* input;
  const void* residual_in; /* null: zero */
  void* residual_out;      /* null: not written */
  const void* gamma;
  void* norm_out;          /* null: not written */
  int64_t tokens, hidden;
  int dtype;
  float eps;
  int gemma;               /* 0 or 1: norm * (1 + gamma) */
  int quant_format;        /* ARFUSION_QUANT_* */
  int quant_layout;        /* ARFUSION_LAYOUT_* */
  void* quant_values;
  void* quant_scales;
  const float* quant_scale; /* device memory: FP8's static scale, NVFP4's global scale */
  int quant_pow2_scales;
} arfusion_norm_args_t;
ARFUSION_C_API void arfusion_norm_args_init(arfusion_norm_args_t* args);
ARFUSION_C_API arfusion_status_t arfusion_allreduce_add_rmsnorm_ex(arfusion_comm_t comm, const arfusion_norm_args_t* args,
                                                                   arfusion_stream_t stream);
/* One GPU, no communicator (addRMSNorm). */
ARFUSION_C_API arfusion_status_t arfusion_add_rmsnorm(const arfusion_norm_args_t* args, arfusion_stream_t stream);
ARFUSION_C_API arfusion_status_t arfusion_quant_buffer_bytes(int format, int layout, int64_t tokens, int64_t hidden,
                                                             size_t* values_bytes, size_t* scale_bytes);

#ifdef __cplusplus
}
#endif

#endif /* ARFUSION_ARFUSION_C_H */
