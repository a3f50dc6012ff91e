// Host references of the quantized outputs (tests only).
//   * e4m3Nearest / e2m1Nearest: fp64 -> code by searching every code of the format for the nearest
//     value, ties to the even code, saturating: independent of the library's bit arithmetic
//     (src/kernels/quant.h), against which they are compared on every bf16 and fp16 value.
//   * expectedQuant: the bytes a call must write (values, and the whole scale buffer with its
//     zero padding) from the norm_out it wrote, by the recipe of docs/design.md, "Quantized outputs".
//   * dequantized: a row's values back in fp64, for the error bound against norm_out.
// And one adapter that is not a reference: e2m1BytesOfPairAndSwap calls the library's four-value
// E2M1 conversion the way the epilogue does, so that the CPU and device tests check that one call.
#pragma once

#include <cstdint>
#include <vector>

#include "arfusion/arfusion.h"
#include "kernels/quant.h"

namespace arftest {

// The E2M1 bytes of values a, b, b, a by the epilogue's four-value conversion (two
// e2m1MagnitudeLanes words, signs from e2m1PairSigns, e2m1Bytes), valid where |a|, |b| < 7. The CPU
// and device conversion tests compare it with the pair conversion, each sample value beside its
// neighbour: every value of the sample as the low and as the high value of a pair.
ARF_HD uint16_t e2m1BytesOfPairAndSwap(float a, float b) {
  using namespace arfusion::detail;
  return e2m1Bytes(e2m1MagnitudeLanes(fabsf(a), fabsf(b)), e2m1MagnitudeLanes(fabsf(b), fabsf(a)), e2m1PairSigns(a, b),
                   e2m1PairSigns(b, a));
}

uint8_t e4m3Nearest(double x);
uint8_t e2m1Nearest(double x);
// Inputs for the conversion tests: every bf16 and every fp16 value, every tie and its neighbours of
// both formats, NaN, infinities, -0.0, fp32 subnormals, values around 448 and 6, and a random
// sample of fp32 bit patterns.
std::vector<float> conversionSample(size_t random_count, uint64_t seed);

struct QuantCase {
  arfusion::QuantFormat format = arfusion::QuantFormat::kNone;
  arfusion::ScaleLayout layout = arfusion::ScaleLayout::kLinear;
  bool pow2 = false;
  float scale = 1.f;  // kFp8: the static scale; kNvfp4: the global scale
};

// Every format and every layout it accepts, with a static FP8 scale that saturates a few values
// (norm values reach ~10, 10 / 0.02 > 448) and NVFP4's usual global scale (448 * 6 / amax, amax ~12).
std::vector<QuantCase> everyQuantCase();

// norm: the row-major [tokens x hidden] normalised values as norm_out holds them (dtype d).
void expectedQuant(const QuantCase& q, const std::vector<uint8_t>& norm, int64_t tokens, int64_t hidden, arfusion::DType d,
                   std::vector<uint8_t>* values, std::vector<uint8_t>* scales);
// Element (t, h) of the quantized output, dequantized.
double dequantized(const QuantCase& q, const std::vector<uint8_t>& values, const std::vector<uint8_t>& scales, int64_t tokens,
                   int64_t hidden, int64_t t, int64_t h);
// The largest error allowed between dequantized(t, h) and the normalised value x it came from.
double quantErrorBound(const QuantCase& q, const std::vector<uint8_t>& scales, int64_t tokens,
                       int64_t hidden, int64_t t, int64_t h, double x);

}  // namespace arftest
