// The creation-time checks: the self-check of the GridDependency (PDL) sync mode, and the speed
// check of the fused one-shot against the NCCL path.
//
// Self-check. Runs only where the arch policy would use GridDependency. Every rank runs the same
// sequence:
//   correctness: 4 rounds of [slow producer kernel rewrites the input; fused one-shot with PDL] and
//     the same with FlagBarrier; the two outputs must agree bit for bit. A PDL path that lets the
//     kernel read its input before the producer finished reads the previous round's input.
//   speed: 32 back-to-back fused calls in a CUDA graph, per mode; GridDependency must not be slower
//     than FlagBarrier by more than 25% + 1 us (a PDL path that serialises badly, as on the SM120
//     incident in the README, shows up here rather than in production).
// The outcome (any mismatch, max times over ranks) is exchanged, so every rank takes the same
// decision. On failure the communicator uses FlagBarrier for Auto, logs a warning and plan() says why.
// No H200 fails the check, so testing::setSelfCheckFault makes one rank report a failure, to test
// that decision and its agreement across ranks (tests/test_gpu.cpp, SelfCheck.*).
//
// Speed check. Runs where no measured Auto table applies (plan.cpp: every topology but the
// measured H200 pair, unless a tuning file was loaded): the built-in table there is a guess, and
// a fused path slower than NCCL on the user's machine is the failure this library exists to
// prevent. Every rank times the fused one-shot (the sync mode calls would take) and the
// NCCL path at 8, 32, 128 and 512 KiB (bf16 rows of 4096, allreduce + add + RMSNorm, 32 calls per
// CUDA graph, best of 3 replays); the max over ranks of each time decides, identically on every
// rank, where Auto takes the one-shot (plan.cpp, speedCheckTable: only where it beat the NCCL path
// by more than 3%; the NCCL path above 512 KiB). Every rank captures all its graphs and the ranks
// agree that all were built before any runs: NCCL calls have no timeout, so a rank must not
// leave the sequence while its peers make theirs (speedCheck says what this cannot cover).
// testing::setSpeedCheckFault runs it where it would not run and makes one rank report a slow
// fused path.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "arfusion/testing.h"
#include "communicator.h"
#include "errors.h"

namespace arfusion::detail {

cudaError_t launchDelayedFill(void* buf, int64_t n, int rank, uint32_t gen, unsigned long long delay_ns,
                              cudaStream_t stream);

namespace {

// testing::setSelfCheckFault, per rank of the communicators created next in this process.
std::atomic<int> g_fault[kMaxRanks];

// Sets a test-only fault for `rank` (every rank for -1) in one of the per-rank fault tables.
void storeFault(std::atomic<int> (&faults)[kMaxRanks], int rank, int value) {
  if (rank < 0) {
    for (auto& f : faults) f.store(value);
  } else if (rank < kMaxRanks) {
    faults[rank].store(value);
  }
}

struct Outcome {
  int32_t mismatches;
  float us_griddep;
  float us_flag;
  int32_t failed;
  char why[160];
};

struct DeviceBuffers {
  std::vector<void*> ptrs;
  ~DeviceBuffers() {
    for (void* p : ptrs) cudaFree(p);
  }
  Status alloc(void** p, size_t bytes) {
    ARF_CUDA(cudaMalloc(p, bytes));
    ptrs.push_back(*p);
    return Status::kSuccess;
  }
};

// Captured graphs, destroyed on every path (before the buffers they use: declare it after them).
struct GraphExecs {
  std::vector<cudaGraphExec_t> v;
  ~GraphExecs() {
    for (cudaGraphExec_t e : v)
      if (e) cudaGraphExecDestroy(e);
  }
};

// A stream and two events, released on every path. capture() records `calls` back-to-back calls
// of `plan` as a CUDA graph; time() replays one 4 times: the best of the last 3, in us per call.
// Every rank must capture and time the same plans in the same order (fused calls wait on their
// peers, NCCL calls pair with theirs).
struct GraphTimer {
  cudaStream_t stream = nullptr;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  ~GraphTimer() {
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    if (stream) cudaStreamDestroy(stream);
  }
  Status init() {
    ARF_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    ARF_CUDA(cudaEventCreate(&e0));
    ARF_CUDA(cudaEventCreate(&e1));
    return Status::kSuccess;
  }
  // Once capturing, issues every call even after one failed (the first failure is returned), so
  // that this rank's captured NCCL calls stay in step with its peers'. (A failure to begin the
  // capture returns at once: issuing the calls uncaptured would run them.)
  Status capture(Communicator* c, const RowArgs& args, const Plan& plan, int calls, GraphExecs* into) {
    ARF_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    Status st = Status::kSuccess;
    for (int i = 0; i < calls; ++i) {
      const Status one = c->runPlanned(args, DType::kBFloat16, true, plan, stream);
      if (st == Status::kSuccess) st = one;
    }
    cudaGraph_t graph = nullptr;
    const cudaError_t end = cudaStreamEndCapture(stream, &graph);
    cudaGraphExec_t exec = nullptr;
    const cudaError_t inst = st == Status::kSuccess && end == cudaSuccess ? cudaGraphInstantiate(&exec, graph, 0) : cudaSuccess;
    if (graph) cudaGraphDestroy(graph);
    (void)cudaGetLastError();  // the errors are returned below, none is left behind
    ARF_TRY(st);
    if (end != cudaSuccess) return failf(Status::kCudaError, "cudaStreamEndCapture failed: %s", cudaGetErrorString(end));
    if (inst != cudaSuccess) return failf(Status::kCudaError, "cudaGraphInstantiate failed: %s", cudaGetErrorString(inst));
    into->v.push_back(exec);
    return Status::kSuccess;
  }
  // Runs all 4 replays even after one failed (the first failure is returned): a replay this rank
  // skipped would leave its peers' NCCL calls in that replay unpaired.
  Status time(cudaGraphExec_t exec, int calls, float* us) {
    float best = 1e30f;
    cudaError_t first = cudaSuccess;
    for (int rep = 0; rep < 4; ++rep) {
      float ms = 0;
      cudaError_t e = cudaEventRecord(e0, stream);
      if (e == cudaSuccess) e = cudaGraphLaunch(exec, stream);
      if (e == cudaSuccess) e = cudaEventRecord(e1, stream);
      if (e == cudaSuccess) e = cudaEventSynchronize(e1);
      if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, e0, e1);
      if (e != cudaSuccess && first == cudaSuccess) first = e;
      if (e == cudaSuccess && rep > 0 && ms < best) best = ms;
    }
    if (first != cudaSuccess) return failf(Status::kCudaError, "timing a CUDA graph failed: %s", cudaGetErrorString(first));
    *us = best * 1000.f / calls;
    return Status::kSuccess;
  }
};

}  // namespace

