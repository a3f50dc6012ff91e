// The creation-time speed check of the fused one-shot against the NCCL path (docs/design.md,
// "Creation-time checks"). Runs where no measured Auto table applies: the built-in table there is
// a guess, and a fused path slower than NCCL on the user's machine is the failure this library
// exists to prevent. Every rank times the one-shot (as Auto would launch it) and the NCCL path at
// 8, 32, 128 and 512 KiB; the slowest rank's times decide, identically on every rank, where Auto
// takes the one-shot (auto_table.h speedCheckTable). Every rank captures all its graphs and the
// ranks agree that all were built before any runs: NCCL calls have no timeout, so a rank must not
// leave the sequence while its peers make theirs.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "check_faults.h"
#include "creation_checks.h"
#include "errors.h"

namespace arfusion::detail {
namespace {

// bf16 rows of 4096: 8, 32, 128 and 512 KiB.
constexpr int64_t kSpeedHidden = 4096;
constexpr int64_t kSpeedTokens[] = {1, 4, 16, 64};
constexpr int kSpeedSizes = sizeof kSpeedTokens / sizeof kSpeedTokens[0];

struct SpeedOutcome {
  int32_t failed;
  char why[160];
  float us_fused[kSpeedSizes];  // NaN: the one-shot cannot run this size (the same on every rank)
  float us_nccl[kSpeedSizes];
};

constexpr int kSpeedCalls = 32;  // per graph

// Everything the check launches, prepared before any of it runs: buffers, inputs, and one graph
// per size and path (fused where the one-shot fits, NCCL everywhere), in the same order on every
// rank. prepareFused() launches only the input fills and captures the fused graphs (no NCCL call);
// captureNccl() captures the NCCL graphs, every one also after a failure (the first is returned),
// so that this rank's NCCL calls stay in step with its peers' even if capturing them involves the
// peers; run() replays every graph in order, also after a failure, for the same reason (a fused
// call left without its peers gives up after the timeout; an NCCL call would not).
struct SpeedSetup {
  DeviceBuffers buf;
  GraphTimer timer;
  GraphExecs fused_graphs, nccl_graphs;  // declared after buf: destroyed before the buffers they use
  bool fused[kSpeedSizes] = {};          // a function of the agreed topology: the same on every rank
  void *input = nullptr, *residual = nullptr, *gamma = nullptr, *res_out = nullptr, *norm_out = nullptr;

  RowArgs args(int i) const {
    return makeRowArgs(Op::kAllReduceAddRMSNorm, input, residual, res_out, gamma, norm_out, kSpeedTokens[i], kSpeedHidden, 1e-6f);
  }

  Status prepareFused(Communicator* c) {
    const int64_t most = kSpeedTokens[kSpeedSizes - 1] * kSpeedHidden;
    for (void** p : {&input, &residual, &gamma, &res_out, &norm_out}) ARF_TRY(buf.alloc(p, most * 2));
    ARF_TRY(timer.init());
    ARF_CUDA(launchDelayedFill(input, most, c->rank, 3, 0, timer.stream));
    ARF_CUDA(launchDelayedFill(residual, most, c->rank + 100, 4, 0, timer.stream));
    ARF_CUDA(launchDelayedFill(gamma, kSpeedHidden, 7, 5, 0, timer.stream));
    ARF_CUDA(cudaStreamSynchronize(timer.stream));
    // The one-shot as a call would launch it (the configured sync mode, or Auto's after the
    // self-check; grid, row clusters).
    PlanInputs in = c->planInputs();
    in.strategy = Strategy::kOneShot;
    for (int i = 0; i < kSpeedSizes; ++i) {
      Plan plan;
      fused[i] = makePlan(in, Shape{kSpeedTokens[i], kSpeedHidden, DType::kBFloat16, Op::kAllReduceAddRMSNorm}, &plan) ==
                 Status::kSuccess;
      if (fused[i]) ARF_TRY(timer.capture(c, args(i), plan, kSpeedCalls, &fused_graphs));
      else clearError();  // a row that does not fit the workspace
    }
    return Status::kSuccess;
  }

