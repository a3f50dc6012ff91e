#include "env.h"

#include "names.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>

namespace arfusion::detail {

const EnvVar kEnvVars[] = {
    {"ARFUSION_STRATEGY", "auto|oneshot|twoshot|nccl: overrides Config::strategy"},
    {"ARFUSION_SYNC", "auto|griddep|flag: overrides Config::sync_mode"},
    {"ARFUSION_WORKSPACE_MB", "peer workspace per rank in MiB (>= 1): overrides Config::workspace_bytes"},
    {"ARFUSION_TIMEOUT_S", "seconds a device wait may spin (> 0): overrides Config::timeout_seconds"},
    {"ARFUSION_TUNING_FILE", "path of a tuning file from tools/arfusion-tune: overrides Config::tuning_file"},
    {"ARFUSION_SELF_CHECK", "0|1: overrides Config::self_check (the creation-time self-check and speed check)"},
    {"ARFUSION_MAX_BLOCKS", "most blocks of a fused kernel (>= 0, 0 = SM count): overrides Config::max_blocks"},
    {"ARFUSION_LOG", "error|warn|info|debug: log level on stderr (default warn)"},
    {"ARFUSION_TWO_SHOT_SPLIT", "0|1 (default 1): 0 runs the two-shot's steps 3-5 on the whole block, unsplit (same results, slower; for compute-sanitizer racecheck)"},
};
const int kNumEnvVars = sizeof(kEnvVars) / sizeof(kEnvVars[0]);

EnvLookup processEnv() {
  return [](const char* name) -> const char* { return std::getenv(name); };
}

namespace {
bool parseDouble(const char* t, double* out) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(t, &end);
  if (errno != 0 || end == t || *end != '\0' || !std::isfinite(v)) return false;
  *out = v;
  return true;
}
// "0" or "1", nothing else.
bool parseZeroOne(const char* t, bool* out) {
  if (!std::strcmp(t, "0")) *out = false;
  else if (!std::strcmp(t, "1")) *out = true;
  else return false;
  return true;
}
}  // namespace

Status applyEnv(const EnvLookup& env, Config* c, std::string* tuning_file_storage) {
  if (const char* v = env("ARFUSION_STRATEGY")) {
    if (!parseStrategy(v, &c->strategy))
      return failf(Status::kInvalidArgument, "ARFUSION_STRATEGY='%s' is not one of auto|oneshot|twoshot|nccl", v);
  }
  if (const char* v = env("ARFUSION_SYNC")) {
    if (!parseSyncMode(v, &c->sync_mode))
      return failf(Status::kInvalidArgument, "ARFUSION_SYNC='%s' is not one of auto|griddep|flag", v);
  }
  if (const char* v = env("ARFUSION_WORKSPACE_MB")) {
    double mb = 0;
    if (!parseDouble(v, &mb) || mb < 1 || mb > 1 << 20)
      return failf(Status::kInvalidArgument, "ARFUSION_WORKSPACE_MB='%s' is not a size in MiB in [1, 1048576]", v);
    c->workspace_bytes = static_cast<size_t>(mb * (1 << 20));
  }
  if (const char* v = env("ARFUSION_TIMEOUT_S")) {
    double s = 0;
    if (!parseDouble(v, &s) || s <= 0)
      return failf(Status::kInvalidArgument, "ARFUSION_TIMEOUT_S='%s' is not a positive number of seconds", v);
    c->timeout_seconds = s;
  }
  if (const char* v = env("ARFUSION_MAX_BLOCKS")) {
    double n = 0;
    if (!parseDouble(v, &n) || n < 0 || n > 1 << 20 || n != static_cast<int>(n))
      return failf(Status::kInvalidArgument, "ARFUSION_MAX_BLOCKS='%s' is not a whole number >= 0", v);
    c->max_blocks = static_cast<int>(n);
  }
  if (const char* v = env("ARFUSION_TUNING_FILE")) {
    *tuning_file_storage = v;
    c->tuning_file = tuning_file_storage->c_str();
  }
  if (const char* v = env("ARFUSION_SELF_CHECK")) {
    if (!parseZeroOne(v, &c->self_check))
      return failf(Status::kInvalidArgument, "ARFUSION_SELF_CHECK='%s' is not 0 or 1", v);
  }
  return Status::kSuccess;
}

Status twoShotSplitFromEnv(const EnvLookup& env, bool* split) {
  *split = true;
  if (const char* v = env("ARFUSION_TWO_SHOT_SPLIT")) {
    if (!parseZeroOne(v, split))
      return failf(Status::kInvalidArgument, "ARFUSION_TWO_SHOT_SPLIT='%s' is not 0 or 1", v);
  }
  return Status::kSuccess;
}

LogLevel processLogLevel() {
  static const LogLevel level = [] {
    const char* v = std::getenv("ARFUSION_LOG");
    if (!v) return LogLevel::kWarn;
    if (!std::strcmp(v, "error")) return LogLevel::kError;
    if (!std::strcmp(v, "info")) return LogLevel::kInfo;
    if (!std::strcmp(v, "debug")) return LogLevel::kDebug;
    // Not a commCreate failure (logging is per process, read at the first message): said once.
    if (std::strcmp(v, "warn")) std::fprintf(stderr, "arfusion: ARFUSION_LOG='%s' is not error, warn, info or debug; using warn\n", v);
    return LogLevel::kWarn;
  }();
  return level;
}

}  // namespace arfusion::detail
