#include "quant.h"

#include "errors.h"
#include "kernels/quant.h"

namespace arfusion::detail {

Status quantSizes(QuantFormat f, ScaleLayout l, int64_t tokens, int64_t hidden, size_t* values, size_t* scales) {
  const unsigned fi = static_cast<unsigned>(f), li = static_cast<unsigned>(l);
  if (fi > kQuantNvfp4) return failf(Status::kInvalidArgument, "quant format %d is not a QuantFormat", int(f));
  if (li > kLayoutSwizzled128x4) return failf(Status::kInvalidArgument, "scale layout %d is not a ScaleLayout", int(l));
  if (tokens < 1 || hidden < 1) return fail(Status::kInvalidArgument, "tokens and hidden must be >= 1");
  const bool ok_layout = f == QuantFormat::kFp8PerGroup ? l != ScaleLayout::kSwizzled128x4
                         : f == QuantFormat::kNvfp4     ? l == ScaleLayout::kLinear || l == ScaleLayout::kSwizzled128x4
                                                        : l == ScaleLayout::kLinear;
  if (!ok_layout)
    return failf(Status::kInvalidArgument, "scale layout %s cannot hold the scales of %s", toString(l), toString(f));
  if (f == QuantFormat::kNvfp4 && hidden % kNvfp4BlockSize != 0)
    return failf(Status::kInvalidArgument, "nvfp4 needs hidden to be a multiple of 16 (got %lld)", (long long)hidden);
  if (f == QuantFormat::kFp8PerGroup && hidden % kFp8GroupSize != 0)
    return failf(Status::kInvalidArgument, "fp8-group needs hidden to be a multiple of 128 (got %lld)", (long long)hidden);
  const int64_t rows = scaleRows(static_cast<uint8_t>(li), tokens);
  const int64_t groups = hidden / kFp8GroupSize, blocks = hidden / kNvfp4BlockSize;
  size_t v = 0, sc = 0;
  switch (f) {
    case QuantFormat::kNone: break;
    case QuantFormat::kFp8: v = size_t(tokens * hidden); break;
    case QuantFormat::kFp8PerToken: v = size_t(tokens * hidden), sc = 4 * size_t(tokens); break;
    case QuantFormat::kFp8PerGroup:
      v = size_t(tokens * hidden);
      sc = l == ScaleLayout::kUE8M0Packed ? 4 * size_t((groups + 3) / 4 * rows) : 4 * size_t(groups * rows);
      break;
    case QuantFormat::kNvfp4:
      v = size_t(tokens * hidden / 2);
      sc = l == ScaleLayout::kSwizzled128x4 ? size_t(rows * roundUp(blocks, 4)) : size_t(tokens * blocks);
      break;
  }
  if (values) *values = v;
  if (scales) *scales = sc;
  return Status::kSuccess;
}

}  // namespace arfusion::detail
