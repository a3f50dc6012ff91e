// Per-warp timeline of block 0 of the Lamport one-shot (lane 0 of each warp, clock64 at marks 0 entry,
// 1 after the grid-dependency wait, 2 pushes issued, 3 after the push barrier, 4 first peer pack
// arrived, 5 before the norm's block reduction, 6 after BlockReduce, 7 scale known, 8 row done,
// 9 end, 10 epoch loaded, 11 first input pack loaded) for the last of 20 calls replayed in a CUDA graph. Built against a tree made by mk.py.
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include "bench_harness.h"
extern "C" cudaError_t arfusionWarpTrace(long long* clk, unsigned long long* gt);
using namespace arfusion;
int main() {
  arfbench::Group g(2);
  if (!g.error().empty()) { printf("%s\n", g.error().c_str()); return 1; }
  struct Cfg { int64_t tokens, hidden; int norm; };
  for (Cfg cfg : {Cfg{1, 4096, 1}, Cfg{1, 4096, 0}, Cfg{1, 4096, 1}, Cfg{16, 8192, 1}}) {
    const size_t bytes = cfg.tokens * cfg.hidden * 2;
    std::vector<std::vector<long long>> clk(2, std::vector<long long>(192));
    std::vector<std::vector<unsigned long long>> gt(2, std::vector<unsigned long long>(192));
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
      arfusionWarpTrace(clk[r].data(), gt[r].data());
      cudaGraphExecDestroy(exec); cudaGraphDestroy(graph);
      cudaFree(in); cudaFree(res); cudaFree(ro); cudaFree(gm); cudaFree(out);
    });
    printf("=== %lld x %lld %s, plan %s blocks %d rows %d; graph us/call r0 %.2f r1 %.2f\n", (long long)cfg.tokens, (long long)cfg.hidden,
           cfg.norm ? "fused" : "allreduce", plans[0].reason, plans[0].blocks, plans[0].rows_per_step, per_call[0], per_call[1]);
    for (int r = 0; r < 2; ++r) {
      const double cpn = double(clk[r][9] - clk[r][0]) / double(gt[r][9] - gt[r][0] + 1);
      printf(" rank %d (%.2f cycles/ns), ns from warp 0 entry, min/max over 16 warps (wall: globaltimer of warp 0 entry %llu):\n", r, cpn, gt[r][0]);
      const char* names[12] = {"entry", "gdwait", "pushed", "pushbar", "arrived", "prenorm", "reduced", "scale", "rowdone", "end", "epoch", "input"};
      for (int k : {0, 1, 10, 11, 2, 3, 4, 5, 6, 7, 8, 9}) {
        double mn = 1e30, mx = -1e30; int seen = 0;
        for (int w = 0; w < 16; ++w) { if (clk[r][w * 12 + k] == 0) continue; const double d = double(clk[r][w * 12 + k] - clk[r][0]) / cpn; mn = std::min(mn, d); mx = std::max(mx, d); ++seen; }
        if (seen) printf("   %-8s %7.0f %7.0f  (%d warps)\n", names[k], mn, mx, seen); else printf("   %-8s -\n", names[k]);
      }
    }
  }
  return 0;
}
