#include "quant_ref.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/quant.h"
#include "reference.h"

namespace arftest {
using namespace arfusion::detail;

namespace {
// Nearest code of a format whose non-negative codes 0..max_code have values value(c) (increasing),
// ties to the even code, saturating at max_code; `sign` the sign bit's value.
template <typename Value>
uint8_t nearest(double x, int max_code, uint8_t sign, Value value) {
  const double a = std::fabs(x);
  // Saturate first: far above the largest value the distances round to the same double.
  if (a >= value(max_code)) return static_cast<uint8_t>((std::signbit(x) ? sign : 0) | max_code);
  int best = 0;
  for (int c = 1; c <= max_code; ++c) {
    const double d = std::fabs(value(c) - a), db = std::fabs(value(best) - a);
    if (d < db || (d == db && (c & 1) == 0)) best = c;
  }
  return static_cast<uint8_t>((std::signbit(x) ? sign : 0) | best);
}
}  // namespace

std::vector<QuantCase> everyQuantCase() {
  using arfusion::QuantFormat;
  using arfusion::ScaleLayout;
  return {{QuantFormat::kFp8, ScaleLayout::kLinear, false, 0.02f},
          {QuantFormat::kFp8PerToken, ScaleLayout::kLinear},
          {QuantFormat::kFp8PerGroup, ScaleLayout::kLinear},
          {QuantFormat::kFp8PerGroup, ScaleLayout::kLinear, true},
          {QuantFormat::kFp8PerGroup, ScaleLayout::kColumnMajor},
          {QuantFormat::kFp8PerGroup, ScaleLayout::kUE8M0Packed},
          {QuantFormat::kNvfp4, ScaleLayout::kLinear, false, 224.f},
          {QuantFormat::kNvfp4, ScaleLayout::kSwizzled128x4, false, 224.f}};
}

uint8_t e4m3Nearest(double x) {
  if (std::isnan(x)) return std::signbit(x) ? 0xff : 0x7f;
  if (std::isinf(x)) return std::signbit(x) ? 0xfe : 0x7e;
  return nearest(x, 0x7e, 0x80, [](int c) {
    const int e = c >> 3, m = c & 7;
    return e == 0 ? m / 512.0 : std::ldexp(1.0 + m / 8.0, e - 7);
  });
}

uint8_t e2m1Nearest(double x) {
  if (std::isnan(x)) return 0x7;
  if (std::isinf(x)) return std::signbit(x) ? 0xf : 0x7;
  static const double mag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  return nearest(x, 7, 0x8, [](int c) { return mag[c]; });
}

std::vector<float> conversionSample(size_t random_count, uint64_t seed) {
  std::vector<float> v;
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    __nv_bfloat16 bf;
    __half hf;
    std::memcpy(static_cast<void*>(&bf), &h, 2);
    std::memcpy(static_cast<void*>(&hf), &h, 2);
    v.push_back(__bfloat162float(bf));
    v.push_back(__half2float(hf));
  }
  auto around = [&](float x) {
    for (float y : {x, std::nextafter(x, 0.f), std::nextafter(x, 1e30f)}) v.push_back(y), v.push_back(-y);
  };
  for (int c = 0; c < 0x7e; ++c) around(0.5f * (e4m3ToFloat(uint8_t(c)) + e4m3ToFloat(uint8_t(c + 1))));  // E4M3 ties
  for (int c = 0; c <= 0x7e; ++c) around(e4m3ToFloat(uint8_t(c)));
  for (float t : {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.f, 6.f, 7.f, 448.f, 464.f, 480.f, 1e30f}) around(t);
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {0.f, inf, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min(),
                  std::numeric_limits<float>::min(), std::numeric_limits<float>::max()})
    v.push_back(x), v.push_back(-x);
  std::mt19937 rng(static_cast<uint32_t>(seed));
  for (size_t i = 0; i < random_count; ++i) {
    const uint32_t b = rng();
    float x;
    std::memcpy(&x, &b, 4);
    v.push_back(x);
  }
  return v;
}

