// Session 21 trace driver (bench-only experiment, not landed): per-block %globaltimer marks of the
// Lamport one-shot (mk_trace21.py) for the last two calls of a graph of 20 calls, 128 x 8192 bf16,
// fused (the held one-block kernel) and the plain allreduce. Per rank (the GPUs' timers are not
// aligned), ns from the earlier call's first block entry: min / p10 / median / p90 / max over the
// blocks of each mark, then the gap from the earlier call's last trigger to the later call's first
// entry. Raw marks: trace21-raw.txt.
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <vector>
#include "bench_harness.h"
extern "C" cudaError_t arfusionBlockTrace(unsigned long long* out);
using namespace arfusion;
int main() {
  arfbench::Group g(2);
  if (!g.error().empty()) { std::printf("%s\n", g.error().c_str()); return 1; }
  const char* names[8] = {"entry", "gdwait", "pushed", "pushbar", "lastsum", "epilogue", "trigger", "end"};
  FILE* raw = std::fopen("trace21-raw.txt", "w");
  struct Cfg { int64_t tokens, hidden; int norm; };
  for (Cfg cfg : {Cfg{128, 8192, 1}, Cfg{128, 8192, 0}, Cfg{128, 8192, 1}, Cfg{64, 8192, 1}}) {
    const size_t bytes = cfg.tokens * cfg.hidden * 2;
    std::vector<std::vector<unsigned long long>> bt(2, std::vector<unsigned long long>(2 * 256 * 8));
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
      arfusionBlockTrace(bt[r].data());
      cudaGraphExecDestroy(exec); cudaGraphDestroy(graph);
      cudaFree(in); cudaFree(res); cudaFree(ro); cudaFree(gm); cudaFree(out);
    });
    const int nb = plans[0].blocks;
    std::printf("=== %lld x %lld %s: %s; blocks %d; graph us/call r0 %.2f r1 %.2f\n", (long long)cfg.tokens, (long long)cfg.hidden,
                cfg.norm ? "fused" : "allreduce", plans[0].reason, nb, per_call[0], per_call[1]);
    for (int r = 0; r < 2; ++r) {
      auto at = [&](int parity, int b, int k) { return bt[r][(size_t(parity) * 256 + b) * 8 + k]; };
      // The later call has the later entries.
      const int later = at(1, 0, 0) > at(0, 0, 0) ? 1 : 0, earlier = 1 - later;
      unsigned long long t0 = ~0ull;
      for (int b = 0; b < nb; ++b) t0 = std::min(t0, at(earlier, b, 0));
      for (int call = 0; call < 2; ++call) {
        const int par = call == 0 ? earlier : later;
        std::printf(" rank %d call %s:   mark      min     p10  median     p90     max (ns)\n", r, call == 0 ? "k  " : "k+1");
        for (int k = 0; k < 8; ++k) {
          std::vector<double> v;
          for (int b = 0; b < nb; ++b)
            if (at(par, b, k)) v.push_back(double(at(par, b, k)) - double(t0));
          if (v.empty()) { std::printf("   %-9s -\n", names[k]); continue; }
          std::sort(v.begin(), v.end());
          auto q = [&](double f) { return v[std::min(v.size() - 1, size_t(f * (v.size() - 1) + 0.5))]; };
          std::printf("   %-9s %7.0f %7.0f %7.0f %7.0f %7.0f\n", names[k], v.front(), q(0.1), q(0.5), q(0.9), v.back());
        }
        for (int b = 0; b < nb; ++b) {
          std::fprintf(raw, "%lld %lld %d r%d call%d b%d", (long long)cfg.tokens, (long long)cfg.hidden, cfg.norm, r, call, b);
          for (int k = 0; k < 8; ++k) std::fprintf(raw, " %lld", at(par, b, k) ? (long long)(at(par, b, k) - t0) : -1LL);
          std::fprintf(raw, "\n");
        }
      }
      unsigned long long last_trig = 0, next_entry = ~0ull, last_end = 0;
      for (int b = 0; b < nb; ++b) {
        last_trig = std::max(last_trig, at(earlier, b, 6));
        last_end = std::max(last_end, at(earlier, b, 7));
        next_entry = std::min(next_entry, at(later, b, 0));
      }
      std::printf(" rank %d: call k's last trigger %.0f, last end %.0f, call k+1's first entry %.0f (+%.0f after the trigger)\n", r,
                  double(last_trig - t0), double(last_end - t0), double(next_entry - t0), double(next_entry) - double(last_trig));
    }
  }
  std::fclose(raw);
  return 0;
}
