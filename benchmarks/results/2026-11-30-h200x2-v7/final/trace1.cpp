// Timeline of the Lamport one-shot (thread 0 of each block: clock64 and %globaltimer at marks
// 0 entry, 1 after the grid-dependency wait, 2 pushes issued, 3 after the push barrier, 4 first peer
// pack arrived, 5 first row's epilogue done, 6 header checked, 7 end) for the last of 20 calls
// replayed in a CUDA graph. build_trace1.sh builds it against a tree with oneshot-trace.patch.
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include "bench_harness.h"
extern "C" cudaError_t arfusionOneShotTrace(long long* clk, unsigned long long* gt);
using namespace arfusion;
int main() {
  arfbench::Group g(2);
  if (!g.error().empty()) { printf("%s\n", g.error().c_str()); return 1; }
  struct Cfg { int64_t tokens, hidden; int norm; };
  for (Cfg cfg : {Cfg{1, 4096, 1}, Cfg{1, 4096, 0}, Cfg{16, 8192, 1}, Cfg{128, 8192, 1}, Cfg{128, 8192, 0}}) {
    const size_t bytes = cfg.tokens * cfg.hidden * 2;
    std::vector<std::vector<long long>> clk(2, std::vector<long long>(1024 * 8));
    std::vector<std::vector<unsigned long long>> gt(2, std::vector<unsigned long long>(1024 * 8));
    std::vector<float> per_call(2);
    std::vector<Plan> plans(2);
    g.onEach([&](int r, Communicator* c, cudaStream_t s) {
      void *in, *res, *ro, *gm, *out;
      cudaMalloc(&in, bytes); cudaMalloc(&res, bytes); cudaMalloc(&ro, bytes); cudaMalloc(&gm, cfg.hidden * 2); cudaMalloc(&out, bytes);
      arfbench::fillRandom(in, cfg.tokens * cfg.hidden, DType::kBFloat16, r + 1, s);
      arfbench::fillRandom(res, cfg.tokens * cfg.hidden, DType::kBFloat16, r + 7, s);
      arfbench::fillRandom(gm, cfg.hidden, DType::kBFloat16, 3, s);
      commSetStrategy(c, Strategy::kOneShot, SyncMode::kAuto);
      Shape sh; sh.tokens = cfg.tokens; sh.hidden = cfg.hidden; sh.dtype = DType::kBFloat16;
      plan(c, sh, &plans[r]);
      cudaGraph_t graph; cudaGraphExec_t exec;
      cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
      for (int i = 0; i < 20; ++i) {
        if (cfg.norm) allReduceAddRMSNorm(c, in, res, ro, gm, out, cfg.tokens, cfg.hidden, DType::kBFloat16, 1e-6f, s);
        else allReduce(c, in, out, cfg.tokens, cfg.hidden, DType::kBFloat16, s);
      }
      cudaStreamEndCapture(s, &graph);
      cudaGraphInstantiate(&exec, graph, 0);
      cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
      for (int rep = 0; rep < 3; ++rep) { cudaEventRecord(e0, s); cudaGraphLaunch(exec, s); cudaEventRecord(e1, s); cudaEventSynchronize(e1); }
      float ms; cudaEventElapsedTime(&ms, e0, e1); per_call[r] = ms * 1000 / 20;
      arfusionOneShotTrace(clk[r].data(), gt[r].data());
      cudaGraphExecDestroy(exec); cudaGraphDestroy(graph);
      cudaFree(in); cudaFree(res); cudaFree(ro); cudaFree(gm); cudaFree(out);
    });
    printf("=== %lld x %lld %s, plan %s blocks %d rows %d; graph us/call r0 %.2f r1 %.2f\n", (long long)cfg.tokens, (long long)cfg.hidden,
           cfg.norm ? "fused" : "allreduce", plans[0].reason, plans[0].blocks, plans[0].rows_per_step, per_call[0], per_call[1]);
    for (int r = 0; r < 2; ++r) {
      const int B = plans[r].blocks;
      // cycles per ns from block 0's whole span
      const double cpn = double(clk[r][7] - clk[r][0]) / double(gt[r][7] - gt[r][0] + 1);
      printf(" rank %d (%.2f cycles/ns):", r, cpn);
      for (int k = 1; k < 8; ++k) {
        double mean = 0, mx = 0;
        for (int b = 0; b < B; ++b) { const double d = double(clk[r][b * 8 + k] - clk[r][b * 8 + k - 1]) / cpn / 1000.0; mean += d; mx = std::max(mx, d); }
        printf("  %d-%d %.2f/%.2f", k - 1, k, mean / B, mx);
      }
      unsigned long long s0 = ~0ull, s1 = 0;
      for (int b = 0; b < B; ++b) { s0 = std::min(s0, gt[r][b * 8]); s1 = std::max(s1, gt[r][b * 8 + 7]); }
      printf("  | span all blocks %.2f us\n", (s1 - s0) / 1000.0);
    }
  }
  return 0;
}