namespace {

// The local part: returns an error only for a failure of the check itself (CUDA error, peer
// timeout); wrong results and timings go into *mine.
Status runLocal(Communicator* c, Outcome* mine) {
  // 8 rows of 2048, narrower if a small workspace needs it (the same choice on every rank: it
  // depends only on the agreed topology).
  const int64_t tokens = 8;
  int64_t hidden = 2048;
  Plan plan;
  plan.strategy = Strategy::kOneShot;
  std::string why;
  while (!fusedGeometry(c->topo, Strategy::kOneShot, Shape{tokens, hidden, DType::kBFloat16, Op::kAllReduceAddRMSNorm},
                        &plan.blocks, &plan.rows_per_step, &why)) {
    if (hidden <= 64) return failf(Status::kInternalError, "self-check shape does not fit the workspace: %s", why.c_str());
    hidden /= 2;
  }
  const size_t bytes = tokens * hidden * 2;

  DeviceBuffers buf;
  void *input, *residual, *gamma, *res_a, *norm_a, *res_b, *norm_b;
  for (void** p : {&input, &residual, &gamma, &res_a, &norm_a, &res_b, &norm_b}) ARF_TRY(buf.alloc(p, bytes));
  GraphTimer timer;
  ARF_TRY(timer.init());
  const cudaStream_t stream = timer.stream;
  ARF_CUDA(launchDelayedFill(residual, tokens * hidden, c->rank + 100, 1, 0, stream));
  ARF_CUDA(launchDelayedFill(gamma, hidden, 7, 2, 0, stream));

  auto args = [&](void* res_out, void* norm_out) {
    return makeRowArgs(Op::kAllReduceAddRMSNorm, input, residual, res_out, gamma, norm_out, tokens, hidden, 1e-6f);
  };
  std::vector<char> ha(bytes * 2), hb(bytes * 2);
  for (uint32_t gen = 1; gen <= 4; ++gen) {
    for (int mode = 0; mode < 2; ++mode) {
      plan.sync_mode = mode == 0 ? SyncMode::kGridDependency : SyncMode::kFlagBarrier;
      void* ro = mode == 0 ? res_a : res_b;
      void* no = mode == 0 ? norm_a : norm_b;
      ARF_CUDA(cudaMemsetAsync(ro, 0xff, bytes, stream));
      ARF_CUDA(cudaMemsetAsync(no, 0xff, bytes, stream));
      ARF_CUDA(launchDelayedFill(input, tokens * hidden, c->rank, gen, 20000, stream));
      ARF_TRY(c->runPlanned(args(ro, no), DType::kBFloat16, true, plan, stream));
    }
    ARF_CUDA(cudaStreamSynchronize(stream));
    ARF_TRY(c->checkHealth());
    ARF_CUDA(cudaMemcpy(ha.data(), res_a, bytes, cudaMemcpyDeviceToHost));
    ARF_CUDA(cudaMemcpy(ha.data() + bytes, norm_a, bytes, cudaMemcpyDeviceToHost));
    ARF_CUDA(cudaMemcpy(hb.data(), res_b, bytes, cudaMemcpyDeviceToHost));
    ARF_CUDA(cudaMemcpy(hb.data() + bytes, norm_b, bytes, cudaMemcpyDeviceToHost));
    if (gen == 1 && g_fault[c->rank].load() == int(testing::SelfCheckFault::kWrongResult)) ha[0] ^= 1;  // test-only
    if (std::memcmp(ha.data(), hb.data(), ha.size()) != 0) ++mine->mismatches;
  }

  // Speed: graphs of 32 calls per mode.
  for (int mode = 0; mode < 2; ++mode) {
    plan.sync_mode = mode == 0 ? SyncMode::kGridDependency : SyncMode::kFlagBarrier;
    GraphExecs graph;
    ARF_TRY(timer.capture(c, args(res_a, norm_a), plan, 32, &graph));
    ARF_TRY(timer.time(graph.v[0], 32, mode == 0 ? &mine->us_griddep : &mine->us_flag));
  }
  if (g_fault[c->rank].load() == int(testing::SelfCheckFault::kSlow)) mine->us_griddep += 1000.f;  // test-only
  return c->checkHealth();
}

}  // namespace

