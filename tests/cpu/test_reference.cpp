// CPU tests: the float64 reference and the tolerances the GPU tests state.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>

#include "arfusion/arfusion.h"
#include "cpu_helpers.h"
#include "reference.h"

using namespace arfusion;
using namespace arfusion::detail;
using namespace cputest;

TEST(Reference, KnownValuesAndNorm) {
  const int64_t tokens = 1, hidden = 4;
  std::vector<std::vector<uint8_t>> inputs(2, std::vector<uint8_t>(hidden * 4));
  std::vector<uint8_t> residual(hidden * 4), gamma(hidden * 4);
  for (int h = 0; h < hidden; ++h) {
    arftest::fromDouble(inputs[0].data(), h, DType::kFloat32, 1.0);
    arftest::fromDouble(inputs[1].data(), h, DType::kFloat32, 2.0);
    arftest::fromDouble(residual.data(), h, DType::kFloat32, 1.0);
    arftest::fromDouble(gamma.data(), h, DType::kFloat32, 0.5);
  }
  const auto ref = arftest::reference(inputs, residual, gamma, tokens, hidden, DType::kFloat32, 0.0);
  for (int h = 0; h < hidden; ++h) {
    EXPECT_DOUBLE_EQ(ref.sum[h], 3.0);
    EXPECT_DOUBLE_EQ(ref.residual_out[h], 4.0);
    EXPECT_DOUBLE_EQ(ref.norm_out[h], 0.5);  // constant row: x / rms(x) == 1
  }
}

TEST(Reference, CheckCatchesAWrongAndAnUnwrittenElement) {
  const int64_t tokens = 3, hidden = 64;
  const DType d = DType::kBFloat16;
  std::vector<std::vector<uint8_t>> inputs = {arftest::randomTensor(tokens * hidden, d, 1),
                                              arftest::randomTensor(tokens * hidden, d, 2)};
  auto residual = arftest::randomTensor(tokens * hidden, d, 3);
  auto gamma = arftest::randomTensor(hidden, d, 4);
  const auto ref = arftest::reference(inputs, residual, gamma, tokens, hidden, d, 1e-6);
  std::vector<uint8_t> out(tokens * hidden * 2);
  for (size_t i = 0; i < size_t(tokens * hidden); ++i) arftest::fromDouble(out.data(), i, d, ref.norm_out[i]);
  EXPECT_TRUE(arftest::check(out, ref, gamma, tokens, hidden, d, 2).ok());
  arftest::fromDouble(out.data(), 70, d, ref.norm_out[70] * 1.1 + 0.5);
  EXPECT_EQ(arftest::check(out, ref, gamma, tokens, hidden, d, 2).bad, 1);
  std::memset(out.data() + 2 * 5, 0xff, 2);  // NaN poison left in place
  EXPECT_EQ(arftest::check(out, ref, gamma, tokens, hidden, d, 2).unwritten, 1);
}

TEST(Reference, RandomTensorsAreFreshAndNonZero) {
  auto a = arftest::randomTensor(4096, DType::kBFloat16, 7);
  auto b = arftest::randomTensor(4096, DType::kBFloat16, 8);
  EXPECT_NE(a, b);
  int zeros = 0;
  for (size_t i = 0; i < 4096; ++i) zeros += arftest::toDouble(a.data(), i, DType::kBFloat16) == 0.0;
  EXPECT_LT(zeros, 8);
}
