// The GPU tests' main.
#include "gpu_tests.h"

using namespace gputest;

// As gtest_main, but a run in which every test was skipped (no GPU, or fewer than the tests need)
// exits 77, which ctest reports as skipped (tests/CMakeLists.txt, SKIP_RETURN_CODE).
int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  const ::testing::UnitTest& u = *::testing::UnitTest::GetInstance();
  if (rc == 0 && u.successful_test_count() == 0 && u.skipped_test_count() > 0) return kExitSkipped;
  return rc;
}
