// Quantized outputs: the number formats, their conversions and the scale layouts, compiled alike
// for the device (the epilogue, norm_epilogue.cuh) and the host (validation, sizes, the tests'
// expectations). docs/design.md, "Quantized outputs", states every recipe and draws the layouts.
//
// Conversions are software (bit arithmetic, IEEE fp32 operations only), the same code on every
// arch but one: E4M3 has conversion instructions from SM89 and E2M1 from SM100, but a hardware
// conversion is used only where a test on that arch proves it equal: E4M3, both ways, on SM90 (the
// tests run on H100/H200); no SM100/SM120 GPU is at hand, so those keep the software conversion. The
// tests compare these functions with an independent table-based reference on every bf16 and fp16
// value and a large fp32 sample (NaN, infinities, -0.0, subnormals, ties included).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#include <cuda_fp8.h>
#endif

#ifdef __CUDACC__
#define ARF_HD __host__ __device__ __forceinline__
#else
#define ARF_HD inline
#endif

namespace arfusion::detail {

// Values of arfusion::QuantFormat and arfusion::ScaleLayout (arfusion.h).
enum : uint8_t { kQuantNone = 0, kQuantFp8 = 1, kQuantFp8PerToken = 2, kQuantFp8PerGroup = 3, kQuantNvfp4 = 4 };
enum : uint8_t { kLayoutLinear = 0, kLayoutColumnMajor = 1, kLayoutUE8M0Packed = 2, kLayoutSwizzled128x4 = 3 };

constexpr float kE4M3Max = 448.f;
constexpr float kE2M1Max = 6.f;
// The smallest FP8 scale of the dynamic formats: an all-zero row or group is defined (its values
// quantize to 0), and a tiny one does not divide by a denormal.
constexpr float kFp8MinScale = 1.f / (448.f * 512.f);
constexpr int kFp8GroupSize = 128;   // elements per scale of kQuantFp8PerGroup
constexpr int kNvfp4BlockSize = 16;  // elements per E4M3 scale of kQuantNvfp4

ARF_HD uint32_t floatBits(float x) {
  uint32_t b;
  memcpy(&b, &x, 4);
  return b;
}
ARF_HD float bitsFloat(uint32_t b) {
  float x;
  memcpy(&x, &b, 4);
  return x;
}

// fp32 -> FP8 E4M3 (the OCP "fn" variant: bias 7, no infinities, NaN = S.1111.111, largest 448),
// rounded to nearest, ties to even, saturating: every value of magnitude >= 448, infinities
// included, becomes +-448; NaN stays NaN (0x7f with the input's sign); -0.0 becomes 0x80.
// The arithmetic, on the host and on every arch but SM90 (e4m3FromFloat below).
ARF_HD uint8_t e4m3Arithmetic(float x) {
  const uint32_t b = floatBits(x);
  const uint8_t sign = static_cast<uint8_t>((b >> 24) & 0x80u);
  const uint32_t abs = b & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7f;  // NaN
  if (abs >= 0x43e00000u) return sign | 0x7e;  // >= 448: saturate
  if (abs < 0x3c800000u) {                     // below 2^-6: subnormals, steps of 2^-9 (8 is 2^-6)
    const float q = rintf(bitsFloat(abs) * 512.f);  // exact scaling; rintf rounds ties to even
    return sign | static_cast<uint8_t>(q);
  }
  uint32_t e = (abs >> 23) - 127 + 7, keep = (abs >> 20) & 7;
  const uint32_t rest = abs & 0xfffffu;
  if (rest > 0x80000u || (rest == 0x80000u && (keep & 1))) ++keep;
  if (keep == 8) keep = 0, ++e;  // rounded up to the next power of two (still < 448 here)
  return sign | static_cast<uint8_t>(e << 3 | keep);
}

// Two values to E4M3, lo in the low byte: the epilogue converts a pack's pairs. SM90: the
// conversion instruction (cvt.rn.satfinite.e4m3x2.f32), one for both values; it writes every NaN
// as 0x7f, and OR-ing in each input's sign bit gives e4m3Arithmetic's code for every input (every
// other result already carries its input's sign). The sign bits come from one byte permute in its
// sign-replicating mode (selector nibble 0xb: byte 3 of lo, its top bit over the whole byte; 0xf:
// byte 3 of hi), masked to bits 7 and 15. Proven bit-equal to e4m3Arithmetic, in both bytes, on
// every bf16 and fp16 value and 2^24 fp32 samples by Quant.DeviceConversionsMatchTheReference on
// an H100.
ARF_HD uint16_t e4m3x2FromFloat(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900
  const uint16_t q = static_cast<uint16_t>(__nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3));
  uint32_t signs;
  asm("prmt.b32 %0, %1, %2, 0xfb;" : "=r"(signs) : "r"(floatBits(lo)), "r"(floatBits(hi)));
  return static_cast<uint16_t>(q | (signs & 0x8080u));
#else
  return static_cast<uint16_t>(e4m3Arithmetic(lo) | e4m3Arithmetic(hi) << 8);
#endif
}

