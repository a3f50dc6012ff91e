#include "names.h"

#include <cstdio>
#include <cstring>

namespace arfusion {

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

const char* toString(QuantFormat f) {
  switch (f) {
    case QuantFormat::kNone: return "none";
    case QuantFormat::kFp8: return "fp8";
    case QuantFormat::kFp8PerToken: return "fp8-token";
    case QuantFormat::kFp8PerGroup: return "fp8-group";
    case QuantFormat::kNvfp4: return "nvfp4";
  }
  return "unknown";
}

const char* toString(ScaleLayout l) {
  switch (l) {
    case ScaleLayout::kLinear: return "linear";
    case ScaleLayout::kColumnMajor: return "column-major";
    case ScaleLayout::kUE8M0Packed: return "ue8m0-packed";
    case ScaleLayout::kSwizzled128x4: return "swizzled-128x4";
  }
  return "unknown";
}

namespace detail {

const char* toString(LinkType l) {
  switch (l) {
    case LinkType::kSingleRank: return "single-rank";
    case LinkType::kSameDevice: return "same-device";
    case LinkType::kNVLink: return "nvlink";
    case LinkType::kPCIe: return "pcie";
  }
  return "unknown";
}

std::string topoKey(const Topology& t) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "sm%d%d/%s/%d ranks", t.cc_major, t.cc_minor, toString(t.link), t.world);
  return buf;
}

bool parseStrategy(const char* t, Strategy* out) {
  for (Strategy s : {Strategy::kAuto, Strategy::kOneShot, Strategy::kTwoShot, Strategy::kNccl})
    if (!std::strcmp(t, arfusion::toString(s))) return *out = s, true;
  return false;
}

bool parseSyncMode(const char* t, SyncMode* out) {
  for (SyncMode m : {SyncMode::kAuto, SyncMode::kGridDependency, SyncMode::kFlagBarrier})
    if (!std::strcmp(t, arfusion::toString(m))) return *out = m, true;
  return false;
}

}  // namespace detail
}  // namespace arfusion
