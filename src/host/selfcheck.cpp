// The creation-time self-check of the GridDependency (PDL) sync mode (docs/design.md,
// "Creation-time checks"). Every rank runs the same sequence:
//   correctness: 4 rounds of [slow producer kernel rewrites the input; fused one-shot with PDL] and
//     the same with FlagBarrier; the two outputs must agree bit for bit. A PDL path that lets the
//     kernel read its input before the producer finished reads the previous round's input.
//   speed: 32 back-to-back fused calls in a CUDA graph per mode; GridDependency must not be slower
//     than FlagBarrier by more than tuning.h's margin (a PDL path that serialises badly, as in the
//     SM120 incident, shows up here rather than in production).
// The outcome (any mismatch, the slowest rank's times) is exchanged, so every rank decides alike
// (create.cpp turns it into Auto's sync mode and into whether a forced GridDependency may be used).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "check_faults.h"
#include "creation_checks.h"
#include "errors.h"
#include "tuning.h"

namespace arfusion::detail {
namespace {

struct Outcome {
  int32_t mismatches;
  float us_griddep;
  float us_flag;
  int32_t failed;
  char why[160];
};

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
    if (gen == 1 && checkFaults().self_check[c->rank].load() == kSelfCheckWrongResult) ha[0] ^= 1;  // test-only
    if (std::memcmp(ha.data(), hb.data(), ha.size()) != 0) ++mine->mismatches;
  }

  // Speed: graphs of 32 calls per mode.
  for (int mode = 0; mode < 2; ++mode) {
    plan.sync_mode = mode == 0 ? SyncMode::kGridDependency : SyncMode::kFlagBarrier;
    GraphExecs graph;
    ARF_TRY(timer.capture(c, args(res_a, norm_a), plan, 32, &graph));
    ARF_TRY(timer.time(graph.v[0], 32, mode == 0 ? &mine->us_griddep : &mine->us_flag));
  }
  if (checkFaults().self_check[c->rank].load() == kSelfCheckSlow) mine->us_griddep += 1000.f;  // test-only
  return c->checkHealth();
}


}  // namespace

Status selfCheck(Communicator* c, GridDepCheck* check, std::string* outcome) {
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
  char buf[160];
  if (mismatches > 0) {
    *check = GridDepCheck::kWrongResult;
    std::snprintf(buf, sizeof buf, "self-check: GridDependency gave wrong results (%d rounds)", mismatches);
  } else if (gd > fl * tuned::kSelfCheckSlowRatio + tuned::kSelfCheckSlowUs) {
    *check = GridDepCheck::kSlower;
    std::snprintf(buf, sizeof buf, "self-check: GridDependency slower (%.2f us vs %.2f us per call)", gd, fl);
  } else {
    *check = GridDepCheck::kPassed;
    std::snprintf(buf, sizeof buf, "self-check passed (griddep %.2f us, flag %.2f us per call)", gd, fl);
  }
  *outcome = buf;
  return Status::kSuccess;
}

}  // namespace arfusion::detail
