// CPU tests: argument validation, fixed cases and randomized.
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
#include "host/validate.h"

using namespace arfusion;
using namespace arfusion::detail;
using namespace cputest;

namespace {
RowArgs goodArgs(std::vector<char>& mem, int64_t tokens = 4, int64_t hidden = 64) {
  const size_t t = tokens * hidden * 2;
  mem.assign(5 * t + 64, 0);
  char* base = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(mem.data()) + 15) / 16 * 16);
  RowArgs a;
  a.input = base;
  a.residual_in = base + t;
  a.residual_out = base + 2 * t;
  a.gamma = base + 3 * t;
  a.out = base + 4 * t;
  a.tokens = tokens;
  a.hidden = hidden;
  a.eps = 1e-6f;
  a.op = Op::kAllReduceAddRMSNorm;
  return a;
}
}  // namespace

TEST(Validate, GoodArgumentsPass) {
  std::vector<char> mem;
  RowArgs a = goodArgs(mem);
  EXPECT_EQ(validateArgs(a, DType::kBFloat16), Status::kSuccess) << lastError();
  EXPECT_TRUE(vectorizable(a, DType::kBFloat16));
  a.residual_out = const_cast<void*>(a.residual_in);  // in place
  EXPECT_EQ(validateArgs(a, DType::kBFloat16), Status::kSuccess) << lastError();
}

TEST(Validate, EachBadArgumentIsRejectedWithAMessage) {
  struct Case {
    const char* what;
    void (*mutate)(RowArgs&);
    DType dtype;
  };
  const Case cases[] = {
      {"input is null", [](RowArgs& a) { a.input = nullptr; }, DType::kBFloat16},
      {"residual_in is null", [](RowArgs& a) { a.residual_in = nullptr; }, DType::kBFloat16},
      {"residual_out is null", [](RowArgs& a) { a.residual_out = nullptr; }, DType::kBFloat16},
      {"gamma is null", [](RowArgs& a) { a.gamma = nullptr; }, DType::kBFloat16},
      {"norm_out is null", [](RowArgs& a) { a.out = nullptr; }, DType::kBFloat16},
      {"tokens must be", [](RowArgs& a) { a.tokens = 0; }, DType::kBFloat16},
      {"tokens must be", [](RowArgs& a) { a.tokens = -3; }, DType::kBFloat16},
      {"hidden must be", [](RowArgs& a) { a.hidden = 0; }, DType::kBFloat16},
      {"hidden must be", [](RowArgs& a) { a.hidden = 65537; }, DType::kBFloat16},
      {"eps must be", [](RowArgs& a) { a.eps = -1e-6f; }, DType::kBFloat16},
      {"eps must be", [](RowArgs& a) { a.eps = NAN; }, DType::kBFloat16},
      {"dtype", [](RowArgs&) {}, static_cast<DType>(7)},
      {"overlap", [](RowArgs& a) { a.out = const_cast<void*>(a.input); }, DType::kBFloat16},
      {"overlap", [](RowArgs& a) { a.residual_out = static_cast<char*>(const_cast<void*>(a.residual_in)) + 2; }, DType::kBFloat16},
      {"gamma and norm_out overlap", [](RowArgs& a) { a.gamma = a.out; }, DType::kBFloat16},
      {"is not aligned", [](RowArgs& a) { a.input = static_cast<const char*>(a.input) + 1; }, DType::kBFloat16},
      {"is not aligned", [](RowArgs& a) { a.gamma = static_cast<const char*>(a.gamma) + 2; }, DType::kFloat32},
  };
  for (const Case& c : cases) {
    std::vector<char> mem;
    RowArgs a = goodArgs(mem);
    c.mutate(a);
    EXPECT_EQ(validateArgs(a, c.dtype), Status::kInvalidArgument) << c.what;
    EXPECT_NE(std::string(lastError()).find(c.what), std::string::npos) << c.what << " vs " << lastError();
  }
}

TEST(Validate, MisalignedOrOddRowsTakeTheScalarPath) {
  std::vector<char> mem;
  RowArgs a = goodArgs(mem);
  a.input = static_cast<const char*>(a.input) + 2;
  EXPECT_FALSE(vectorizable(a, DType::kBFloat16));
  RowArgs b = goodArgs(mem, 4, 65);
  EXPECT_FALSE(vectorizable(b, DType::kBFloat16));
  RowArgs c = goodArgs(mem, 4, 64);
  EXPECT_TRUE(vectorizable(c, DType::kFloat32));
}