// One value to E4M3 (e4m3Arithmetic's code, through the instruction on SM90).
ARF_HD uint8_t e4m3FromFloat(float x) { return static_cast<uint8_t>(e4m3x2FromFloat(x, 0.f)); }

// FP8 E4M3 -> fp32 (exact): the arithmetic, on the host and on every arch but SM90.
ARF_HD float e4m3ToFloatArithmetic(uint8_t c) {
  const uint32_t sign = static_cast<uint32_t>(c & 0x80) << 24, e = (c >> 3) & 15, m = c & 7;
  if (e == 15 && m == 7) return bitsFloat(sign | 0x7fc00000u);
  if (e == 0) return bitsFloat(sign | floatBits(static_cast<float>(m) * (1.f / 512.f)));
  return bitsFloat(sign | (e - 7 + 127) << 23 | m << 20);
}

// FP8 E4M3 -> fp32 (exact; the NVFP4 block scale's value). SM90: the conversion instruction to
// fp16 (exact: every E4M3 value is an fp16 one), then fp16 -> fp32; the same value as
// e4m3ToFloatArithmetic for every code, and a NaN, whose bits nothing reads, for the NaN codes.
// Proven on all 256 codes by Quant.DeviceConversionsMatchTheReference on an H100.
ARF_HD float e4m3ToFloat(uint8_t c) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(c, __NV_E4M3)));
#else
  return e4m3ToFloatArithmetic(c);
#endif
}

// fp32 -> FP4 E2M1 (bias 1: 0, 0.5, 1, 1.5, 2, 3, 4, 6), rounded to nearest, ties to even,
// saturating at +-6; E2M1 has no NaN: NaN becomes +6 (0x7). The sign is bit 3.
// Integer arithmetic on the bits, a dozen instructions (the quantizer's cost per element): below 1
// the codes 0, 1, 2 are rint(2|x|), one fused multiply-add onto 2^23 rounding it once, to even;
// from 1 up, the code is the biased exponent and one mantissa bit, 2e + m - 252, rounded to even by
// adding 0x1fffff plus the kept bit below the cut (a carry into the exponent is the next binade),
// and saturated at code 7.
ARF_HD uint8_t e2m1FromFloat(float x) {
  const uint32_t b = floatBits(x);
  const uint32_t abs = b & 0x7fffffffu;
  // Both candidates, then a select: no branch for a warp whose values straddle 1 to diverge on.
  const uint32_t below_one = floatBits(fmaf(bitsFloat(abs), 2.f, 8388608.f)) - 0x4b000000u;  // rint(2|x|)
  const uint32_t v = (abs + 0x1fffffu + ((abs >> 22) & 1u)) >> 22;
  const uint32_t from_one = (v < 259u ? v : 259u) - 252u;
  const uint32_t code = ((b >> 28) & 0x8u) | (abs < 0x3f800000u ? below_one : from_one);
  return static_cast<uint8_t>(abs > 0x7f800000u ? 0x7u : code);
}

