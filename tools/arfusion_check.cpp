// arfusion-check: validates numerics on this machine. Every path (NCCL path, one-shot, two-shot,
// each sync mode, Auto) x dtype x a grid of shapes (odd hidden sizes and token counts included),
// on all visible GPUs as ranks: fresh random inputs, outputs poisoned before each call, compared with
// a float64 reference at stated tolerances, every element written, outputs bitwise identical on all
// ranks, and bitwise equal to the NCCL path at 2 ranks. Prints the worst absolute error and ulp
// distance per output. Then every quantized output format and scale layout (with Gemma weights and
// without a residual on some shapes): values and scales byte for byte against the recipe, dequantized
// rows within the format's bound, bitwise equal across ranks and paths. --local N runs N ranks on
// GPU 0 (no NCCL: the fused paths against the reference and each other).
// Exit 0 all passed, 1 a check failed, 77 too few GPUs (one rank per GPU), 2 usage.
#include <algorithm>
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
  int world = 0, local = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    else if (!std::strcmp(argv[i], "--world") && i + 1 < argc) world = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--local") && i + 1 < argc) local = std::atoi(argv[++i]);
    else {
      std::printf("usage: arfusion-check [--quick] [--world N | --local N]\n"
                  "  Checks every arfusion path and every quantized output format against a float64\n"
                  "  reference and the NCCL path on the GPUs of this machine (one rank per GPU, default all;\n"
                  "  --local N: N ranks sharing GPU 0, without NCCL). Exit 0 all passed, 1 a check failed,\n"
                  "  77 too few GPUs.\n");
      return std::strcmp(argv[i], "--help") ? arfbench::kExitUsage : arfbench::kExitOk;
    }
  }
  int ngpu = 0;
  if (const std::string why = arfbench::gpuShortfall(1, &ngpu); !why.empty()) {
    std::fprintf(stderr, "arfusion-check: %s; nothing to check.\n", why.c_str());
    return arfbench::kExitSkip;
  }
  if (local != 0 && (local < 2 || local > 8)) {
    std::fprintf(stderr, "arfusion-check: --local takes 2 to 8 ranks (got %d)\n", local);
    return arfbench::kExitUsage;
  }
  if (world == 0) world = local ? local : ngpu;
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
  // The quantized outputs: every format and layout, three dtypes, token counts around the layouts'
  // padding; Gemma weights and the residual-free norm on some.
  std::vector<arftest::QuantShapeCase> qcases;
  for (const arftest::QuantCase& q : arftest::everyQuantCase())
    for (DType d : {DType::kBFloat16, DType::kFloat16, DType::kFloat32})
      for (int64_t t : quick ? std::vector<int64_t>{3, 130} : std::vector<int64_t>{1, 3, 130, 300})
        for (int64_t h : quick ? std::vector<int64_t>{4096} : std::vector<int64_t>{1024, 4096, 8192}) {
          qcases.push_back({d, t, h, seed, q, seed % 3 == 0, seed % 5 == 0});
          ++seed;
        }
  const std::string kNotReached = "not reached";
  std::vector<std::string> results(cases.size()), qresults(qcases.size(), kNotReached);
  arfusion::Config cfg;
  cfg.timeout_seconds = 10;
  std::string skip;
  const arftest::Scenario all = [&](arftest::RankCtx& ctx) -> std::string {
    for (size_t i = 0; i < cases.size(); ++i) {
      const std::string e = arftest::scenarioShape(ctx, cases[i]);
      if (ctx.rank == 0) results[i] = e;
      if (!e.empty()) return e;  // ranks stop together (the scenarios vote after every step)
    }
    for (size_t i = 0; i < qcases.size(); ++i) {
      const std::string e = arftest::scenarioQuant(ctx, qcases[i]);
      if (ctx.rank == 0) qresults[i] = e;
      if (!e.empty()) return e;
    }
    return "";
  };
  // A local group's ranks share GPU 0's SMs: each gets a share of the blocks so all grids are resident.
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const std::string err = local ? arftest::runLocalGroup(world, cfg, std::max(1, sms / world), all, &skip)
                                : arftest::runThreadsNccl(world, cfg, all, &skip);
  if (!skip.empty()) {
    std::fprintf(stderr, "arfusion-check: %s\n", skip.c_str());
    return arfbench::kExitSkip;
  }
  std::printf("arfusion-check: %d rank(s)%s; each row covers every path x sync mode x op (allreduce, +add, +RMSNorm)\n", world,
              local ? " on one GPU (no NCCL path)" : "");
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
  // Quantized outputs: one line per format and layout.
  int qrun = 0, qfailed = 0;
  std::printf("\nquantized outputs (values and scales byte for byte, dequantized within the format's bound, every path):\n");
  for (const arftest::QuantCase& q : arftest::everyQuantCase()) {
    int n = 0, bad = 0, reached = 0;
    std::string first;
    for (size_t i = 0; i < qcases.size(); ++i) {
      const auto& c = qcases[i];
      if (c.quant.format != q.format || c.quant.layout != q.layout || c.quant.pow2 != q.pow2) continue;
      ++n;
      if (qresults[i] == kNotReached) continue;  // the scenarios stop at the first failure
      ++reached;
      if (!qresults[i].empty()) {
        ++bad;
        if (first.empty()) first = qresults[i];
      }
    }
    qrun += reached;
    qfailed += bad;
    std::printf("  %-9s %-14s%s %3d of %3d shapes %s\n", arfusion::toString(q.format), arfusion::toString(q.layout),
                q.pow2 ? " pow2" : "     ", reached, n, bad ? "FAIL" : reached == n ? "ok" : "not reached");
    if (!first.empty()) std::printf("      %s\n", first.c_str());
  }
  if (!err.empty() && failed == 0 && qfailed == 0) std::printf("failure: %s\n", err.c_str());
  std::printf("%d of %zu shapes and %d of %zu quantized cases checked, %d failed\n", run, cases.size(), qrun, qcases.size(),
              failed + qfailed);
  return (failed || qfailed || !err.empty() || run < int(cases.size()) || qrun < int(qcases.size())) ? arfbench::kExitFailed
                                                                                                      : arfbench::kExitOk;
}
