// CPU tests: the quantized outputs' conversions against an independent reference, their scale
// layouts and buffer sizes, and the validation of NormArgs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>
#include <vector>

#include "arfusion/arfusion.h"
#include "host/validate.h"
#include "kernels/quant.h"
#include "quant_ref.h"

using namespace arfusion;
using namespace arfusion::detail;

// The library's bit arithmetic (as compiled for the host) against the nearest-code search, on every
// bf16 and fp16 value, every tie and its neighbours, the special values and 2^22 random fp32 bits.
TEST(Quant, ConversionsGiveTheNearestCodeTiesToEven) {
  const std::vector<float> sample = arftest::conversionSample(size_t(1) << 22, 2026);
  int64_t bad4 = 0, bad2 = 0;
  for (float x : sample) {
    if (e4m3FromFloat(x) != arftest::e4m3Nearest(x) && bad4++ < 5)
      ADD_FAILURE() << "e4m3(" << x << ") = " << int(e4m3FromFloat(x)) << ", nearest " << int(arftest::e4m3Nearest(x));
    if (e2m1FromFloat(x) != arftest::e2m1Nearest(x) && bad2++ < 5)
      ADD_FAILURE() << "e2m1(" << x << ") = " << int(e2m1FromFloat(x)) << ", nearest " << int(arftest::e2m1Nearest(x));
  }
  EXPECT_EQ(bad4, 0);
  EXPECT_EQ(bad2, 0);
  EXPECT_GT(sample.size(), size_t(1) << 22);
  // E2M1 two at a time (the epilogue's conversion where a block's scaled magnitudes are finite and
  // below kE2M1LanesLimit), each value beside its neighbour in the sample
  // (e2m1BytesOfPairAndSwap). Every such value must be covered, ties and their neighbours included.
  int64_t bad_lanes = 0, lanes = 0;
  for (size_t i = 0; i + 1 < sample.size(); ++i) {
    const float lo = sample[i], hi = sample[i + 1];
    if (!(std::fabs(lo) < kE2M1LanesLimit && std::fabs(hi) < kE2M1LanesLimit)) continue;
    const uint16_t got = arftest::e2m1BytesOfPairAndSwap(lo, hi);
    const uint16_t want = static_cast<uint16_t>(e2m1x2FromFloat(lo, hi) | e2m1x2FromFloat(hi, lo) << 8);
    ++lanes;
    if (got != want && bad_lanes++ < 5)
      ADD_FAILURE() << "e2m1 lanes(" << lo << ", " << hi << ") = " << got << ", pairs " << want;
  }
  EXPECT_EQ(bad_lanes, 0) << "of " << lanes;
  EXPECT_GT(lanes, int64_t(1) << 20);
  // Spot values of the formats' definitions.
  EXPECT_EQ(e4m3FromFloat(448.f), 0x7e);
  EXPECT_EQ(e4m3FromFloat(1e9f), 0x7e);
  EXPECT_EQ(e4m3FromFloat(-INFINITY), 0xfe);
  EXPECT_EQ(e4m3FromFloat(NAN) & 0x7f, 0x7f);
  EXPECT_EQ(e4m3FromFloat(-0.f), 0x80);
  EXPECT_EQ(e4m3FromFloat(1.f / 512), 0x01);  // the smallest subnormal
  EXPECT_EQ(e4m3FromFloat(1.f / 1024), 0x00);  // half of it: a tie, to even (0)
  EXPECT_EQ(e2m1FromFloat(0.75f), 0x2);        // a tie between 0.5 and 1: to even (1.0)
  EXPECT_EQ(e2m1FromFloat(-7.f), 0xf);
  EXPECT_EQ(e2m1FromFloat(-NAN), 0x7);         // E2M1 has no NaN: +6, whatever the sign
  EXPECT_EQ(e2m1FromFloat(1.25f), 0x2);        // ties to even from 1 up: 1.0, 2.0, 2.0, 4.0, 4.0
  EXPECT_EQ(e2m1FromFloat(1.75f), 0x4);
  EXPECT_EQ(e2m1FromFloat(2.5f), 0x4);
  EXPECT_EQ(e2m1FromFloat(3.5f), 0x6);
  EXPECT_EQ(e2m1FromFloat(5.f), 0x6);
  // The pair conversions the epilogue calls: the first value in the low byte (nibble).
  EXPECT_EQ(e4m3x2FromFloat(1.f, -448.f), 0xfe38);
  EXPECT_EQ(e2m1x2FromFloat(6.f, -0.5f), 0x97);
}