// Two values, lo in bits 0-3 and hi in bits 4-7: a byte of packed E2M1 values.
ARF_HD uint8_t e2m1x2FromFloat(float lo, float hi) {
  return static_cast<uint8_t>(e2m1FromFloat(lo) | e2m1FromFloat(hi) << 4);
}

// ---- E2M1, two values at once: the epilogue's conversion where a block's scaled magnitudes are
// finite and below kE2M1LanesLimit (norm_epilogue.cuh decides per block; other blocks take
// e2m1x2FromFloat). Magnitude codes 0-7 are a piecewise-linear function of the magnitude v: 2v up
// to 2 (0, 0.5, 1, 1.5, 2), v + 2 up to 4 (3, 4), v / 2 + 4 beyond (6), i.e. min(2v, v + 2,
// v / 2 + 4) (the lines are concave), which stays below 7.5 for v < 7, so needs no saturation
// there; and rounding that to the nearest integer, ties to even, is E2M1's
// rounding (an even code is an even mantissa). rint is monotonic, so it commutes with the minimum:
// each line is rounded once, by a fused multiply-add onto 2^23 (the fp32 ulp there is 1, so the
// code lands in the low bits of 0x4b000000 + code), and the three rounded lines' minimum is taken
// in integer arithmetic, two values at a time in 16-bit lanes. Floating-point multiply-adds and
// one integer minimum per pair of lines, where e2m1FromFloat is a dozen integer instructions per
// value. Equal to e2m1FromFloat on every fp32 magnitude below 7, with either sign, paired with
// another (an exhaustive host comparison); the CPU and device tests keep it so on the conversion
// sample. A block's largest scaled magnitude is at most 6 * 16/15 where its scale is a normal E4M3
// value (rounding G * absmax / 6 to three mantissa bits loses at most 1/16 of it), so only blocks
// with subnormal or saturated scales, or NaN and infinite values, take the value-by-value path.
constexpr float kE2M1LanesLimit = 7.f;

// Lane-wise minimum (kMax false) or maximum of two pairs of 16-bit unsigned integers: one
// instruction on SM90 and later (min.u16x2 / max.u16x2), lane by lane elsewhere.
template <bool kMax>
ARF_HD uint32_t extremumU16x2(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t d;
  if constexpr (kMax) asm("max.u16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  else asm("min.u16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
#else
  const auto pick = [](uint32_t x, uint32_t y) { return (x > y) == kMax ? x : y; };
  return pick(a >> 16, b >> 16) << 16 | pick(a & 0xffffu, b & 0xffffu);
#endif
}
ARF_HD uint32_t minU16x2(uint32_t a, uint32_t b) { return extremumU16x2<false>(a, b); }
ARF_HD uint32_t maxU16x2(uint32_t a, uint32_t b) { return extremumU16x2<true>(a, b); }

// The E2M1 magnitude codes of lo and hi (0 <= lo, hi < kE2M1LanesLimit, neither NaN) in the 16-bit
// lanes of one word: 0x4b000000 + (code(hi) << 16) + code(lo). The word of lo's rounded line plus
// hi's times 2^16 (mod 2^32) keeps hi's code alone in the high lane above lo's 0x4b00, the same in
// every line's word, so the lane-wise minimum is each value's.
ARF_HD uint32_t e2m1MagnitudeLanes(float lo, float hi) {
  constexpr float k2p23 = 8388608.f;
  const auto lanes = [](float l, float h) { return floatBits(l) + floatBits(h) * 65536u; };
  const uint32_t below2 = lanes(fmaf(lo, 2.f, k2p23), fmaf(hi, 2.f, k2p23));
  const uint32_t below4 = lanes(lo + (k2p23 + 2.f), hi + (k2p23 + 2.f));
  const uint32_t above4 = lanes(fmaf(lo, .5f, k2p23 + 4.f), fmaf(hi, .5f, k2p23 + 4.f));
  return minU16x2(minU16x2(below2, below4), above4);
}

// The sign bits of a pair of values where a pair of 16-bit values has them: lo's at bit 15, hi's
// at bit 31 (a word of two bf16 or fp16 values is its own; e2m1Bytes reads only these bits).
ARF_HD uint32_t e2m1PairSigns(float lo, float hi) {
  return ((floatBits(lo) >> 16) & 0x8000u) | (floatBits(hi) & 0x80000000u);
}

// Bytes of a (0-3) and b (4-7) picked by the four selector nibbles of s, lowest first (the
// byte-permute instruction, __byte_perm, without its sign-replicating modes).
ARF_HD uint32_t bytePerm(uint32_t a, uint32_t b, uint32_t s) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(a, b, s);
#else
  const uint64_t ab = uint64_t(b) << 32 | a;
  uint32_t d = 0;
  for (int k = 0; k < 4; ++k) d |= static_cast<uint32_t>((ab >> (8 * ((s >> (4 * k)) & 7))) & 0xffu) << (8 * k);
  return d;
#endif
}

