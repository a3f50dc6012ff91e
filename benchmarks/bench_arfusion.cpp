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
// Exit 0 when every benchmark ran, 1 when any errored (its row says why), 77 without a GPU.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <map>
#include <memory>
#include <tuple>

#include "bench_harness.h"

using arfbench::Path;
using arfusion::DType;
using arfusion::Op;

namespace {

arfbench::Group& group() {
  static std::unique_ptr<arfbench::Group> g = [] {
    int n = 0;
    cudaGetDeviceCount(&n);
    const char* w = std::getenv("ARFUSION_BENCH_WORLD");
    return std::make_unique<arfbench::Group>(w ? std::atoi(w) : (n > 0 ? n : 1));
  }();
  return *g;
}

// This run's NCCL reference per shape and op, and its peer-store bandwidth per message size.
std::map<std::tuple<int64_t, int64_t, int, int>, double> g_nccl_us;
std::map<double, double> g_peer_gbs;
int g_errors = 0;  // benchmarks that could not run (SkipWithError)

void skipWithError(benchmark::State& state, const std::string& why) {
  ++g_errors;
  state.SkipWithError(why.c_str());
}

void run(benchmark::State& state, Path path, Op op) {
  const int64_t tokens = state.range(0), hidden = state.range(1);
  const DType d = static_cast<DType>(state.range(2));
  if (!group().error().empty()) {
    skipWithError(state, group().error());
    return;
  }
  if (group().world() < 2 && path != Path::kAddRMSNorm) {
    skipWithError(state, "needs 2 GPUs");
    return;
  }
  arfbench::Timing t;
  for (auto _ : state) {
    t = group().time(path, op, d, tokens, hidden);
    if (!t.error.empty()) {
      skipWithError(state, t.error);
      return;
    }
    state.SetIterationTime(t.us * 1e-6);
  }
  const double bytes = double(tokens * hidden) * (d == DType::kFloat32 ? 4 : 2);
  const int n = group().world();
  state.counters["us"] = t.us;
  state.counters["algbw_GBs"] = bytes / (t.us * 1e-6) / 1e9;
  state.counters["busbw_GBs"] = bytes / (t.us * 1e-6) / 1e9 * 2.0 * (n - 1) / n;
  const bool collective = path != Path::kAddRMSNorm && path != Path::kPeerStore && path != Path::kPeerCopy;
  const std::tuple<int64_t, int64_t, int, int> key{tokens, hidden, int(d), int(op)};
  const bool reference = path == Path::kNcclPath || path == Path::kNcclAllReduce;
  if (reference) g_nccl_us[key] = t.us;
  if (auto it = g_nccl_us.find(key); collective && !reference && it != g_nccl_us.end())
    state.counters["speedup_vs_nccl"] = it->second / t.us;
  if (path == Path::kPeerStore) g_peer_gbs[bytes] = bytes / (t.us * 1e-6) / 1e9;
  if (auto it = g_peer_gbs.find(bytes); collective && it != g_peer_gbs.end())
    state.counters["pct_peer_bw"] = 100.0 * state.counters["busbw_GBs"] / it->second;
  if (auto it = g_peer_gbs.find(double(8192) * 8192 * 2); collective && it != g_peer_gbs.end())
    state.counters["pct_peer_bw_128MiB"] = 100.0 * state.counters["busbw_GBs"] / it->second;
  if (!t.plan.empty()) state.SetLabel(t.plan);
}

// The anchor shapes of ../shared/ANCHORS.md, and decode batches of 8 and 32 (the one-shot's rows
// over clusters end at 128 KiB: 8 x 8192 is the largest such message of 8192-wide rows).
void shapes(benchmark::internal::Benchmark* b) {
  for (int d : {int(DType::kBFloat16)}) {
    for (int64_t h : {4096, 8192})
      for (int64_t t : {1, 4, 8, 16, 32, 64, 128, 256, 512, 2048, 8192}) b->Args({t, h, d});
  }
  b->Args({1, 4096, int(DType::kFloat16)});
  b->Args({128, 8192, int(DType::kFloat16)});
  b->UseManualTime()->Iterations(1)->Unit(benchmark::kMicrosecond);
}

}  // namespace

BENCHMARK_CAPTURE(run, peer_copy, Path::kPeerCopy, Op::kAllReduce)->Args({8192, 8192, int(DType::kBFloat16)})->UseManualTime()->Iterations(1)->Unit(benchmark::kMicrosecond);
// Peer stores at the one-shot and two-shot target shapes: what the links give SM stores at that
// message size (a kernel per call, no cross-rank sync; at decode sizes mostly launch and crossing).
BENCHMARK_CAPTURE(run, peer_store, Path::kPeerStore, Op::kAllReduce)
    ->Args({1, 4096, int(DType::kBFloat16)})->Args({128, 8192, int(DType::kBFloat16)})
    ->Args({512, 8192, int(DType::kBFloat16)})->Args({2048, 8192, int(DType::kBFloat16)})
    ->Args({8192, 8192, int(DType::kBFloat16)})->UseManualTime()->Iterations(1)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(run, nccl_allreduce, Path::kNcclAllReduce, Op::kAllReduce)->Apply(shapes);
BENCHMARK_CAPTURE(run, add_rmsnorm, Path::kAddRMSNorm, Op::kAllReduceAddRMSNorm)->Apply(shapes);
BENCHMARK_CAPTURE(run, nccl_path_fused, Path::kNcclPath, Op::kAllReduceAddRMSNorm)->Apply(shapes);
BENCHMARK_CAPTURE(run, oneshot_fused, Path::kOneShot, Op::kAllReduceAddRMSNorm)->Apply(shapes);
BENCHMARK_CAPTURE(run, twoshot_fused, Path::kTwoShot, Op::kAllReduceAddRMSNorm)->Apply(shapes);
BENCHMARK_CAPTURE(run, oneshot_flag_fused, Path::kOneShotFlag, Op::kAllReduceAddRMSNorm)->Apply(shapes);
BENCHMARK_CAPTURE(run, auto_fused, Path::kAuto, Op::kAllReduceAddRMSNorm)->Apply(shapes);
BENCHMARK_CAPTURE(run, oneshot_allreduce, Path::kOneShot, Op::kAllReduce)->Apply(shapes);
BENCHMARK_CAPTURE(run, twoshot_allreduce, Path::kTwoShot, Op::kAllReduce)->Apply(shapes);

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return arfbench::kExitUsage;
  int gpus = 0;
  if (const std::string why = arfbench::gpuShortfall(1, &gpus); !why.empty()) {
    std::fprintf(stderr, "bench_arfusion: %s; nothing to measure.\n", why.c_str());
    return arfbench::kExitSkip;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (g_errors) std::fprintf(stderr, "bench_arfusion: %d benchmark(s) could not run (their rows say why)\n", g_errors);
  return g_errors ? arfbench::kExitFailed : arfbench::kExitOk;
}