TEST(Api, NullCommunicatorIsAnErrorNotACrash) {
  EXPECT_EQ(allReduceAddRMSNorm(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 1, 1, DType::kBFloat16, 0.f, nullptr),
            Status::kInvalidArgument);
  EXPECT_NE(std::string(lastError()).find("null"), std::string::npos);
  Plan p;
  EXPECT_EQ(plan(nullptr, Shape{}, &p), Status::kInvalidArgument);
  EXPECT_EQ(commDestroy(nullptr), Status::kInvalidArgument);
  EXPECT_EQ(commCreate(nullptr, Config{}, nullptr), Status::kInvalidArgument);
}

// ---------------------------------------------------------------- randomized validation
// 200,000 random argument sets (pointers from a small address pool so that overlaps are common,
// extreme sizes, bad enums, NaN eps): validateArgs never crashes, and whenever it accepts, the
// invariants the kernels rely on hold. A rejected call must say why.
TEST(Validate, RandomizedArgumentsNeverBreakTheInvariants) {
  std::mt19937_64 rng(20261129);
  auto pick = [&](std::initializer_list<int64_t> v) { return *(v.begin() + rng() % v.size()); };
  int64_t accepted = 0;
  for (int it = 0; it < 200000; ++it) {
    RowArgs a;
    auto ptr = [&]() -> void* {
      if (rng() % 16 == 0) return nullptr;
      return reinterpret_cast<void*>(uintptr_t(0x10000000) + (rng() % 64) * 4096 + (rng() % 4) * 2);
    };
    a.input = ptr();
    a.residual_in = ptr();
    a.residual_out = rng() % 4 == 0 ? const_cast<void*>(a.residual_in) : ptr();
    a.gamma = ptr();
    a.out = rng() % 8 == 0 ? const_cast<void*>(a.input) : ptr();
    a.tokens = pick({-1, 0, 1, 2, 3, 17, 1000, int64_t(1) << 40, INT64_MAX});
    a.hidden = pick({-5, 0, 1, 7, 64, 4096, 65536, 65537, INT64_MAX});
    a.eps = static_cast<float>(pick({-1, 0, 1})) * 1e-6f;
    if (rng() % 50 == 0) a.eps = NAN;
    a.op = static_cast<Op>(rng() % 4);
    const DType d = static_cast<DType>(rng() % 4);
    const Status st = validateArgs(a, d);
    if (st != Status::kSuccess) {
      ASSERT_EQ(st, Status::kInvalidArgument);
      ASSERT_GT(std::strlen(lastError()), 0u);
      continue;
    }
    ++accepted;
    ASSERT_LE(static_cast<unsigned>(d), 2u);
    ASSERT_LE(static_cast<unsigned>(a.op), 2u);
    ASSERT_GE(a.tokens, 1);
    ASSERT_GE(a.hidden, 1);
    ASSERT_LE(a.hidden, kMaxHidden);
    ASSERT_LE(a.tokens * a.hidden, int64_t(1) << 40);
    ASSERT_NE(a.input, nullptr);
    ASSERT_EQ(reinterpret_cast<uintptr_t>(a.input) % elemSize(d), 0u);
    const uintptr_t bytes = uintptr_t(a.tokens * a.hidden) * elemSize(d);
    auto disjointOrSame = [&](const void* x, const void* y) {
      const auto p = reinterpret_cast<uintptr_t>(x), q = reinterpret_cast<uintptr_t>(y);
      return p == q || p + bytes <= q || q + bytes <= p;
    };
    if (a.op == Op::kAllReduce) {
      ASSERT_NE(a.out, nullptr);
      ASSERT_TRUE(disjointOrSame(a.input, a.out));
    } else {
      ASSERT_NE(a.residual_in, nullptr);
      ASSERT_NE(a.residual_out, nullptr);
      ASSERT_TRUE(disjointOrSame(a.residual_in, a.residual_out));
      ASSERT_TRUE(disjointOrSame(a.input, a.residual_out));
      ASSERT_NE(a.input, a.residual_out);
      if (a.op == Op::kAllReduceAddRMSNorm) {
        ASSERT_NE(a.out, nullptr);
        ASSERT_NE(a.gamma, nullptr);
        ASSERT_TRUE(a.eps >= 0.f);
        for (const void* x : std::initializer_list<const void*>{a.input, a.residual_in, a.residual_out}) {
          ASSERT_TRUE(disjointOrSame(x, a.out));
          ASSERT_NE(x, a.out);
        }
      }
    }
  }
  EXPECT_GT(accepted, 100);  // the generator does reach the accepting side
}