void expectedQuant(const QuantCase& q, const std::vector<uint8_t>& norm, int64_t tokens, int64_t hidden, arfusion::DType d,
                   std::vector<uint8_t>* values, std::vector<uint8_t>* scales) {
  using arfusion::QuantFormat;
  using arfusion::ScaleLayout;
  size_t vb = 0, sb = 0;
  arfusion::quantBufferBytes(q.format, q.layout, tokens, hidden, &vb, &sb);
  values->assign(vb, 0);
  scales->assign(sb, 0);  // the padding of tiled layouts is zeros
  const int64_t rows = scaleRows(static_cast<uint8_t>(q.layout), tokens);
  auto x = [&](int64_t t, int64_t h) { return static_cast<float>(toDouble(norm.data(), size_t(t * hidden + h), d)); };
  auto putF = [&](size_t idx, float v) { std::memcpy(scales->data() + 4 * idx, &v, 4); };
  for (int64_t t = 0; t < tokens; ++t) {
    if (q.format == QuantFormat::kNvfp4) {
      for (int64_t b = 0; b < hidden / kNvfp4BlockSize; ++b) {
        float m = 0.f;
        bool nan = false;
        for (int j = 0; j < kNvfp4BlockSize; ++j) {
          const float v = x(t, b * 16 + j);
          m = std::fmax(m, std::fabs(v)), nan |= std::isnan(v);
        }
        const Nvfp4Block blk = nvfp4Block(m, nan, q.scale);
        const size_t at = q.layout == ScaleLayout::kSwizzled128x4 ? size_t(swizzled128x4(t, b, roundUp(hidden / 16, 4)))
                                                                   : size_t(t * (hidden / 16) + b);
        (*scales)[at] = blk.sf;
        for (int j = 0; j < kNvfp4BlockSize; j += 2)
          (*values)[size_t((t * hidden + b * 16 + j) / 2)] =
              static_cast<uint8_t>(e2m1FromFloat(x(t, b * 16 + j) * blk.inv) | e2m1FromFloat(x(t, b * 16 + j + 1) * blk.inv) << 4);
      }
      continue;
    }
    // FP8: the scale of each element's row or group.
    float row_scale = q.scale;
    if (q.format == QuantFormat::kFp8PerToken) {
      float m = 0.f;
      for (int64_t h = 0; h < hidden; ++h) m = std::fmax(m, std::fabs(x(t, h)));
      row_scale = fp8Scale(m, false);
      putF(size_t(t), row_scale);
    }
    for (int64_t h0 = 0; h0 < hidden; h0 += kFp8GroupSize) {
      float s = row_scale;
      if (q.format == QuantFormat::kFp8PerGroup) {
        const int64_t g = h0 / kFp8GroupSize, groups = hidden / kFp8GroupSize;
        float m = 0.f;
        for (int j = 0; j < kFp8GroupSize; ++j) m = std::fmax(m, std::fabs(x(t, h0 + j)));
        s = fp8Scale(m, q.pow2 || q.layout == ScaleLayout::kUE8M0Packed);
        if (q.layout == ScaleLayout::kUE8M0Packed) (*scales)[size_t(4 * ((g / 4) * rows + t) + g % 4)] = ue8m0Byte(s);
        else if (q.layout == ScaleLayout::kColumnMajor) putF(size_t(g * rows + t), s);
        else putF(size_t(t * groups + g), s);
      }
      const float inv = fp8Inverse(s);
      for (int64_t h = h0; h < std::min(hidden, h0 + kFp8GroupSize); ++h) (*values)[size_t(t * hidden + h)] = e4m3FromFloat(x(t, h) * inv);
    }
  }
}

namespace {
// The dequantization factor of element (t, h): what its code is multiplied by.
double factor(const QuantCase& q, const std::vector<uint8_t>& scales, int64_t tokens, int64_t hidden, int64_t t, int64_t h) {
  using arfusion::QuantFormat;
  using arfusion::ScaleLayout;
  const int64_t rows = scaleRows(static_cast<uint8_t>(q.layout), tokens);
  auto getF = [&](size_t idx) {
    float v;
    std::memcpy(&v, scales.data() + 4 * idx, 4);
    return double(v);
  };
  switch (q.format) {
    case QuantFormat::kFp8: return q.scale;
    case QuantFormat::kFp8PerToken: return getF(size_t(t));
    case QuantFormat::kFp8PerGroup: {
      const int64_t g = h / kFp8GroupSize;
      if (q.layout == ScaleLayout::kUE8M0Packed) return std::ldexp(1.0, int(scales[size_t(4 * ((g / 4) * rows + t) + g % 4)]) - 127);
      if (q.layout == ScaleLayout::kColumnMajor) return getF(size_t(g * rows + t));
      return getF(size_t(t * (hidden / kFp8GroupSize) + g));
    }
    case QuantFormat::kNvfp4: {
      const int64_t b = h / kNvfp4BlockSize;
      const size_t at = q.layout == ScaleLayout::kSwizzled128x4 ? size_t(swizzled128x4(t, b, roundUp(hidden / 16, 4)))
                                                                 : size_t(t * (hidden / 16) + b);
      return double(e4m3ToFloat(scales[at])) / q.scale;
    }
    default: return 0;
  }
}
}  // namespace

double dequantized(const QuantCase& q, const std::vector<uint8_t>& values, const std::vector<uint8_t>& scales, int64_t tokens,
                   int64_t hidden, int64_t t, int64_t h) {
  const double f = factor(q, scales, tokens, hidden, t, h);
  if (q.format == arfusion::QuantFormat::kNvfp4) {
    const uint8_t byte = values[size_t((t * hidden + h) / 2)];
    return e2m1ToFloat(h % 2 ? byte >> 4 : byte & 15) * f;
  }
  return e4m3ToFloat(values[size_t(t * hidden + h)]) * f;
}

double quantErrorBound(const QuantCase& q, const std::vector<uint8_t>& scales, int64_t tokens,
                       int64_t hidden, int64_t t, int64_t h, double x) {
  const double f = factor(q, scales, tokens, hidden, t, h);
  const double y = std::fabs(x) / f;  // the value the code rounds
  // E2M1: half a step (0.25 below 2, a relative 1/4 above), or the distance to 6 where the value
  // saturates: a block whose scale saturated at E4M3's 448 (its absmax above 448 * 6 / global scale).
  if (q.format == arfusion::QuantFormat::kNvfp4) return (std::max({0.25, y / 4, y - 6.0}) + 1e-6) * f;
  // E4M3: half a step (a relative 2^-4 for normals, 2^-10 absolute below 2^-6), or the distance to
  // 448 where the value saturates; plus the rounding of x * (1 / scale) in fp32.
  const double half = y < std::ldexp(1.0, -6) ? std::ldexp(1.0, -10) : y * std::ldexp(1.0, -4);
  return (std::max(half, y - 448.0) + y * 1e-6) * f;
}

}  // namespace arftest
