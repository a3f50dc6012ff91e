// Argument validation of the public calls. validateArgs is pure (no CUDA), so the CPU tests cover
// every rule; validatePointers asks the CUDA driver where each pointer lives.
#pragma once

#include "arfusion/arfusion.h"
#include "kernels/kernels.h"

namespace arfusion::detail {

constexpr int64_t kMaxHidden = 65536;

// Nulls, shape, dtype, eps, aliasing. Sets lastError() and returns kInvalidArgument on failure.
// input_may_be_out: the single-GPU addRMSNorm lets x (input) be norm_out, exactly.
Status validateArgs(const RowArgs& args, DType dtype, bool input_may_be_out = false);
// The RowArgs of a NormArgs call: the plain op where no option is used, else the extended epilogue
// (RowArgs::ext) after the options' own checks (the format and layout, the vector path, rows in
// registers); validateArgs checks the rest.
Status normArgsToRow(const NormArgs& args, RowArgs* out);
// True if every pointer the op uses is 16-byte aligned and a row is a whole number of 16-byte packs.
bool vectorizable(const RowArgs& args, DType dtype);
// Every pointer the op uses is device memory of `device`. Not called while the stream is being
// captured (pointer queries are not capture-safe): validate shapes eagerly once before capturing.
Status validatePointers(const RowArgs& args, DType dtype, int device);
// The stream is valid and belongs to `device`; *capturing tells whether it is being captured.
Status validateStream(cudaStream_t stream, int device, bool* capturing);

}  // namespace arfusion::detail