  // One eager NCCL-path call per size first, synchronised: NCCL sets up the connections an
  // algorithm needs at its first use, which is then done outside the captures.
  Status captureNccl(Communicator* c) {
    Plan nccl;
    nccl.strategy = Strategy::kNccl;
    FirstFailure failure;
    for (int i = 0; i < kSpeedSizes; ++i) failure.keep(c->runPlanned(args(i), DType::kBFloat16, true, nccl, timer.stream));
    if (const cudaError_t e = cudaStreamSynchronize(timer.stream); e != cudaSuccess)
      failure.keep(failf(Status::kCudaError, "speed check: NCCL warm-up failed: %s", cudaGetErrorString(e)));
    for (int i = 0; i < kSpeedSizes; ++i) failure.keep(timer.capture(c, args(i), nccl, kSpeedCalls, &nccl_graphs));
    return failure.result();
  }

  Status run(Communicator* c, SpeedOutcome* out) {
    FirstFailure failure;
    size_t f = 0;
    for (int i = 0; i < kSpeedSizes; ++i) {
      out->us_fused[i] = std::nanf("");
      if (fused[i]) {
        failure.keep(timer.time(fused_graphs.v[f++], kSpeedCalls, &out->us_fused[i]));
        if (checkFaults().speed_check[c->rank].load() == kSpeedCheckFusedSlow) out->us_fused[i] += 1000.f;  // test-only
      }
      failure.keep(timer.time(nccl_graphs.v[i], kSpeedCalls, &out->us_nccl[i]));
    }
    ARF_TRY(failure.result());
    return c->checkHealth();
  }
};


}  // namespace

Status speedCheck(Communicator* c) {
  // Three exchanges, each reached by every rank also after a local failure, so that a CUDA or
  // fused-kernel failure anywhere fails creation on every rank with the same message. The first
  // two agree that every rank prepared its fused graphs, then made and captured its NCCL calls,
  // before any rank goes on: a rank that failed and went straight to an exchange while its peers
  // made NCCL calls would leave them waiting in NCCL, which has no timeout. What this cannot
  // cover, as in any NCCL job: an NCCL call that fails on one rank only (NCCL may then refuse
  // that rank's later calls, the exchanges included), or a graph launch that fails on one rank.
  SpeedSetup setup;
  SpeedOutcome mine{};
  std::vector<SpeedOutcome> all(c->world);
  const auto agree = [&](Status local) -> Status {
    if (local != Status::kSuccess && !mine.failed) {
      mine.failed = 1;
      std::snprintf(mine.why, sizeof mine.why, "%s", lastError());
    }
    ARF_TRY(c->boot->allGather(&mine, all.data(), sizeof(SpeedOutcome)));
    for (int r = 0; r < c->world; ++r)
      if (all[r].failed) return failf(Status::kInternalError, "speed check failed on rank %d: %s", r, all[r].why);
    return Status::kSuccess;
  };
  ARF_TRY(agree(setup.prepareFused(c)));
  ARF_TRY(agree(setup.captureNccl(c)));
  ARF_TRY(agree(setup.run(c, &mine)));
  // The slowest rank's time; NaN on any rank stays NaN.
  const auto slowest = [](double acc, float us) { return std::isnan(acc) || std::isnan(us) ? std::nan("") : std::max<double>(acc, us); };
  std::vector<SizeTiming> sizes(kSpeedSizes);
  for (int i = 0; i < kSpeedSizes; ++i) {
    SizeTiming& m = sizes[i];
    m.tokens = kSpeedTokens[i];
    m.bytes = m.tokens * kSpeedHidden * 2;
    m.us_oneshot = m.us_nccl = 0;
    for (const SpeedOutcome& o : all) {
      m.us_oneshot = slowest(m.us_oneshot, o.us_fused[i]);
      m.us_nccl = slowest(m.us_nccl, o.us_nccl[i]);
    }
  }
  c->table = speedCheckTable(sizes);
  const bool fused_anywhere = std::any_of(c->table.rules.begin(), c->table.rules.end(),
                                          [](const Rule& r) { return r.strategy != Strategy::kNccl; });
  std::string timings;
  for (const SizeTiming& m : sizes) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " %lld KiB %.1f/%.1f", static_cast<long long>(m.bytes / 1024), m.us_oneshot, m.us_nccl);
    timings += buf;
  }
  logf(fused_anywhere ? LogLevel::kInfo : LogLevel::kWarn, c->rank, "speed check (%s), us per call one-shot/NCCL:%s%s",
       topoKey(c->topo).c_str(), timings.c_str(),
       fused_anywhere ? "" : ": the fused one-shot was not faster than the NCCL path at any size checked; Auto takes the NCCL path");
  return Status::kSuccess;
}

}  // namespace arfusion::detail
