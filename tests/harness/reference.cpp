#include "reference.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>

namespace arftest {

size_t elemSize(DType d) { return d == DType::kFloat32 ? 4 : 2; }

double toDouble(const void* base, size_t i, DType d) {
  switch (d) {
    case DType::kFloat32: return static_cast<const float*>(base)[i];
    case DType::kFloat16: return __half2float(static_cast<const __half*>(base)[i]);
    case DType::kBFloat16: return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
  }
  return 0;
}

void fromDouble(void* base, size_t i, DType d, double v) {
  switch (d) {
    case DType::kFloat32: static_cast<float*>(base)[i] = static_cast<float>(v); break;
    case DType::kFloat16: static_cast<__half*>(base)[i] = __float2half_rn(static_cast<float>(v)); break;
    case DType::kBFloat16: static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn(static_cast<float>(v)); break;
  }
}

std::vector<uint8_t> randomTensor(size_t count, DType d, uint64_t seed, double scale, bool with_negzero) {
  std::vector<uint8_t> out(count * elemSize(d));
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 12345);
  std::normal_distribution<double> dist(0.0, scale);
  for (size_t i = 0; i < count; ++i) {
    double v = dist(rng);
    if (with_negzero && (rng() % 61) == 0) v = -0.0;
    fromDouble(out.data(), i, d, v);
  }
  return out;
}

Reference reference(const std::vector<std::vector<uint8_t>>& inputs, const std::vector<uint8_t>& residual,
                    const std::vector<uint8_t>& gamma, int64_t tokens, int64_t hidden, DType d, double eps, bool gemma) {
  const size_t n = static_cast<size_t>(tokens * hidden);
  Reference r;
  r.sum.assign(n, 0.0);
  r.sum_abs.assign(n, 0.0);
  r.residual_out.assign(n, 0.0);
  r.norm_out.assign(n, 0.0);
  r.inv_rms.assign(tokens, 0.0);
  for (const auto& in : inputs)
    for (size_t i = 0; i < n; ++i) {
      const double v = toDouble(in.data(), i, d);
      r.sum[i] += v;
      r.sum_abs[i] += std::fabs(v);
    }
  for (int64_t t = 0; t < tokens; ++t) {
    double ss = 0;
    for (int64_t h = 0; h < hidden; ++h) {
      const size_t i = t * hidden + h;
      const double res = residual.empty() ? 0.0 : toDouble(residual.data(), i, d);
      r.residual_out[i] = res + r.sum[i];
      r.sum_abs[i] += std::fabs(res);
      ss += r.residual_out[i] * r.residual_out[i];
    }
    r.inv_rms[t] = 1.0 / std::sqrt(ss / hidden + eps);
    for (int64_t h = 0; h < hidden; ++h) {
      const size_t i = t * hidden + h;
      const double g = gamma.empty() ? 1.0 : toDouble(gamma.data(), h, d);
      r.norm_out[i] = r.residual_out[i] * r.inv_rms[t] * (gemma ? 1.0 + g : g);
    }
  }
  return r;
}

double unitRoundoff(DType d) {
  switch (d) {
    case DType::kBFloat16: return std::ldexp(1.0, -8);
    case DType::kFloat16: return std::ldexp(1.0, -11);
    case DType::kFloat32: return std::ldexp(1.0, -22);
  }
  return 1;
}

CheckResult check(const std::vector<uint8_t>& got, const Reference& ref, const std::vector<uint8_t>& gamma,
                  int64_t tokens, int64_t hidden, DType d, int which, bool gemma) {
  CheckResult c;
  const double u = unitRoundoff(d);
  // Absolute floor: the spacing of the dtype's subnormals (fp16 values below 6e-5 carry only
  // absolute precision 2^-24).
  const double floor_abs = d == DType::kFloat16 ? std::ldexp(1.0, -24) : 1e-30;
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t h = 0; h < hidden; ++h) {
      const size_t i = t * hidden + h;
      const double v = toDouble(got.data(), i, d);
      double want, tol;
      // Rounding steps: the sum (to dtype), residual + sum (to dtype): 2u each of the magnitudes.
      const double tol_res = 2 * u * ref.sum_abs[i] + 2 * u * std::fabs(ref.residual_out[i]) + floor_abs;
      if (which == 0) {
        want = ref.sum[i];
        tol = 2 * u * ref.sum_abs[i] + floor_abs;
      } else if (which == 1) {
        want = ref.residual_out[i];
        tol = tol_res;
      } else {
        const double g0 = gamma.empty() ? 1.0 : toDouble(gamma.data(), h, d);
        const double g = std::fabs(gemma ? 1.0 + g0 : g0);
        want = ref.norm_out[i];
        // Error of residual_out carried through the scale, plus the output rounding and the
        // rounding of the mean square (relative, a few u).
        tol = g * ref.inv_rms[t] * tol_res + 4 * u * std::fabs(want) + floor_abs;
      }
      if (std::isnan(v) && !std::isnan(want)) {
        if (c.unwritten++ == 0 && c.first.empty()) {
          std::ostringstream os;
          os << "element [" << t << "," << h << "] is NaN (unwritten poison?), want " << want;
          c.first = os.str();
        }
        continue;
      }
      const double err = std::fabs(v - want);
      if (err > c.max_abs_err) c.max_abs_err = err;
      const int digits = d == DType::kBFloat16 ? 8 : d == DType::kFloat16 ? 11 : 24;
      const int min_exp = d == DType::kFloat16 ? -13 : -125;  // frexp exponent of the smallest normal
      int e = 0;
      std::frexp(want, &e);
      const double ulp = std::ldexp(1.0, std::max(e, min_exp) - digits);
      if (err / ulp > c.max_ulp) c.max_ulp = err / ulp;
      if (!(err <= tol)) {
        if (c.bad++ == 0 && c.first.empty()) {
          std::ostringstream os;
          os << "element [" << t << "," << h << "] = " << v << ", want " << want << " (tol " << tol << ")";
          c.first = os.str();
        }
      }
    }
  }
  return c;
}

uint64_t hashBytes(const void* p, size_t n, uint64_t h) {
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

}  // namespace arftest
