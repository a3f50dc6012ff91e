#include "validate.h"

#include <cmath>
#include <cstdint>

#include "errors.h"
#include "plan.h"

namespace arfusion::detail {
namespace {

struct Span {
  const char* name;
  const void* p;
  size_t bytes;
};

bool overlap(const Span& a, const Span& b) {
  const auto x = reinterpret_cast<uintptr_t>(a.p), y = reinterpret_cast<uintptr_t>(b.p);
  return x < y + b.bytes && y < x + a.bytes;
}

// The tensors an op touches, inputs first.
int spans(const RowArgs& a, DType dtype, Span* out) {
  const size_t t = static_cast<size_t>(a.tokens * a.hidden) * elemSize(dtype);
  const size_t g = static_cast<size_t>(a.hidden) * elemSize(dtype);
  int n = 0;
  out[n++] = {"input", a.input, t};
  switch (a.op) {
    case Op::kAllReduce:
      out[n++] = {"out", a.out, t};
      break;
    case Op::kAllReduceAdd:
      out[n++] = {"residual_in", a.residual_in, t};
      out[n++] = {"residual_out", a.residual_out, t};
      break;
    case Op::kAllReduceAddRMSNorm:
      out[n++] = {"residual_in", a.residual_in, t};
      out[n++] = {"residual_out", a.residual_out, t};
      out[n++] = {"gamma", a.gamma, g};
      out[n++] = {"norm_out", a.out, t};
      break;
  }
  return n;
}

bool allowedAlias(const Span& a, const Span& b, bool input_may_be_out) {
  if (a.p != b.p || a.bytes != b.bytes) return false;
  const std::string x = a.name, y = b.name;
  auto pair = [&](const char* u, const char* v) { return (x == u && y == v) || (x == v && y == u); };
  return pair("residual_in", "residual_out") || pair("input", "out") || (input_may_be_out && pair("input", "norm_out"));
}

}  // namespace

Status validateArgs(const RowArgs& a, DType dtype, bool input_may_be_out) {
  if (static_cast<unsigned>(dtype) > 2) return failf(Status::kInvalidArgument, "dtype %d is not fp16, bf16 or fp32", int(dtype));
  if (static_cast<unsigned>(a.op) > 2) return failf(Status::kInvalidArgument, "op %d is not valid", int(a.op));
  if (a.tokens < 1) return failf(Status::kInvalidArgument, "tokens must be >= 1 (got %lld)", (long long)a.tokens);
  if (a.hidden < 1 || a.hidden > kMaxHidden)
    return failf(Status::kInvalidArgument, "hidden must be in [1, %lld] (got %lld)", (long long)kMaxHidden, (long long)a.hidden);
  if (a.tokens > (int64_t(1) << 40) / a.hidden)
    return failf(Status::kInvalidArgument, "tokens x hidden = %lld x %lld is too large", (long long)a.tokens, (long long)a.hidden);
  if (a.op == Op::kAllReduceAddRMSNorm && !(a.eps >= 0.f && std::isfinite(a.eps)))
    return failf(Status::kInvalidArgument, "eps must be finite and >= 0 (got %g)", double(a.eps));
  Span s[5];
  const int n = spans(a, dtype, s);
  // Every element access, the scalar path's included, needs the element's own alignment: a
  // misaligned address would be a sticky device fault that ends the process's CUDA context.
  const size_t elem = elemSize(dtype);
  for (int i = 0; i < n; ++i) {
    if (!s[i].p) return failf(Status::kInvalidArgument, "%s is null", s[i].name);
    if (reinterpret_cast<uintptr_t>(s[i].p) % elem != 0)
      return failf(Status::kInvalidArgument, "%s (%p) is not aligned to its %zu-byte elements", s[i].name, s[i].p, elem);
  }
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j)
      if (overlap(s[i], s[j]) && !allowedAlias(s[i], s[j], input_may_be_out) && !(std::string(s[i].name) == "gamma" || std::string(s[j].name) == "gamma") )
        return failf(Status::kInvalidArgument, "%s and %s overlap (only residual_out == residual_in, or out == input, may alias, exactly)",
                     s[i].name, s[j].name);
  // gamma is read-only and small: it may overlap inputs but never an output.
  for (int i = 0; i < n; ++i) {
    if (std::string(s[i].name) != "gamma") continue;
    for (int j = 0; j < n; ++j) {
      const std::string nj = s[j].name;
      if ((nj == "residual_out" || nj == "norm_out") && overlap(s[i], s[j]))
        return failf(Status::kInvalidArgument, "gamma overlaps %s", s[j].name);
    }
  }
  return Status::kSuccess;
}

bool vectorizable(const RowArgs& a, DType dtype) {
  if ((static_cast<size_t>(a.hidden) * elemSize(dtype)) % 16 != 0) return false;
  Span s[5];
  const int n = spans(a, dtype, s);
  for (int i = 0; i < n; ++i)
    if (reinterpret_cast<uintptr_t>(s[i].p) % 16 != 0) return false;
  return true;
}

Status validatePointers(const RowArgs& a, DType dtype, int device) {
  Span s[5];
  const int n = spans(a, dtype, s);
  for (int i = 0; i < n; ++i) {
    cudaPointerAttributes attr{};
    const cudaError_t e = cudaPointerGetAttributes(&attr, s[i].p);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return failf(Status::kInvalidArgument, "%s (%p) is not a CUDA pointer: %s", s[i].name, s[i].p, cudaGetErrorString(e));
    }
    const bool device_mem = attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
    if (!device_mem)
      return failf(Status::kInvalidArgument, "%s (%p) is host memory; arfusion needs device memory", s[i].name, s[i].p);
    if (attr.type == cudaMemoryTypeDevice && attr.device != device)
      return failf(Status::kInvalidArgument, "%s is on device %d, the communicator is on device %d", s[i].name, attr.device, device);
  }
  return Status::kSuccess;
}

Status validateStream(cudaStream_t stream, int device, bool* capturing) {
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  cudaError_t e = cudaStreamIsCapturing(stream, &cs);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return failf(Status::kInvalidArgument, "stream is not valid: %s", cudaGetErrorString(e));
  }
  *capturing = cs != cudaStreamCaptureStatusNone;
  // During capture the driver refuses device queries on the stream (and a refused call would
  // invalidate the capture): launches onto a stream of another device fail the capture instead.
  if (*capturing) return Status::kSuccess;
  int sdev = -1;
  e = cudaStreamGetDevice(stream, &sdev);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return failf(Status::kInvalidArgument, "stream is not valid: %s", cudaGetErrorString(e));
  }
  if (sdev != device)
    return failf(Status::kInvalidArgument, "stream belongs to device %d, the communicator to device %d", sdev, device);
  return Status::kSuccess;
}

}  // namespace arfusion::detail