// The two E2M1 bytes of four values, in memory order: pair a (values 0, 1) and pair b (values 2,
// 3) as e2m1MagnitudeLanes words, with their sign words (bits 15 and 31, e2m1PairSigns). One byte
// permute gathers the lanes' low bytes into w (value 0's code at bits 0-3, 2's at 8-11, 1's at
// 16-19, 3's at 24-27), another the sign words' bytes 1 and 3 in the same order (the signs at
// bits 7, 15, 23, 31), shifted onto each code's bit 3; w | w >> 12 moves values 1 and 3 beside 0
// and 2: byte 0 is value 0 | value 1 << 4, byte 1 value 2 | value 3 << 4. Bits 4-7 and 12-15 of
// w are zero (codes are below 8), so nothing else lands there.
ARF_HD uint16_t e2m1Bytes(uint32_t lanes_a, uint32_t lanes_b, uint32_t signs_a, uint32_t signs_b) {
  const uint32_t codes = bytePerm(lanes_a, lanes_b, 0x6240u);
  const uint32_t signs = bytePerm(signs_a, signs_b, 0x7351u);
  const uint32_t w = codes | ((signs >> 4) & 0x08080808u);
  return static_cast<uint16_t>(w | w >> 12);
}

ARF_HD float e2m1ToFloat(uint8_t c) {
  const float mag[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
  return (c & 8) ? -mag[c & 7] : mag[c & 7];
}

// a / D for the divisors of the scales, D = 6 (an NVFP4 block scale's absmax / 6) and D = 448 (a
// dynamic FP8 scale's absmax / 448): the same bits as the division in fewer instructions. Where
// 2^-64 <= a <= 2^64, q0 = a * RN(1/D) is within an ulp of the quotient, the remainder a - D * q0
// is exact in one fused multiply-add, and q0 + remainder * RN(1/D) rounds to the quotient
// (Markstein's correction), which holds for these two divisors (it does not for every divisor).
// Scaling a by 2^k scales every step exactly as long as no step leaves the normal range, which the
// bounds keep, so one binade's mantissas decide every a in them (Quant.QuotientsAreTheDivision
// checks them all). Elsewhere (0, tiny, huge, infinity, NaN) the division itself. Three
// instructions and a range test, where the compiler's division took 11 on SM90 (it refines a
// hardware reciprocal and checks its range on every call).
template <int D>
ARF_HD float quotientBy(float a) {
  static_assert(D == 6 || D == 448, "proven for these divisors only");
  constexpr float kRecip = 1.f / D;  // rounded to nearest once, at compile time
  if (!(a >= 0x1p-64f && a <= 0x1p64f)) return a / static_cast<float>(D);
  const float q0 = a * kRecip;
  return fmaf(fmaf(-static_cast<float>(D), q0, a), kRecip, q0);
}

// A dynamic FP8 scale from an absolute maximum: absmax / 448, at least kFp8MinScale; with `pow2`,
// rounded up to a power of two (a UE8M0 exponent).
ARF_HD float fp8Scale(float absmax, bool pow2) {
  float s = fmaxf(quotientBy<static_cast<int>(kE4M3Max)>(absmax), kFp8MinScale);
  if (pow2) {
    const uint32_t b = floatBits(s);
    if ((b & 0x7fffffu) != 0 && (b >> 23) < 254) s = bitsFloat(((b >> 23) + 1) << 23);
  }
  return s;
}

// What FP8 values are multiplied by: the fp32 reciprocal of their scale, 1 / scale rounded once,
// so q = E4M3(x * fp8Inverse(scale)) (the multiplication vLLM's and TensorRT-LLM's quantization
// kernels do; one division per row or group instead of one per element). It differs from
// E4M3(x / scale) only where x / scale lies within an fp32 ulp of an E4M3 rounding boundary, and not
// at all for power-of-two scales.
ARF_HD float fp8Inverse(float scale) { return 1.f / scale; }

// The UE8M0 byte of a power-of-two scale: its biased exponent.
ARF_HD uint8_t ue8m0Byte(float pow2_scale) { return static_cast<uint8_t>(floatBits(pow2_scale) >> 23); }

// NVFP4's block scale and the factor its values are multiplied by: sf = E4M3(G * (absmax / 6)),
// inv = G / float(sf) (0 where sf is 0). A block with a NaN gets the NaN scale (0x7f).
struct Nvfp4Block {
  uint8_t sf;
  float inv;
};
ARF_HD Nvfp4Block nvfp4Block(float absmax, bool has_nan, float global_scale) {
  const uint8_t sf = e4m3FromFloat(has_nan ? bitsFloat(0x7fc00000u) : global_scale * quotientBy<static_cast<int>(kE2M1Max)>(absmax));
  const float f = e4m3ToFloat(sf);
  return {sf, f == 0.f ? 0.f : global_scale / f};
}

// ---- scale layouts (byte or element offsets into the scale buffer)
ARF_HD int64_t roundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
// Rows of a scale layout: the token count, or for the layouts of GEMMs that read whole tiles,
// rounded up (column-major and UE8M0 layouts: to 4, a 16-byte TMA row; swizzled: to 128).
ARF_HD int64_t scaleRows(uint8_t layout, int64_t tokens) {
  return layout == kLayoutSwizzled128x4 ? roundUp(tokens, 128)
         : layout == kLayoutColumnMajor || layout == kLayoutUE8M0Packed ? roundUp(tokens, 4)
                                                                         : tokens;
}
// NVFP4 swizzled 128x4 (the layout CUTLASS and TensorRT-LLM FP4 GEMMs read): the byte of row r and
// scale column c, in a buffer of scaleRows rows and `cols` columns (hidden / 16 rounded up to 4):
// tiles of 128 rows x 4 columns, 512 bytes each, row tiles outer; inside a tile, row r % 32 picks
// a 16-byte line, (r % 128) / 32 a 4-byte word of it, c % 4 the byte. The row's part and the
// column's part add up: the epilogue computes the row's once (64-bit) and a column's per block.
// r >= 0 (unsigned arithmetic: shifts and masks, where signed division by 128 and 32 costs a
// dozen instructions on the device).
ARF_HD int64_t swizzledRowPart(int64_t r, int64_t cols) {
  const uint64_t u = static_cast<uint64_t>(r);
  return static_cast<int64_t>((u >> 7) * (static_cast<uint64_t>(cols) >> 2) * 512 + (u & 31) * 16 + ((u >> 5) & 3) * 4);
}
ARF_HD int swizzledColumnPart(int c) { return (c >> 2) * 512 + (c & 3); }  // c >= 0: shifts, not signed division
ARF_HD int64_t swizzled128x4(int64_t r, int64_t c, int64_t cols) { return swizzledRowPart(r, cols) + swizzledColumnPart(int(c)); }

}  // namespace arfusion::detail
