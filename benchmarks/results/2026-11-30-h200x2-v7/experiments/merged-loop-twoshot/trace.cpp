// Per-block timeline of the two-shot (thread 0's %globaltimer at phase boundaries) for the last
// of several calls. Build the library with -DARFUSION_TRACE.
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include "bench_harness.h"
extern "C" cudaError_t arfusionTwoShotTrace(unsigned long long* out);
using namespace arfusion;
int main(int argc, char** argv) {
  const int64_t tokens = argc > 1 ? atoll(argv[1]) : 8192, hidden = argc > 2 ? atoll(argv[2]) : 8192;
  const int norm = argc > 3 ? atoi(argv[3]) : 1;
  arfbench::Group g(2);
  if (!g.error().empty()) { printf("%s\n", g.error().c_str()); return 1; }
  const size_t bytes = tokens * hidden * 2;
  std::vector<std::vector<unsigned long long>> tr(2, std::vector<unsigned long long>(1024 * 40));
  std::vector<Plan> plans(2);
  g.onEach([&](int r, Communicator* c, cudaStream_t s) {
    void *in, *res, *ro, *gm, *out;
    cudaMalloc(&in, bytes); cudaMalloc(&res, bytes); cudaMalloc(&ro, bytes); cudaMalloc(&gm, hidden * 2); cudaMalloc(&out, bytes);
    arfbench::fillRandom(in, tokens * hidden, DType::kBFloat16, r + 1, s);
    arfbench::fillRandom(res, tokens * hidden, DType::kBFloat16, r + 7, s);
    arfbench::fillRandom(gm, hidden, DType::kBFloat16, 3, s);
    commSetStrategy(c, Strategy::kTwoShot, SyncMode::kAuto);
    Shape sh; sh.tokens = tokens; sh.hidden = hidden; sh.dtype = DType::kBFloat16; plan(c, sh, &plans[r]);
    for (int i = 0; i < 20; ++i) {
      if (norm) allReduceAddRMSNorm(c, in, res, ro, gm, out, tokens, hidden, DType::kBFloat16, 1e-6f, s);
      else allReduce(c, in, out, tokens, hidden, DType::kBFloat16, s);
    }
    cudaStreamSynchronize(s);
    arfusionTwoShotTrace(tr[r].data());
  });
  printf("shape %lldx%lld norm %d blocks %d rows/step %d\n", (long long)tokens, (long long)hidden, norm, plans[0].blocks, plans[0].rows_per_step);
  const char* names[] = {"push0", "sig0"};
  for (int r = 0; r < 2; ++r) {
    const int B = plans[r].blocks;
    unsigned long long t0 = ~0ull, tend = 0;
    for (int b = 0; b < B; ++b) { t0 = std::min(t0, tr[r][b * 40]); tend = std::max(tend, tr[r][b * 40 + 36]); }
    printf("rank %d: kernel span %.1f us (first start to last end)\n", r, (tend - t0) / 1e3);
    // Mean and max over blocks of each mark relative to the block's start, and of each interval.
    for (int k = 1; k < 37; ++k) {
      double sum = 0, mx = 0; int cnt = 0;
      for (int b = 0; b < B; ++b) {
        const unsigned long long v = tr[r][b * 40 + k];
        if (v < t0 || v > tend) continue;
        const double rel = (v - t0) / 1e3;
        sum += rel; mx = std::max(mx, rel); ++cnt;
      }
      if (cnt) printf("  mark %2d: n=%3d mean %7.1f max %7.1f us since first start\n", k, cnt, sum / cnt, mx);
    }
    // Block 0 and block B-1 full timeline
    for (int b : {0, B / 2 - 1, B / 2, B - 1}) {
      printf("  block %3d:", b);
      for (int k = 0; k < 37; ++k) { const unsigned long long v = tr[r][b * 40 + k]; if (v >= t0 && v <= tend) printf(" %d:%.1f", k, (v - t0) / 1e3); }
      printf("\n");
    }
  }
  (void)names;
  return 0;
}
