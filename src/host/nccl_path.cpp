// The NCCL path (docs/design.md, "Strategies"): ncclAllReduce into the output, then the shared
// add-RMSNorm epilogue in place. Always available where the group has an NCCL communicator.
#include "nccl_path.h"

#include <algorithm>
#include <type_traits>

#include "communicator.h"
#include "errors.h"
#include "plan.h"

namespace arfusion::detail {
namespace {

ncclDataType_t ncclType(DType d) {
  switch (d) {
    case DType::kFloat16: return ncclFloat16;
    case DType::kBFloat16: return ncclBfloat16;
    case DType::kFloat32: return ncclFloat32;
  }
  return ncclFloat32;
}

// An offset pointer, null where the tensor is absent.
template <typename P>
P* offset(P* p, size_t bytes) {
  using Byte = std::conditional_t<std::is_const_v<P>, const char, char>;
  return p ? reinterpret_cast<P*>(reinterpret_cast<Byte*>(p) + bytes) : nullptr;
}

// allReduceAdd, and the extended norm op without norm_out: the sum goes to residual_out, or, in
// place (residual_out == residual_in, which the sum must not overwrite before the add has read it)
// or without residual_out, to the scratch buffer. Every case goes in the same chunks of at most
// scratch_bytes, so that the NCCL calls are the same on every rank whether or not ranks agree on
// aliasing (NCCL would pair calls of different counts). A failure does not stop the loop: the
// peers' NCCL calls of the later chunks, which have no timeout, would wait for this rank's forever.
// Every chunk's allreduce is issued and the first failure is returned at the end.
Status chunked(Communicator* c, const RowArgs& a, DType dtype, bool vector, cudaStream_t stream) {
  const bool into_scratch = !a.residual_out || a.residual_out == a.residual_in;
  const size_t row_bytes = static_cast<size_t>(a.hidden) * elemSize(dtype);
  const int64_t rows_per_chunk = static_cast<int64_t>(c->scratch_bytes / row_bytes);
  ncclResult_t reduced = ncclSuccess;
  cudaError_t launched = cudaSuccess;
  for (int64_t r0 = 0; r0 < a.tokens; r0 += rows_per_chunk) {
    const int64_t rows = std::min(rows_per_chunk, a.tokens - r0);
    const size_t off = static_cast<size_t>(r0) * row_bytes;
    void* sum = into_scratch ? c->scratch : offset(a.residual_out, off);
    const ncclResult_t e = ncclAllReduce(offset(a.input, off), sum, static_cast<size_t>(rows * a.hidden), ncclType(dtype),
                                         ncclSum, c->nccl, stream);
    if (reduced == ncclSuccess) reduced = e;
    RowArgs b = a;
    b.input = sum;
    b.residual_in = offset(a.residual_in, off);
    b.residual_out = offset(a.residual_out, off);
    b.tokens = rows;
    b.q_row0 = a.q_row0 + r0;  // the quantized outputs keep the call's rows
    if (launched == cudaSuccess && reduced == ncclSuccess)
      launched = launchAddRMSNorm(b, dtype, vector && (reinterpret_cast<uintptr_t>(sum) % 16 == 0), stream);
  }
  if (reduced != ncclSuccess) return failf(Status::kNcclError, "ncclAllReduce failed: %s", ncclGetErrorString(reduced));
  if (launched != cudaSuccess)
    return failf(Status::kCudaError, "launching the add-RMSNorm kernel failed: %s", cudaGetErrorString(launched));
  return Status::kSuccess;
}

}  // namespace

Status ncclPath(Communicator* c, const RowArgs& a, DType dtype, bool vector, cudaStream_t stream) {
  const size_t count = static_cast<size_t>(a.tokens * a.hidden);
  if (c->world == 1) {  // no communication: the epilogue straight from the input
    ARF_CUDA(launchAddRMSNorm(a, dtype, vector, stream));
    return Status::kSuccess;
  }
  const ncclDataType_t t = ncclType(dtype);
  switch (a.op) {
    case Op::kAllReduce:
      ARF_NCCL(ncclAllReduce(a.input, a.out, count, t, ncclSum, c->nccl, stream));
      return Status::kSuccess;
    case Op::kAllReduceAddRMSNorm: {
      if (!a.out) return chunked(c, a, dtype, vector, stream);  // the extended epilogue without norm_out
      ARF_NCCL(ncclAllReduce(a.input, a.out, count, t, ncclSum, c->nccl, stream));
      RowArgs b = a;
      b.input = a.out;  // reduce into norm_out, normalise in place
      ARF_CUDA(launchAddRMSNorm(b, dtype, vector, stream));
      return Status::kSuccess;
    }
    case Op::kAllReduceAdd:
      return chunked(c, a, dtype, vector, stream);
  }
  return fail(Status::kInternalError, "unknown op");
}

}  // namespace arfusion::detail
