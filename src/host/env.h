// Every ARFUSION_* environment variable, read in this one place (docs/api.md, "Environment").
#pragma once

#include <functional>
#include <string>

#include "arfusion/arfusion.h"
#include "errors.h"

namespace arfusion::detail {

// Looks a variable up (std::getenv in production, a map in tests). Returns nullptr if unset.
using EnvLookup = std::function<const char*(const char*)>;
EnvLookup processEnv();

// One row per variable: its name and what it sets. docs/api.md lists the same.
struct EnvVar {
  const char* name;
  const char* help;
};
extern const EnvVar kEnvVars[];
extern const int kNumEnvVars;

// Applies the ARFUSION_* overrides to `config` (Config::read_env must be true to call this).
// A malformed value is an error (kInvalidArgument naming the variable and the accepted values),
// never silently ignored. `tuning_file_storage` owns the string config->tuning_file points at.
Status applyEnv(const EnvLookup& env, Config* config, std::string* tuning_file_storage);

// ARFUSION_TWO_SHOT_SPLIT: a diagnostic switch, not a Config field, so commCreate reads it whatever
// Config::read_env says (the compute-sanitizer tests set it for tests that keep read_env false). *split is true unless the variable is "0"; a value other than 0 or 1 is
// kInvalidArgument. It changes how one block schedules its own steps, not what it signals or waits
// for (twoshot.cuh), so ranks may differ and still agree.
Status twoShotSplitFromEnv(const EnvLookup& env, bool* split);

// ARFUSION_LOG=error|warn|info|debug (default warn), read once per process.
LogLevel processLogLevel();

}  // namespace arfusion::detail