void setSelfCheckFault(int rank, testing::SelfCheckFault fault) { storeFault(g_fault, rank, int(fault)); }

Status selfCheck(Communicator* c) {
  Outcome mine{};
  // Every rank reaches the exchange below, also after a local failure, so that no rank is left
  // waiting in it; a failure anywhere then fails creation on every rank with the same message.
  const Status local = runLocal(c, &mine);
  if (local != Status::kSuccess) {
    mine.failed = 1;
    std::snprintf(mine.why, sizeof mine.why, "%s", lastError());
  }
  std::vector<Outcome> all(c->world);
  ARF_TRY(c->boot->allGather(&mine, all.data(), sizeof(Outcome)));
  int mismatches = 0;
  float gd = 0, fl = 0;
  for (int r = 0; r < c->world; ++r)
    if (all[r].failed) return failf(Status::kInternalError, "self-check failed on rank %d: %s", r, all[r].why);
  for (const Outcome& o : all) {
    mismatches += o.mismatches;
    gd = std::max(gd, o.us_griddep);
    fl = std::max(fl, o.us_flag);
  }
  char buf2[200];
  if (mismatches > 0) {
    c->sync_auto = SyncMode::kFlagBarrier;
    std::snprintf(buf2, sizeof buf2, "self-check: GridDependency gave wrong results (%d rounds), using flag barrier", mismatches);
    c->sync_auto_reason = buf2;
    logf(LogLevel::kWarn, c->rank, "%s", buf2);
  } else if (gd > fl * 1.25f + 1.0f) {
    c->sync_auto = SyncMode::kFlagBarrier;
    std::snprintf(buf2, sizeof buf2, "self-check: GridDependency slower (%.2f us vs %.2f us per call), using flag barrier", gd, fl);
    c->sync_auto_reason = buf2;
    logf(LogLevel::kWarn, c->rank, "%s", buf2);
  } else {
    std::snprintf(buf2, sizeof buf2, "; self-check passed (griddep %.2f us, flag %.2f us per call)", gd, fl);
    c->sync_auto_reason += buf2;
  }
  return Status::kSuccess;
}

// ---------------------------------------------------------------- speed check

namespace {

// testing::setSpeedCheckFault, per rank of the communicators created next in this process.
std::atomic<int> g_speed_fault[kMaxRanks];

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

// The first of several failures, with its message: for sequences that must run to their end on
// every rank whatever fails along the way.
struct FirstFailure {
  Status st = Status::kSuccess;
  std::string message;
  void keep(Status one) {
    if (one != Status::kSuccess && st == Status::kSuccess) {
      st = one;
      message = lastError();
    }
  }
  Status result() const { return st == Status::kSuccess ? st : fail(st, message); }
};

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
        if (g_speed_fault[c->rank].load() == int(testing::SpeedCheckFault::kFusedSlow)) out->us_fused[i] += 1000.f;  // test-only
      }
      failure.keep(timer.time(nccl_graphs.v[i], kSpeedCalls, &out->us_nccl[i]));
    }
    ARF_TRY(failure.result());
    return c->checkHealth();
  }
};

}  // namespace

void setSpeedCheckFault(int rank, testing::SpeedCheckFault fault) { storeFault(g_speed_fault, rank, int(fault)); }

bool speedCheckForced(int rank) {
  return rank >= 0 && rank < kMaxRanks && g_speed_fault[rank].load() != int(testing::SpeedCheckFault::kNone);
}

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
