// The host side of the quantized outputs: which format and layout combinations exist, the sizes of
// their buffers (kernels/quant.h has the formats and layouts themselves).
#pragma once

#include <cstddef>
#include <cstdint>

#include "arfusion/arfusion.h"

namespace arfusion::detail {

// Bytes of the values and of the scales of `tokens` x `hidden` in format and layout, or
// kInvalidArgument with the reason (a layout of another format, hidden not a multiple of the
// format's group, a bad enum value).
Status quantSizes(QuantFormat format, ScaleLayout layout, int64_t tokens, int64_t hidden, size_t* values, size_t* scales);

}  // namespace arfusion::detail
