// Session 19 trace driver (bench-only experiment, not landed): per-warp marks of the Lamport
// one-shot's first 16 warps (mk_trace.py) for the last call of 20 replayed in a CUDA graph.
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <vector>
#include "bench_harness.h"
extern "C" cudaError_t arfusionWarpTrace(long long* clk, unsigned long long* gt);
using namespace arfusion;
int main() {
  arfbench::Group g(2);
  if (!g.error().empty()) { std::printf("%s\n", g.error().c_str()); return 1; }
  struct Cfg { int64_t tokens, hidden; int norm; };
  const char* names[16] = {"entry", "gdwait", "epoch", "pushed", "pushbar", "arrived", "resout", "warpsum",
                           "exchange", "scale", "normout", "trigger", "header", "end", "sum", "resid"};
  for (Cfg cfg : {Cfg{1, 4096, 1}, Cfg{1, 4096, 0}, Cfg{1, 4096, 1}, Cfg{128, 8192, 1}}) {
    const size_t bytes = cfg.tokens * cfg.hidden * 2;
    std::vector<std::vector<long long>> clk(2, std::vector<long long>(256));
    std::vector<std::vector<unsigned long long>> gt(2, std::vector<unsigned long long>(256));
    std::vector<float> per_call(2);
    std::vector<Plan> plans(2);
    g.onEach([&](int r, Communicator* c, cudaStream_t s) {
      void *in, *res, *ro, *gm, *out;
      cudaMalloc(&in, bytes); cudaMalloc(&res, bytes); cudaMalloc(&ro, bytes); cudaMalloc(&gm, cfg.hidden * 2); cudaMalloc(&out, bytes);
      arfbench::fillRandom(in, cfg.tokens * cfg.hidden, DType::kBFloat16, r + 1, s);
      arfbench::fillRandom(res, cfg.tokens * cfg.hidden, DType::kBFloat16, r + 7, s);
      arfbench::fillRandom(gm, cfg.hidden, DType::kBFloat16, 3, s);
      Shape sh; sh.tokens = cfg.tokens; sh.hidden = cfg.hidden; sh.dtype = DType::kBFloat16;
      sh.op = cfg.norm ? Op::kAllReduceAddRMSNorm : Op::kAllReduce;
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
      for (int rep = 0; rep < 5; ++rep) { cudaEventRecord(e0, s); cudaGraphLaunch(exec, s); cudaEventRecord(e1, s); cudaEventSynchronize(e1); }
      float ms; cudaEventElapsedTime(&ms, e0, e1); per_call[r] = ms * 1000 / 20;
      arfusionWarpTrace(clk[r].data(), gt[r].data());
      cudaGraphExecDestroy(exec); cudaGraphDestroy(graph);
      cudaFree(in); cudaFree(res); cudaFree(ro); cudaFree(gm); cudaFree(out);
    });
    std::printf("=== %lld x %lld %s: %s; blocks %d row_blocks %d; graph us/call r0 %.2f r1 %.2f\n", (long long)cfg.tokens,
                (long long)cfg.hidden, cfg.norm ? "fused" : "allreduce", plans[0].reason, plans[0].blocks, plans[0].row_blocks,
                per_call[0], per_call[1]);
    for (int r = 0; r < 2; ++r) {
      // ns from slot 0's entry: globaltimer (all warps), and clock64 within each group of 4 warps
      // (one block of a 4-block cluster) relative to that group's first warp entry, at its SM's rate.
      std::printf(" rank %d: mark  globaltimer min/max over 16 warps | clock per group of 4 warps (min..max)\n", r);
      for (int k : {0, 1, 2, 3, 4, 5, 14, 15, 6, 7, 8, 9, 10, 11, 12, 13}) {
        double mn = 1e30, mx = -1e30; int seen = 0;
        for (int w = 0; w < 16; ++w) {
          if (clk[r][w * 16 + k] == 0) continue;
          const double d = double(gt[r][w * 16 + k]) - double(gt[r][0]);
          mn = std::min(mn, d); mx = std::max(mx, d); ++seen;
        }
        if (!seen) { std::printf("   %-9s -\n", names[k]); continue; }
        std::printf("   %-9s %7.0f %7.0f (%2d) |", names[k], mn, mx, seen);
        for (int q = 0; q < 4; ++q) {
          const int w0 = q * 4;
          const double cpn = double(clk[r][w0 * 16 + 13] - clk[r][w0 * 16 + 0]) / double(gt[r][w0 * 16 + 13] - gt[r][w0 * 16 + 0] + 1);
          double a = 1e30, b = -1e30; int n = 0;
          for (int w = w0; w < w0 + 4; ++w) {
            if (clk[r][w * 16 + k] == 0) continue;
            const double d = double(clk[r][w * 16 + k] - clk[r][w0 * 16 + 0]) / cpn;
            a = std::min(a, d); b = std::max(b, d); ++n;
          }
          if (n) std::printf(" %5.0f..%-5.0f", a, b); else std::printf("      -     ");
        }
        std::printf("\n");
      }
    }
  }
  return 0;
}
