// Google Benchmark suite: one family per path, arguments tokens x hidden x dtype, timed with CUDA
// events around CUDA-graph replays (manual time = per-call time, max over ranks, median of 7
// replays). Counters: us, algbw and busbw (GB/s); speedup_vs_nccl: the NCCL reference of the same
// shape and op measured earlier in the same run (nccl_path_fused for the fused op, nccl_allreduce
// for the plain allreduce); pct_peer_bw: bus bandwidth (bytes/t * 2(n-1)/n, what each rank must
// send and receive in a ring or two-shot allreduce) over the same run's peer-store bandwidth at the
// same message size (SM stores into the next rank's memory, every rank at once; measured at the
// anchor shapes only; at 8 KiB both times are mostly launch and crossing, so there it is a latency
// ratio), and pct_peer_bw_128MiB over the peer store at 128 MiB, the device's best
// (peer_copy is the copy engine's). Every fused row is labelled with its plan (strategy/sync mode,
// grid, rows per step). All buffers stay the same across the calls of a replay, as in the anchors'
// method (../shared/ANCHORS.md): messages that fit in L2 read their inputs from it.
// Ranks: threads of one process, one GPU each (ARFUSION_BENCH_WORLD, default: all visible GPUs).
// Single-GPU families (d2d_copy, add_rmsnorm and its quantized variants) report HBM bandwidth and
// pct_of_copy, their bandwidth over a same-run device-to-device copy of the same traffic; families
// with a quantized output (_fp8, _fp8-token, _fp8-group, _nvfp4: written besides norm_out; with
// _only after the format: instead of it, as an engine whose next GEMM reads it calls) or Gemma
// weights (_gemma: the extended epilogue without a quantized output) report cost_vs_plain, their
// time over the same family's plain one. On one GPU the collectives are replaced by local2_* families:
// two ranks sharing the GPU (the cost of a feature, not the link).
// Exit 0 when every benchmark ran, 1 when any errored (its row says why), 77 without a GPU.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <map>
#include <memory>
#include <array>
#include <tuple>
#include <vector>

#include "bench_harness.h"

using arfbench::Path;
using arfusion::DType;
using arfusion::Op;

