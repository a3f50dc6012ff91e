#include "validate.h"

#include <cmath>
#include <cstdint>

#include <algorithm>
#include <string>

#include "errors.h"
#include "kernels/quant.h"
#include "plan.h"
#include "quant.h"

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

// The tensors an op touches, inputs first (at most kMaxSpans). The extended epilogue lists those
// present: its residuals and norm_out may be null, and it adds the quantized values, the scales and
// the scale it reads.
constexpr int kMaxSpans = 8;
int spans(const RowArgs& a, DType dtype, Span* out) {
  const size_t t = static_cast<size_t>(a.tokens * a.hidden) * elemSize(dtype);
  const size_t g = static_cast<size_t>(a.hidden) * elemSize(dtype);
  int n = 0;
  out[n++] = {"input", a.input, t};
  if (a.ext) {
    if (a.residual_in) out[n++] = {"residual_in", a.residual_in, t};
    if (a.residual_out) out[n++] = {"residual_out", a.residual_out, t};
    out[n++] = {"gamma", a.gamma, g};
    if (a.out) out[n++] = {"norm_out", a.out, t};
    if (a.quant != kQuantNone) {
      size_t values = 0, scales = 0;
      quantSizes(static_cast<QuantFormat>(a.quant), static_cast<ScaleLayout>(a.scale_layout), a.tokens, a.hidden, &values, &scales);
      out[n++] = {"quant.values", a.q_out, values};
      if (scales) out[n++] = {"quant.scales", a.q_scales, scales};
      if (a.quant == kQuantFp8 || a.quant == kQuantNvfp4) out[n++] = {"quant.scale", a.q_scale_in, sizeof(float)};
    }
    return n;
  }
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

bool isOutput(const std::string& name) {
  return name == "out" || name == "residual_out" || name == "norm_out" || name == "quant.values" || name == "quant.scales";
}

bool allowedAlias(const Span& a, const Span& b, bool input_may_be_out) {
  if (a.p != b.p || a.bytes != b.bytes) return false;
  const std::string x = a.name, y = b.name;
  auto pair = [&](const char* u, const char* v) { return (x == u && y == v) || (x == v && y == u); };
  return pair("residual_in", "residual_out") || pair("input", "out") || (input_may_be_out && pair("input", "norm_out"));
}

// The elements' own alignment of each span (the quantized outputs: bytes, words of scales).
size_t spanAlign(const Span& s, size_t elem) {
  const std::string name = s.name;
  if (name == "quant.values") return 16;
  if (name == "quant.scales" || name == "quant.scale") return 4;
  return elem;
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
  if (a.ext) {
    if (a.op != Op::kAllReduceAddRMSNorm) return fail(Status::kInvalidArgument, "NormArgs options apply to the fused norm op only");
    if (!a.residual_out && !a.out && a.quant == kQuantNone)
      return fail(Status::kInvalidArgument, "the call has no output (residual_out, norm_out and quant.values are all null)");
  }
  Span s[kMaxSpans];
  const int n = spans(a, dtype, s);
  // Every element access, the scalar path's included, needs the element's own alignment: a
  // misaligned address would be a sticky device fault that ends the process's CUDA context.
  const size_t elem = elemSize(dtype);
  for (int i = 0; i < n; ++i) {
    if (!s[i].p) return failf(Status::kInvalidArgument, "%s is null", s[i].name);
    const size_t align = spanAlign(s[i], elem);
    if (reinterpret_cast<uintptr_t>(s[i].p) % align != 0)
      return failf(Status::kInvalidArgument, "%s (%p) is not aligned to %zu bytes", s[i].name, s[i].p, align);
  }
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j) {
      if (!overlap(s[i], s[j]) || allowedAlias(s[i], s[j], input_may_be_out)) continue;
      // Read-only tensors may overlap each other (gamma, say, inside an input); an output overlaps nothing.
      if (!isOutput(s[i].name) && !isOutput(s[j].name)) continue;
      return failf(Status::kInvalidArgument, "%s and %s overlap (only residual_out == residual_in, or out == input, may alias, exactly)",
                   s[i].name, s[j].name);
    }
  if (a.ext && !vectorizable(a, dtype))
    return fail(Status::kInvalidArgument, "NormArgs options need 16-byte aligned tensors (input, residuals, gamma, norm_out)");
  return Status::kSuccess;
}

