// arfusion-check: validates numerics on this machine. Every path (NCCL path, one-shot, two-shot,
// each sync mode, Auto) x dtype x a grid of shapes (odd hidden sizes and token counts included),
// on all visible GPUs as ranks: fresh random inputs, outputs poisoned before each call, compared with
// a float64 reference at stated tolerances, every element written, outputs bitwise identical on all
// ranks, and bitwise equal to the NCCL path at 2 ranks. Prints the worst absolute error and ulp
// distance per output. Exit 0 all passed, 1 a check failed, 77 too few GPUs (one rank per GPU), 2 usage.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_harness.h"
#include "gpu_harness.h"

using arfusion::DType;

int main(int argc, char** argv) {
  bool quick = false;
  int world = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    else if (!std::strcmp(argv[i], "--world") && i + 1 < argc) world = std::atoi(argv[++i]);
    else {
      std::printf("usage: arfusion-check [--quick] [--world N]\n"
                  "  Checks every arfusion path against a float64 reference and the NCCL path on the GPUs\n"
                  "  of this machine (one rank per GPU, default all). Exit 0 all passed, 1 a check failed,\n"
                  "  77 too few GPUs.\n");
      return std::strcmp(argv[i], "--help") ? arfbench::kExitUsage : arfbench::kExitOk;
    }
  }
  int ngpu = 0;
  if (const std::string why = arfbench::gpuShortfall(1, &ngpu); !why.empty()) {
    std::fprintf(stderr, "arfusion-check: %s; nothing to check.\n", why.c_str());
    return arfbench::kExitSkip;
  }
  if (world == 0) world = ngpu;
  std::vector<arftest::ShapeCase> cases;
  std::vector<arftest::CaseStats> stats;
  uint64_t seed = 424242;
  const std::vector<int64_t> tokens = quick ? std::vector<int64_t>{1, 17, 300} : std::vector<int64_t>{1, 2, 3, 17, 128, 300, 1000};
  const std::vector<int64_t> hiddens = quick ? std::vector<int64_t>{1000, 4096} : std::vector<int64_t>{1000, 2880, 4095, 4096, 8192};
  for (DType d : {DType::kBFloat16, DType::kFloat16, DType::kFloat32})
    for (int64_t t : tokens)
      for (int64_t h : hiddens) cases.push_back({d, t, h, seed++, true});
  stats.resize(cases.size());
  for (size_t i = 0; i < cases.size(); ++i) cases[i].stats = &stats[i];
  std::vector<std::string> results(cases.size());
  arfusion::Config cfg;
  cfg.timeout_seconds = 10;
  std::string skip;
  const std::string err = arftest::runThreadsNccl(world, cfg, [&](arftest::RankCtx& ctx) -> std::string {
    for (size_t i = 0; i < cases.size(); ++i) {
      const std::string e = arftest::scenarioShape(ctx, cases[i]);
      if (ctx.rank == 0) results[i] = e;
      if (!e.empty()) return e;  // ranks stop together (scenarioShape votes after every step)
    }
    return "";
  }, &skip);
  if (!skip.empty()) {
    std::fprintf(stderr, "arfusion-check: %s\n", skip.c_str());
    return arfbench::kExitSkip;
  }
  std::printf("arfusion-check: %d rank(s); each row covers every path x sync mode x op (allreduce, +add, +RMSNorm)\n", world);
  std::printf("%-5s %6s %6s  %-4s %12s %8s %12s %8s %12s %8s  %s\n", "dtype", "tokens", "hidden", "ok", "ar max|err|", "ar ulp",
              "res max|err|", "res ulp", "norm max|err|", "norm ulp", "paths");
  int failed = 0, run = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    const auto& s = stats[i];
    if (s.paths == 0 && results[i].empty()) continue;  // not reached
    ++run;
    const bool ok = results[i].empty();
    failed += !ok;
    std::printf("%-5s %6lld %6lld  %-4s %12.3g %8.2f %12.3g %8.2f %12.3g %8.2f  %d\n", arfusion::toString(c.dtype), (long long)c.tokens,
                (long long)c.hidden, ok ? "ok" : "FAIL", s.max_abs[0], s.max_ulp[0], s.max_abs[1], s.max_ulp[1], s.max_abs[2], s.max_ulp[2], s.paths);
    if (!ok) std::printf("      %s\n", results[i].c_str());
  }
  if (!err.empty() && failed == 0) std::printf("failure: %s\n", err.c_str());
  std::printf("%d of %zu shapes checked, %d failed\n", run, cases.size(), failed);
  return (failed || !err.empty() || run < int(cases.size())) ? arfbench::kExitFailed : arfbench::kExitOk;
}