namespace {

// The groups: every visible GPU over NCCL (ARFUSION_BENCH_WORLD ranks, default all); one rank alone
// (the single-GPU kernels); two ranks sharing GPU 0 (what one GPU can time of a fused call).
arfbench::Group& group() {
  static std::unique_ptr<arfbench::Group> g = [] {
    int n = 0;
    cudaGetDeviceCount(&n);
    const char* w = std::getenv("ARFUSION_BENCH_WORLD");
    return std::make_unique<arfbench::Group>(w ? std::atoi(w) : (n > 0 ? n : 1));
  }();
  return *g;
}
arfbench::Group& single() {
  static arfbench::Group g(1, arfusion::Config(), /*local=*/true);
  return g;
}
arfbench::Group& local2() {
  static arfbench::Group g(2, arfusion::Config(), /*local=*/true);
  return g;
}
enum class Where { kAllGpus, kSingle, kLocal2 };
arfbench::Group& groupOf(Where w) { return w == Where::kAllGpus ? group() : w == Where::kSingle ? single() : local2(); }

using ShapeKey = std::tuple<int64_t, int64_t, int, int>;  // tokens, hidden, dtype, op
// This run's references per shape: the NCCL path (collectives), the copy's HBM bandwidth (single-GPU
// kernels), each family's time without a quantized output (the same family with one), and the
// peer-store bandwidth per message size.
std::map<ShapeKey, double> g_nccl_us, g_copy_gbs;
std::map<std::pair<std::string, ShapeKey>, double> g_plain_us;
std::map<double, double> g_peer_gbs;
int g_errors = 0;  // benchmarks that could not run (SkipWithError)

void skipWithError(benchmark::State& state, const std::string& why) {
  ++g_errors;
  state.SkipWithError(why.c_str());
}

struct Family {
  std::string name;   // the registered name: base + "_" + quant format where there is one
  std::string base;   // the family without its quantized output (the cost_vs_plain reference)
  Where where;
  Path path;
  Op op;
  arfusion::QuantFormat quant;
  bool gemma = false;     // Gemma weights: the extended epilogue without a quantized output
  bool norm_out = true;  // false: the quantized output instead of norm_out
};

void run(benchmark::State& state, Family f) {
  const int64_t tokens = state.range(0), hidden = state.range(1);
  const DType d = static_cast<DType>(state.range(2));
  arfbench::Group& g = groupOf(f.where);
  if (!g.error().empty()) {
    skipWithError(state, g.error());
    return;
  }
  arfbench::Timing t;
  for (auto _ : state) {
    t = g.time(f.path, f.op, d, tokens, hidden, f.quant, f.gemma, f.norm_out);
    if (!t.error.empty()) {
      skipWithError(state, t.error);
      return;
    }
    state.SetIterationTime(t.us * 1e-6);
  }
  const double bytes = double(tokens * hidden) * (d == DType::kFloat32 ? 4 : 2);
  const int n = g.world();
  const ShapeKey key{tokens, hidden, int(d), int(f.op)};
  state.counters["us"] = t.us;
  if (f.path == Path::kCopy || f.path == Path::kAddRMSNorm) {  // single-GPU: HBM bandwidth
    const double traffic = f.path == Path::kCopy ? 4 * bytes : arfbench::hbmBytes(tokens, hidden, d, f.quant, f.norm_out);
    const double gbs = traffic / (t.us * 1e-6) / 1e9;
    state.counters["hbm_GBs"] = gbs;
    if (f.path == Path::kCopy) g_copy_gbs[key] = gbs;
    else if (auto it = g_copy_gbs.find(key); it != g_copy_gbs.end()) state.counters["pct_of_copy"] = 100.0 * gbs / it->second;
  } else {
    state.counters["algbw_GBs"] = bytes / (t.us * 1e-6) / 1e9;
    state.counters["busbw_GBs"] = bytes / (t.us * 1e-6) / 1e9 * 2.0 * (n - 1) / n;
  }
  const bool collective = f.where == Where::kAllGpus && f.path != Path::kPeerStore && f.path != Path::kPeerCopy;
  const bool reference = f.path == Path::kNcclPath || f.path == Path::kNcclAllReduce;
  if (collective && reference && f.quant == arfusion::QuantFormat::kNone) g_nccl_us[key] = t.us;
  if (auto it = g_nccl_us.find(key); collective && !reference && it != g_nccl_us.end()) state.counters["speedup_vs_nccl"] = it->second / t.us;
  if (f.quant == arfusion::QuantFormat::kNone && !f.gemma) g_plain_us[{f.base, key}] = t.us;
  else if (auto it = g_plain_us.find({f.base, key}); it != g_plain_us.end()) state.counters["cost_vs_plain"] = t.us / it->second;
  if (f.path == Path::kPeerStore) g_peer_gbs[bytes] = bytes / (t.us * 1e-6) / 1e9;
  if (auto it = g_peer_gbs.find(bytes); collective && it != g_peer_gbs.end())
    state.counters["pct_peer_bw"] = 100.0 * state.counters["busbw_GBs"] / it->second;
  if (auto it = g_peer_gbs.find(double(8192) * 8192 * 2); collective && it != g_peer_gbs.end())
    state.counters["pct_peer_bw_128MiB"] = 100.0 * state.counters["busbw_GBs"] / it->second;
  if (!t.plan.empty()) state.SetLabel(t.plan);
}

using Shapes = std::vector<std::array<int64_t, 3>>;
// The anchor shapes (the project's measured peers), and decode batches of 8 and 32.
Shapes anchorShapes() {
  Shapes v;
  for (int64_t h : {4096, 8192})
    for (int64_t t : {1, 4, 8, 16, 32, 64, 128, 256, 512, 2048, 8192}) v.push_back({t, h, int(DType::kBFloat16)});
  v.push_back({1, 4096, int(DType::kFloat16)});
  v.push_back({128, 8192, int(DType::kFloat16)});
  return v;
}
const arfusion::QuantFormat kFormats[] = {arfusion::QuantFormat::kFp8, arfusion::QuantFormat::kFp8PerToken,
                                          arfusion::QuantFormat::kFp8PerGroup, arfusion::QuantFormat::kNvfp4};

void add(const Family& f, const Shapes& shapes) {
  auto* b = benchmark::RegisterBenchmark(f.name.c_str(), run, f);
  for (const auto& s : shapes) b->Args({s[0], s[1], s[2]});
  b->UseManualTime()->Iterations(1)->Unit(benchmark::kMicrosecond);
}
// A family, its Gemma variant (the extended epilogue alone) and its quantized variants (every
// format, besides norm_out, then instead of it), registered in that order.
void addWithOptions(const std::string& name, Where w, Path p, const Shapes& plain, const Shapes& quant) {
  add({name, name, w, p, Op::kAllReduceAddRMSNorm, arfusion::QuantFormat::kNone}, plain);
  add({name + "_gemma", name, w, p, Op::kAllReduceAddRMSNorm, arfusion::QuantFormat::kNone, true}, quant);
  for (bool norm_out : {true, false})
    for (arfusion::QuantFormat q : kFormats)
      add({name + "_" + arfusion::toString(q) + (norm_out ? "" : "_only"), name, w, p, Op::kAllReduceAddRMSNorm, q, false, norm_out},
          quant);
}

void registerAll(int gpus) {
  const Shapes anchors = anchorShapes();
  const Shapes quant_pair = {{1, 4096, int(DType::kBFloat16)}, {128, 8192, int(DType::kBFloat16)}, {512, 8192, int(DType::kBFloat16)}};
  const Shapes bf = {{1, 4096, int(DType::kBFloat16)}, {16, 8192, int(DType::kBFloat16)}, {128, 8192, int(DType::kBFloat16)},
                     {512, 8192, int(DType::kBFloat16)}, {1024, 8192, int(DType::kBFloat16)}, {2048, 8192, int(DType::kBFloat16)},
                     {8192, 8192, int(DType::kBFloat16)}, {2048, 4096, int(DType::kBFloat16)}, {2048, 8192, int(DType::kFloat16)}};
  if (gpus >= 2) {
    const Family peer_copy{"peer_copy", "peer_copy", Where::kAllGpus, Path::kPeerCopy, Op::kAllReduce, arfusion::QuantFormat::kNone};
    add(peer_copy, {{8192, 8192, int(DType::kBFloat16)}});
    // Peer stores at the target shapes: what the links give SM stores at that message size.
    add({"peer_store", "peer_store", Where::kAllGpus, Path::kPeerStore, Op::kAllReduce, arfusion::QuantFormat::kNone},
        {{1, 4096, 1}, {128, 8192, 1}, {512, 8192, 1}, {2048, 8192, 1}, {8192, 8192, 1}});
    add({"nccl_allreduce", "nccl_allreduce", Where::kAllGpus, Path::kNcclAllReduce, Op::kAllReduce, arfusion::QuantFormat::kNone}, anchors);
  }
  // Single GPU: the copy of the same traffic first, then the add-RMSNorm kernel, plain and quantized.
  add({"d2d_copy", "d2d_copy", Where::kSingle, Path::kCopy, Op::kAllReduceAddRMSNorm, arfusion::QuantFormat::kNone}, gpus >= 2 ? anchors : bf);
  addWithOptions("add_rmsnorm", Where::kSingle, Path::kAddRMSNorm, gpus >= 2 ? anchors : bf, bf);
  if (gpus >= 2) {
    addWithOptions("nccl_path_fused", Where::kAllGpus, Path::kNcclPath, anchors, quant_pair);
    add({"oneshot_fused", "oneshot_fused", Where::kAllGpus, Path::kOneShot, Op::kAllReduceAddRMSNorm, arfusion::QuantFormat::kNone}, anchors);
    add({"twoshot_fused", "twoshot_fused", Where::kAllGpus, Path::kTwoShot, Op::kAllReduceAddRMSNorm, arfusion::QuantFormat::kNone}, anchors);
    add({"oneshot_flag_fused", "oneshot_flag_fused", Where::kAllGpus, Path::kOneShotFlag, Op::kAllReduceAddRMSNorm,
         arfusion::QuantFormat::kNone}, anchors);
    addWithOptions("auto_fused", Where::kAllGpus, Path::kAuto, anchors, quant_pair);
    add({"oneshot_allreduce", "oneshot_allreduce", Where::kAllGpus, Path::kOneShot, Op::kAllReduce, arfusion::QuantFormat::kNone}, anchors);
    add({"twoshot_allreduce", "twoshot_allreduce", Where::kAllGpus, Path::kTwoShot, Op::kAllReduce, arfusion::QuantFormat::kNone}, anchors);
  } else {
    // One GPU: two ranks sharing it, a fused call with and without a quantized output (the cost of
    // the feature; the link is not measured).
    const Shapes local = {{1, 4096, 1}, {16, 8192, 1}, {128, 8192, 1}, {512, 8192, 1}, {2048, 8192, 1}};
    addWithOptions("local2_oneshot_fused", Where::kLocal2, Path::kOneShot, local, local);
    addWithOptions("local2_twoshot_fused", Where::kLocal2, Path::kTwoShot, local, local);
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return arfbench::kExitUsage;
  int gpus = 0;
  if (const std::string why = arfbench::gpuShortfall(1, &gpus); !why.empty()) {
    std::fprintf(stderr, "bench_arfusion: %s; nothing to measure.\n", why.c_str());
    return arfbench::kExitSkip;
  }
  registerAll(gpus);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (g_errors) std::fprintf(stderr, "bench_arfusion: %d benchmark(s) could not run (their rows say why)\n", g_errors);
  return g_errors ? arfbench::kExitFailed : arfbench::kExitOk;
}