TEST(Quant, E4M3DecodesEveryCodeExactly) {
  for (int c = 0; c < 256; ++c) {
    const float v = e4m3ToFloat(uint8_t(c));
    if ((c & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(v)) << c;
      continue;
    }
    EXPECT_EQ(e4m3FromFloat(v), c) << c;
  }
  EXPECT_EQ(e4m3ToFloat(0x7e), 448.f);
}

TEST(Quant, ScalesOfTheDynamicFormats) {
  EXPECT_EQ(fp8Scale(0.f, false), kFp8MinScale);       // an all-zero row is defined
  EXPECT_EQ(fp8Scale(448.f, false), 1.f);
  EXPECT_EQ(fp8Scale(500.f, true), 2.f);               // 1.116 rounded up to a power of two
  EXPECT_EQ(fp8Scale(448.f * 4, true), 4.f);           // already one
  EXPECT_EQ(ue8m0Byte(4.f), 129);
  const Nvfp4Block b = nvfp4Block(6.f, false, 1.f);    // absmax 6, global 1: scale 1, factor 1
  EXPECT_EQ(b.sf, e4m3FromFloat(1.f));
  EXPECT_EQ(b.inv, 1.f);
  EXPECT_EQ(nvfp4Block(0.f, false, 100.f).inv, 0.f);   // an all-zero block
  EXPECT_EQ(nvfp4Block(1.f, true, 1.f).sf & 0x7f, 0x7f);  // a NaN block carries a NaN scale
}

// quotientBy<D> (the scales' absmax / 6 and absmax / 448) against the division: every mantissa of
// the binade [1, 2) (its fast path scales exactly to every binade inside [2^-64, 2^64], quant.h),
// the edge binades of that range, and 2^22 random bit patterns of either sign, NaN and infinities
// included.
template <int D>
void expectQuotientIsTheDivision() {
  int64_t bad = 0, checked = 0;
  auto check = [&](float a) {
    const float got = quotientBy<D>(a), want = a / static_cast<float>(D);
    ++checked;
    if (floatBits(got) != floatBits(want) && !(std::isnan(got) && std::isnan(want)) && bad++ < 5)
      ADD_FAILURE() << "quotientBy<" << D << ">(" << a << ") = " << got << ", a / " << D << " = " << want;
  };
  for (uint32_t m = 0; m < (1u << 23); ++m) check(bitsFloat(0x3f800000u | m));
  for (uint32_t m = 0; m < (1u << 23); m += 7) {
    check(bitsFloat((127u - 64) << 23 | m));  // [2^-64, 2^-63)
    check(bitsFloat((127u + 63) << 23 | m));  // [2^63, 2^64)
  }
  for (float a : {0.f, -0.f, 0x1p-64f, 0x1p64f, std::nextafter(0x1p-64f, 0.f), std::nextafter(0x1p64f, INFINITY), 1e-40f,
                  3.4e38f, INFINITY, -INFINITY, NAN, 6.f, 3.f, 1.f, 448.f, 448.f * 6})
    check(a);
  uint64_t x = 88172645463325252ull;  // xorshift64
  for (int i = 0; i < (1 << 22); ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    check(bitsFloat(static_cast<uint32_t>(x)));
  }
  EXPECT_EQ(bad, 0) << "of " << checked << " (D = " << D << ")";
}
TEST(Quant, QuotientsAreTheDivision) {
  expectQuotientIsTheDivision<6>();
  expectQuotientIsTheDivision<448>();
}

