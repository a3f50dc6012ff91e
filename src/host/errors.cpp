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

}  // namespace arfusion
