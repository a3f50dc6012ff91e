// Status plumbing for host code: the thread-local detailed message and CUDA/NCCL check helpers.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>

#include "arfusion/arfusion.h"

namespace arfusion::detail {

// Records `message` as the calling thread's lastError() and returns `status`.
Status fail(Status status, std::string message);
// printf-style variant.
Status failf(Status status, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// Clears the calling thread's last error (at the start of each public call).
void clearError();

// Logging to stderr, "[arfusion rank R] level: message". Level from ARFUSION_LOG (env.cpp).
enum class LogLevel : int { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };
void logf(LogLevel level, int rank, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

}  // namespace arfusion::detail

// Returns kCudaError with the CUDA error string and the failing expression.
#define ARF_CUDA(expr)                                                                          \
  do {                                                                                          \
    const cudaError_t arf_err_ = (expr);                                                        \
    if (arf_err_ != cudaSuccess)                                                                \
      return ::arfusion::detail::failf(::arfusion::Status::kCudaError, "%s failed: %s (%s:%d)", \
                                       #expr, cudaGetErrorString(arf_err_), __FILE__, __LINE__); \
  } while (0)

// Returns kNcclError with NCCL's error string.
#define ARF_NCCL(expr)                                                                          \
  do {                                                                                          \
    const ncclResult_t arf_res_ = (expr);                                                       \
    if (arf_res_ != ncclSuccess)                                                                \
      return ::arfusion::detail::failf(::arfusion::Status::kNcclError, "%s failed: %s (%s:%d)", \
                                       #expr, ncclGetErrorString(arf_res_), __FILE__, __LINE__); \
  } while (0)

// Propagates a non-success Status (lastError() already set).
#define ARF_TRY(expr)                                   \
  do {                                                  \
    const ::arfusion::Status arf_st_ = (expr);          \
    if (arf_st_ != ::arfusion::Status::kSuccess) return arf_st_; \
  } while (0)