// Every (row, column) of a swizzled 128x4 buffer has its own byte, and all bytes are used.
TEST(Quant, Swizzled128x4IsABijection) {
  for (int64_t tokens : {1, 127, 128, 129, 300})
    for (int64_t hidden : {16, 48, 64, 4096, 5008}) {
      const int64_t rows = scaleRows(kLayoutSwizzled128x4, tokens), cols = roundUp(hidden / 16, 4);
      size_t values = 0, scales = 0;
      ASSERT_EQ(quantBufferBytes(QuantFormat::kNvfp4, ScaleLayout::kSwizzled128x4, tokens, hidden, &values, &scales), Status::kSuccess);
      ASSERT_EQ(scales, size_t(rows * cols));
      std::vector<bool> seen(scales, false);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          const int64_t at = swizzled128x4(r, c, cols);
          ASSERT_TRUE(at >= 0 && at < int64_t(scales) && !seen[size_t(at)]) << tokens << " x " << hidden << " (" << r << "," << c << ")";
          seen[size_t(at)] = true;
        }
    }
  // The tile's inner order: row r % 32 picks a 16-byte line, (r % 128) / 32 a word, c % 4 the byte.
  EXPECT_EQ(swizzled128x4(0, 0, 4), 0);
  EXPECT_EQ(swizzled128x4(0, 1, 4), 1);
  EXPECT_EQ(swizzled128x4(1, 0, 4), 16);
  EXPECT_EQ(swizzled128x4(32, 0, 4), 4);
  EXPECT_EQ(swizzled128x4(0, 4, 8), 512);
  EXPECT_EQ(swizzled128x4(128, 0, 8), 1024);
}

TEST(Quant, BufferSizesPerFormatAndLayout) {
  size_t v = 0, s = 0;
  ASSERT_EQ(quantBufferBytes(QuantFormat::kFp8, ScaleLayout::kLinear, 3, 4096, &v, &s), Status::kSuccess);
  EXPECT_EQ(v, 3u * 4096);
  EXPECT_EQ(s, 0u);
  ASSERT_EQ(quantBufferBytes(QuantFormat::kFp8PerToken, ScaleLayout::kLinear, 3, 4096, &v, &s), Status::kSuccess);
  EXPECT_EQ(s, 12u);
  ASSERT_EQ(quantBufferBytes(QuantFormat::kFp8PerGroup, ScaleLayout::kLinear, 3, 4096, &v, &s), Status::kSuccess);
  EXPECT_EQ(s, 3u * 32 * 4);
  ASSERT_EQ(quantBufferBytes(QuantFormat::kFp8PerGroup, ScaleLayout::kColumnMajor, 3, 4096, &v, &s), Status::kSuccess);
  EXPECT_EQ(s, 4u * 32 * 4);  // tokens rounded up to 4
  ASSERT_EQ(quantBufferBytes(QuantFormat::kFp8PerGroup, ScaleLayout::kUE8M0Packed, 5, 7168, &v, &s), Status::kSuccess);
  EXPECT_EQ(s, 8u * 14 * 4);  // 56 groups: 14 words per token, tokens rounded up to 8
  ASSERT_EQ(quantBufferBytes(QuantFormat::kNvfp4, ScaleLayout::kLinear, 3, 4096, &v, &s), Status::kSuccess);
  EXPECT_EQ(v, 3u * 2048);
  EXPECT_EQ(s, 3u * 256);
  ASSERT_EQ(quantBufferBytes(QuantFormat::kNvfp4, ScaleLayout::kSwizzled128x4, 3, 4112, &v, &s), Status::kSuccess);
  EXPECT_EQ(s, 128u * 260);  // 257 blocks rounded up to 260 columns, 3 tokens to 128 rows
  struct Bad {
    QuantFormat f;
    ScaleLayout l;
    int64_t hidden;
    const char* why;
  };
  for (const Bad& b : {Bad{QuantFormat::kNvfp4, ScaleLayout::kLinear, 4104, "multiple of 16"},
                       Bad{QuantFormat::kFp8PerGroup, ScaleLayout::kLinear, 4160, "multiple of 128"},
                       Bad{QuantFormat::kFp8PerToken, ScaleLayout::kColumnMajor, 4096, "cannot hold"},
                       Bad{QuantFormat::kFp8PerGroup, ScaleLayout::kSwizzled128x4, 4096, "cannot hold"},
                       Bad{QuantFormat::kNvfp4, ScaleLayout::kUE8M0Packed, 4096, "cannot hold"},
                       Bad{static_cast<QuantFormat>(9), ScaleLayout::kLinear, 4096, "not a QuantFormat"}}) {
    EXPECT_EQ(quantBufferBytes(b.f, b.l, 3, b.hidden, &v, &s), Status::kInvalidArgument) << b.why;
    EXPECT_NE(std::string(lastError()).find(b.why), std::string::npos) << lastError();
  }
}

