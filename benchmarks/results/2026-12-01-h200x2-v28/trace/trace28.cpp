// Session 28 trace driver (bench only, not landed): per-block %globaltimer marks of the flag
// two-shot (mk_trace28.py) for the last call of 20 replayed in a CUDA graph, 2 ranks.
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <vector>
#include "bench_harness.h"
extern "C" cudaError_t arfusionBlockTrace(unsigned long long* gt);
using namespace arfusion;
int main() {
  arfbench::Group g(2);
  if (!g.error().empty()) { std::printf("%s\n", g.error().c_str()); return 1; }
  struct Cfg { int64_t tokens, hidden; int norm; };
  const char* names[24] = {"entry", "gdwait", "RSpushed", "RSwait<", "RSwait>", "owned", "AGwait<", "AGwait>",
                           "end h0", "end h1", "-", "-", "row0", "row1", "row2", "row3", "row4", "row5", "row6", "row7", "-", "-", "-", "-"};
  for (Cfg cfg : {Cfg{2048, 8192, 1}, Cfg{2048, 8192, 0}, Cfg{2048, 8192, 1}, Cfg{2048, 4096, 1}}) {
    const size_t bytes = cfg.tokens * cfg.hidden * 2;
    std::vector<std::vector<unsigned long long>> gt(2, std::vector<unsigned long long>(160 * 24));
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
      arfusionBlockTrace(gt[r].data());
      cudaGraphExecDestroy(exec); cudaGraphDestroy(graph);
      cudaFree(in); cudaFree(res); cudaFree(ro); cudaFree(gm); cudaFree(out);
    });
    std::printf("=== %lld x %lld %s: %s; blocks %d rows_per_step %d; graph us/call r0 %.2f r1 %.2f\n", (long long)cfg.tokens,
                (long long)cfg.hidden, cfg.norm ? "fused" : "allreduce", plans[0].reason, plans[0].blocks, plans[0].rows_per_step,
                per_call[0], per_call[1]);
    const int B = std::min(plans[0].blocks, 160);
    for (int r = 0; r < 2; ++r) {
      unsigned long long t0 = ~0ull;
      for (int b = 0; b < B; ++b) if (gt[r][b * 24]) t0 = std::min(t0, gt[r][b * 24]);
      std::printf(" rank %d: mark       us from the first block's entry over %d blocks: min p10 median p90 max\n", r, B);
      for (int k = 0; k < 20; ++k) {
        std::vector<double> v;
        for (int b = 0; b < B; ++b) if (gt[r][b * 24 + k]) v.push_back((double(gt[r][b * 24 + k]) - double(t0)) / 1000.0);
        if (v.empty()) continue;
        std::sort(v.begin(), v.end());
        auto q = [&](double f) { return v[std::min(v.size() - 1, size_t(f * (v.size() - 1) + 0.5))]; };
        std::printf("   %-9s %7.2f %7.2f %7.2f %7.2f %7.2f (%zu)\n", names[k], v.front(), q(0.1), q(0.5), q(0.9), v.back(), v.size());
      }
    }
  }
  return 0;
}