Status normArgsToRow(const NormArgs& n, RowArgs* out) {
  if (n.version != kNormArgsVersion)
    return failf(Status::kInvalidArgument, "NormArgs::version is %u, this library expects %u", n.version, kNormArgsVersion);
  RowArgs a = makeRowArgs(Op::kAllReduceAddRMSNorm, n.input, n.residual_in, n.residual_out, n.gamma, n.norm_out, n.tokens,
                          n.hidden, n.eps);
  const QuantOut& q = n.quant;
  a.ext = !n.residual_in || !n.residual_out || !n.norm_out || n.gemma || q.format != QuantFormat::kNone;
  // A call without options is the plain op (its kernels as measured), whatever struct it came in.
  if (!a.ext) {
    *out = a;
    return Status::kSuccess;
  }
  if (static_cast<unsigned>(n.dtype) > 2) return failf(Status::kInvalidArgument, "dtype %d is not fp16, bf16 or fp32", int(n.dtype));
  size_t values = 0, scales = 0;
  ARF_TRY(quantSizes(q.format, q.layout, std::max<int64_t>(n.tokens, 1), std::max<int64_t>(n.hidden, 1), &values, &scales));
  if (q.pow2_scales && q.format != QuantFormat::kFp8PerGroup)
    return failf(Status::kInvalidArgument, "quant.pow2_scales applies to fp8-group only (format %s)", toString(q.format));
  const size_t row_bytes = static_cast<size_t>(std::max<int64_t>(n.hidden, 0)) * elemSize(n.dtype);
  if (row_bytes > size_t(kThreads) * kMaxVecPerThread * 16)
    return failf(Status::kInvalidArgument, "NormArgs options need rows of at most %d elements (%d fp32); hidden is %lld",
                 kThreads * kMaxVecPerThread * 8, kThreads * kMaxVecPerThread * 4, (long long)n.hidden);
  if (row_bytes % 16 != 0)
    return failf(Status::kInvalidArgument, "NormArgs options need hidden * element size to be a multiple of 16 bytes (hidden %lld, %s)",
                 (long long)n.hidden, toString(n.dtype));
  a.gemma = n.gemma;
  a.quant = static_cast<uint8_t>(q.format);
  a.scale_layout = static_cast<uint8_t>(q.layout);
  a.pow2_scales = q.pow2_scales;
  a.q_out = q.values;
  a.q_scales = scales ? q.scales : nullptr;
  a.q_scale_in = q.format == QuantFormat::kFp8 || q.format == QuantFormat::kNvfp4 ? q.scale : nullptr;
  a.scale_rows = scaleRows(a.scale_layout, n.tokens);
  a.scale_cols = roundUp(n.hidden / kNvfp4BlockSize, 4);
  a.q_tokens = n.tokens;
  *out = a;
  return Status::kSuccess;
}

bool vectorizable(const RowArgs& a, DType dtype) {
  if ((static_cast<size_t>(a.hidden) * elemSize(dtype)) % 16 != 0) return false;
  Span s[kMaxSpans];
  const int n = spans(a, dtype, s);
  for (int i = 0; i < n; ++i)
    if (std::string(s[i].name).rfind("quant.", 0) != 0 && reinterpret_cast<uintptr_t>(s[i].p) % 16 != 0) return false;
  return true;
}

Status validatePointers(const RowArgs& a, DType dtype, int device) {
  Span s[kMaxSpans];
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