// NormArgs: a call without options is the plain op; each bad option is refused with a reason.
namespace {
struct Mem {
  std::vector<char> bytes = std::vector<char>(size_t(8) << 20);
  char* at(size_t off) { return reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(bytes.data()) + 255) / 256 * 256) + off; }
};
NormArgs goodNormArgs(Mem& m, int64_t tokens = 4, int64_t hidden = 4096) {
  NormArgs a;
  const size_t t = size_t(tokens * hidden * 2);
  a.input = m.at(0), a.residual_in = m.at(t), a.residual_out = m.at(2 * t), a.gamma = m.at(3 * t), a.norm_out = m.at(4 * t);
  a.tokens = tokens, a.hidden = hidden;
  a.quant.values = m.at(5 * t);
  a.quant.scales = m.at(6 * t);
  a.quant.scale = reinterpret_cast<const float*>(m.at(7 * t));
  return a;
}
Status checkNorm(const NormArgs& n, RowArgs* a) {
  const Status st = normArgsToRow(n, a);
  return st != Status::kSuccess ? st : validateArgs(*a, n.dtype);
}
}  // namespace

TEST(Validate, NormArgsOptions) {
  Mem m;
  RowArgs a;
  NormArgs plain = goodNormArgs(m);
  plain.quant = QuantOut{};
  ASSERT_EQ(checkNorm(plain, &a), Status::kSuccess) << lastError();
  EXPECT_FALSE(a.ext);  // no option: the plain kernels
  NormArgs q = goodNormArgs(m);
  q.quant.format = QuantFormat::kNvfp4;
  q.quant.layout = ScaleLayout::kSwizzled128x4;
  ASSERT_EQ(checkNorm(q, &a), Status::kSuccess) << lastError();
  EXPECT_TRUE(a.ext);
  EXPECT_EQ(a.scale_rows, 128);
  EXPECT_EQ(a.scale_cols, 256);
  NormArgs only_q = q;
  only_q.norm_out = nullptr, only_q.residual_out = nullptr, only_q.residual_in = nullptr;
  EXPECT_EQ(checkNorm(only_q, &a), Status::kSuccess) << lastError();
  struct Case {
    const char* why;
    void (*mutate)(NormArgs&);
  };
  const Case cases[] = {
      {"version", [](NormArgs& n) { n.version = 99; }},
      {"quant.values is null", [](NormArgs& n) { n.quant.values = nullptr; }},
      {"quant.scales is null", [](NormArgs& n) { n.quant.scales = nullptr; }},
      {"quant.scale is null", [](NormArgs& n) { n.quant.scale = nullptr; }},
      {"multiple of 16", [](NormArgs& n) { n.hidden = 4104; }},
      {"cannot hold", [](NormArgs& n) { n.quant.layout = ScaleLayout::kColumnMajor; }},
      {"pow2_scales", [](NormArgs& n) { n.quant.pow2_scales = true; }},
      {"at most 16384", [](NormArgs& n) { n.hidden = 20480, n.tokens = 1; }},
      {"16-byte aligned", [](NormArgs& n) { n.input = static_cast<const char*>(n.input) + 2; }},
      {"not aligned to 16", [](NormArgs& n) { n.quant.values = static_cast<char*>(n.quant.values) + 4; }},
      {"no output", [](NormArgs& n) { n.norm_out = n.residual_out = nullptr, n.quant = QuantOut{}, n.gemma = true; }},
      {"overlap", [](NormArgs& n) { n.quant.values = n.norm_out; }},
      {"gamma is null", [](NormArgs& n) { n.gamma = nullptr; }},
  };
  for (const Case& c : cases) {
    NormArgs n = q;
    c.mutate(n);
    EXPECT_EQ(checkNorm(n, &a), Status::kInvalidArgument) << c.why;
    EXPECT_NE(std::string(lastError()).find(c.why), std::string::npos) << c.why << " vs " << lastError();
  }
  NormArgs group = goodNormArgs(m);
  group.quant.format = QuantFormat::kFp8PerGroup;
  group.hidden = 4160;
  EXPECT_EQ(checkNorm(group, &a), Status::kInvalidArgument);
  EXPECT_NE(std::string(lastError()).find("multiple of 128"), std::string::npos) << lastError();
}
