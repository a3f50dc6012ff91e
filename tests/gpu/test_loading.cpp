// GPU tests: commCreate loads every kernel (run in a fresh process: its own ctest entry).
#include <set>

#include "kernels/kernels.h"
#include "gpu_tests.h"

using namespace gputest;

// ------------------------------------------------------------------ kernel loading
// First in the file: it needs a process that has launched none of the library's kernels yet.
// Under lazy loading (CUDA's default) commCreate must have loaded every kernel the library can
// launch (src/kernels/kernels.h, preloadKernels, says why). Without the preload the self-check
// loads a few GridDependency kernels and this finds the rest unloaded.
TEST(Loading, CommCreateLoadsEveryKernel) {
  if (gpuCount() < 1) GTEST_SKIP() << "needs a GPU";
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  bool before = false, after = false;
  ASSERT_EQ(loadingProbe(&before, &after), "");
  if (before) GTEST_SKIP() << "this process loads kernels eagerly (CUDA_MODULE_LOADING=EAGER?): nothing to check";
  ASSERT_TRUE(after) << "the loading probe is broken: its kernel ran but does not read as loaded";
  std::string skip;
  const std::string err = runLocalGroup(2, testConfig(), 8, [](RankCtx& ctx) -> std::string {
    std::set<const void*> kernels;  // the enumeration may name a kernel more than once
    const cudaError_t walked = arfusion::detail::forEachKernel([&](const void* kernel) {
      kernels.insert(kernel);
      return cudaSuccess;
    });
    if (walked != cudaSuccess) return "walking the kernels failed";
    // A lower bound. One-shot and two-shot: 3 dtypes x 4 variants x 2 sync modes each; the
    // one-shot's cluster kernels 3 x 4 and its held-operand kernels 3 x 2; the Lamport two-shot
    // 3 x 4; add-RMSNorm 18; self-check 1. The kernels compiled for two ranks (the one-shot's
    // Lamport kernels, both two-shots) come on top.
    if (kernels.size() < 97) return "only " + std::to_string(kernels.size()) + " kernels listed";
    int unloaded = 0;
    for (const void* k : kernels) {
      bool loaded = false;
      const std::string e = kernelLoaded(k, &loaded);
      if (!e.empty()) return e;
      unloaded += !loaded;
    }
    if (unloaded) return std::to_string(unloaded) + " of " + std::to_string(kernels.size()) + " kernels not loaded after commCreate";
    if (ctx.rank == 0) std::printf("all %zu kernels loaded after commCreate\n", kernels.size());
    return "";
  }, &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(err, "");
}
