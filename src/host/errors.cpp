#include "errors.h"

#include <cstdarg>
#include <cstdio>

#include "env.h"

namespace arfusion {
namespace detail {
namespace {
thread_local std::string t_last_error;

std::string vformat(const char* fmt, va_list ap) {
  va_list copy;
  va_copy(copy, ap);
  const int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::string s(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(&s[0], s.size() + 1, fmt, ap);
  return s;
}
}  // namespace

Status fail(Status status, std::string message) {
  t_last_error = std::move(message);
  return status;
}

Status failf(Status status, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  t_last_error = vformat(fmt, ap);
  va_end(ap);
  return status;
}

void clearError() { t_last_error.clear(); }

void logf(LogLevel level, int rank, const char* fmt, ...) {
  if (static_cast<int>(level) > static_cast<int>(processLogLevel())) return;
  static const char* names[] = {"error", "warn", "info", "debug"};
  va_list ap;
  va_start(ap, fmt);
  const std::string msg = vformat(fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "[arfusion rank %d] %s: %s\n", rank, names[static_cast<int>(level)], msg.c_str());
}

}  // namespace detail

const char* lastError() { return detail::t_last_error.c_str(); }

const char* statusString(Status status) {
  switch (status) {
    case Status::kSuccess: return "kSuccess";
    case Status::kInvalidArgument: return "kInvalidArgument";
    case Status::kNotSupported: return "kNotSupported";
    case Status::kCudaError: return "kCudaError";
    case Status::kNcclError: return "kNcclError";
    case Status::kTimeout: return "kTimeout";
    case Status::kAborted: return "kAborted";
    case Status::kMismatch: return "kMismatch";
    case Status::kInternalError: return "kInternalError";
  }
  return "kUnknownStatus";
}

const char* toString(DType d) {
  switch (d) {
    case DType::kFloat16: return "fp16";
    case DType::kBFloat16: return "bf16";
    case DType::kFloat32: return "fp32";
  }
  return "unknown";
}
const char* toString(Strategy s) {
  switch (s) {
    case Strategy::kAuto: return "auto";
    case Strategy::kOneShot: return "oneshot";
    case Strategy::kTwoShot: return "twoshot";
    case Strategy::kNccl: return "nccl";
  }
  return "unknown";
}
const char* toString(SyncMode m) {
  switch (m) {
    case SyncMode::kAuto: return "auto";
    case SyncMode::kGridDependency: return "griddep";
    case SyncMode::kFlagBarrier: return "flag";
  }
  return "unknown";
}
const char* toString(Op o) {
  switch (o) {
    case Op::kAllReduce: return "allreduce";
    case Op::kAllReduceAdd: return "allreduce_add";
    case Op::kAllReduceAddRMSNorm: return "allreduce_add_rmsnorm";
  }
  return "unknown";
}

}  // namespace arfusion
