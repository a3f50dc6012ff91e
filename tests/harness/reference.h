// Float64 host reference of every op, dtype conversions and the tolerances the tests state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "arfusion/arfusion.h"

namespace arftest {

using arfusion::DType;
using arfusion::Op;

size_t elemSize(DType d);
double toDouble(const void* base, size_t i, DType d);
void fromDouble(void* base, size_t i, DType d, double v);  // round to nearest even

// Random normal values (fresh per seed), stored in dtype. Never zeros; sprinkled with -0.0 when
// `with_negzero` (the sentinel trap of peer libraries).
std::vector<uint8_t> randomTensor(size_t count, DType d, uint64_t seed, double scale = 1.0, bool with_negzero = false);

struct Reference {
  std::vector<double> sum, residual_out, norm_out;  // float64, no intermediate rounding
  std::vector<double> sum_abs;                       // sum_r |input_r| + |residual| per element
  std::vector<double> inv_rms;                       // per row
};
// inputs[r] is rank r's input.
// An empty residual is zero; gemma: norm_out = residual_out * inv_rms * (1 + gamma).
Reference reference(const std::vector<std::vector<uint8_t>>& inputs, const std::vector<uint8_t>& residual,
                    const std::vector<uint8_t>& gamma, int64_t tokens, int64_t hidden, DType d, double eps, bool gemma = false);

// Unit roundoff of a dtype for the stated tolerances: bf16 2^-8, fp16 2^-11, fp32 2^-22
// (fp32 accumulation over up to 8 ranks). The tests allow 2 units on every rounding step.
double unitRoundoff(DType d);

struct CheckResult {
  int64_t bad = 0, unwritten = 0;
  double max_abs_err = 0;
  double max_ulp = 0;  // distance in units of the last place of the dtype at the reference value
  std::string first;  // description of the first failure
  bool ok() const { return bad == 0 && unwritten == 0; }
};
// Compares device output `got` (dtype d) with the float64 reference of `op`.
// which: 0 = allreduce out, 1 = residual_out, 2 = norm_out.
CheckResult check(const std::vector<uint8_t>& got, const Reference& ref, const std::vector<uint8_t>& gamma,
                  int64_t tokens, int64_t hidden, DType d, int which, bool gemma = false);

uint64_t hashBytes(const void* p, size_t n, uint64_t h = 1469598103934665603ull);

}  // namespace arftest
