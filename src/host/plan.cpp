// The plan: a pure function from the agreed communicator state and a shape to the strategy, sync
// mode, grid and kernel of a call. Every input is identical on every rank (agreed at creation or
// set collectively), so every rank plans alike: a rank that planned differently would wait on
// flags nobody writes.
#include "plan.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "errors.h"
#include "names.h"
#include "tuning.h"

namespace arfusion::detail {

size_t elemSize(DType d) { return d == DType::kFloat32 ? 4 : 2; }

bool fusedGeometry(const Topology& t, Strategy s, const Shape& shape, int* blocks, int* rows, std::string* why) {
  const int n = t.world;
  const int64_t stride = static_cast<int64_t>(rowStride(shape.hidden, shape.dtype));
  // Rows a region must hold per row of R: one-shot (n-1) peers; two-shot (n-1) RS + (n-1) AG.
  const int64_t per_r = (s == Strategy::kTwoShot ? 2 : 1) * int64_t(n > 1 ? n - 1 : 1) * stride;
  // A two-shot step fills a region of the flag-protocol area; a one-shot step must fit both areas'
  // regions (Lamport one-shot, flag one-shot), so the geometry does not depend on the sync mode.
  const size_t lamport_rows_bytes = t.lamport_region_bytes > kLamportHeaderBytes ? t.lamport_region_bytes - kLamportHeaderBytes : 0;
  // At most 1 GiB per step: the kernels index a step's rows in 32 bits (rows * vectors < 2^31).
  const size_t capacity = std::min<size_t>(size_t(1) << 30, s == Strategy::kTwoShot ? t.region_bytes : std::min(t.region_bytes, lamport_rows_bytes));
  int64_t r_max = static_cast<int64_t>(capacity) / per_r;
  if (r_max < 1 || t.max_blocks < 1) {
    if (why) {
      char buf[200];
      std::snprintf(buf, sizeof buf, "a %" PRId64 "-byte row needs %" PRId64 " bytes per workspace region, which holds %zu (raise workspace_bytes or lower max_blocks)",
                    stride, per_r, capacity);
      *why = buf;
    }
    return false;
  }
  // The one-shot wants many small steps (blocks drift apart, one's push overlaps another's
  // epilogue); the pipelined two-shot wants few large ones, except where it splits its epilogue
  // (rows of at most two vectors per thread), where smaller steps pay (tuning.h). The plan does not
  // know whether a call takes the scalar path (misaligned pointers): the kernel then splits rows of
  // at most 2048 elements only, and wider rows get the small steps without the split.
  if (s == Strategy::kOneShot) r_max = std::min(r_max, std::max<int64_t>(1, tuned::kOneShotStepBytes / per_r));
  if (s == Strategy::kTwoShot && stride <= tuned::kTwoShotSplitRowBytes)
    r_max = std::min(r_max, std::max<int64_t>(1, tuned::kTwoShotStepBytes / stride));
  const int64_t unit_rows = s == Strategy::kTwoShot ? n : 1;  // rows per unit per R
  const int64_t per_block = (shape.tokens + unit_rows * t.max_blocks - 1) / (unit_rows * t.max_blocks);
  // Steps per block when R is as large as a region allows, then the smallest R that still needs
  // no more steps: the rows spread evenly over the steps instead of leaving a nearly empty last
  // wave (2048 x 4096 at R = 7 took 147 units on 132 blocks: a second wave of 15 blocks).
  const int64_t steps = (per_block + r_max - 1) / r_max;
  const int64_t r = std::max<int64_t>(1, std::min(r_max, (per_block + steps - 1) / steps));
  const int64_t units = (shape.tokens + unit_rows * r - 1) / (unit_rows * r);
  *rows = static_cast<int>(r);
  *blocks = static_cast<int>(std::min<int64_t>(t.max_blocks, units));
  return true;
}

bool usesLamport(const Topology& t, const Shape& shape, Strategy s, SyncMode sync, int blocks, int rows_per_step) {
  if (sync != SyncMode::kGridDependency || t.world < 2 || rows_per_step < 1) return false;
  if (s == Strategy::kOneShot) return true;
  if (s != Strategy::kTwoShot) return false;
  // One unit per block only: with several units per block, or a larger Lamport area, the flag
  // kernel was faster (docs/design.md, "Two-shot").
  const int64_t unit_rows = int64_t(t.world) * rows_per_step;
  const int64_t units = (shape.tokens + unit_rows - 1) / unit_rows;
  const size_t need = kLamportHeaderBytes + size_t(2) * (t.world - 1) * rows_per_step * rowStride(shape.hidden, shape.dtype);
  return units <= blocks && need <= t.lamport_region_bytes;
}

Status makePlan(const PlanInputs& in, const Shape& shape, Plan* out) {
  const Topology& t = in.topo;
  Plan p;
  std::string why;
  auto setReason = [&](const std::string& r) { std::snprintf(p.reason, sizeof p.reason, "%s", r.c_str()); };
  const int64_t bytes = shape.tokens * shape.hidden * static_cast<int64_t>(elemSize(shape.dtype));

  Strategy s = in.strategy;
  std::string rule;
  if (t.world == 1) {
    s = Strategy::kNccl;
    rule = "single rank: local add-RMSNorm, no communication";
  } else if (s == Strategy::kNccl) {
    rule = "NCCL path forced by configuration";
  } else if (s != Strategy::kAuto) {
    if (!t.fusion_ok)
      return failf(Status::kNotSupported, "%s forced but fusion is unavailable: %s", toString(s), t.no_fusion_reason.c_str());
    rule = std::string(toString(s)) + " forced by configuration";
  } else if (!t.fusion_ok) {
    s = Strategy::kNccl;
    rule = "fusion unavailable: " + t.no_fusion_reason;
  } else {
    const AutoTable* table = in.table;
    for (const Rule& r : table->rules) {
      if (bytes <= r.max_bytes) { s = r.strategy; break; }
    }
    rule = "auto: " + std::to_string(bytes) + " bytes -> " + toString(s) + " by " + table->source;
    if (!table->checked.empty()) {  // the speed check's timing that decided this size
      const auto m = std::find_if(table->checked.begin(), table->checked.end(), [&](const SizeTiming& x) { return x.bytes >= bytes; });
      char buf[96];
      if (m == table->checked.end())
        std::snprintf(buf, sizeof buf, " (above the %" PRId64 " KiB checked)", table->checked.back().bytes / tuned::kKiB);
      else
        std::snprintf(buf, sizeof buf, " (%" PRId64 " KiB: one-shot %.1f us, NCCL %.1f us)", m->bytes / tuned::kKiB, m->us_oneshot, m->us_nccl);
      rule += buf;
    }
    // Never a two-shot with fewer than two rows per rank (it only adds a round trip), nor below
    // the table's token floor where the one-shot can hold the row.
    int b = 0, r = 0;
    if (s == Strategy::kTwoShot && shape.tokens < 2 * t.world) {
      s = Strategy::kOneShot;
      rule += "; tokens < 2*world: oneshot";
    } else if (s == Strategy::kTwoShot && shape.tokens < table->twoshot_min_tokens &&
               fusedGeometry(t, Strategy::kOneShot, shape, &b, &r, nullptr)) {
      s = Strategy::kOneShot;
      rule += "; tokens < " + std::to_string(table->twoshot_min_tokens) + ": oneshot";
    }
    if (s != Strategy::kNccl && t.has_nccl && narrowRowsToNccl(t, shape)) {
      s = Strategy::kNccl;
      rule += "; many rows of at most 1 KB: nccl";
    }
  }
  if (s == Strategy::kNccl && !t.has_nccl && t.world > 1) {
    if (in.strategy == Strategy::kNccl) return fail(Status::kNotSupported, "NCCL path forced but this group has no NCCL communicator");
    s = Strategy::kOneShot;
    rule += "; no NCCL communicator: oneshot";
  }
  if (s == Strategy::kOneShot || s == Strategy::kTwoShot) {
    if (!fusedGeometry(t, s, shape, &p.blocks, &p.rows_per_step, &why)) {
      if (in.strategy != Strategy::kAuto || !t.has_nccl)
        return failf(Status::kNotSupported, "%s cannot run this shape: %s", toString(s), why.c_str());
      s = Strategy::kNccl;
      p.blocks = p.rows_per_step = 0;
      rule += "; row too wide for the workspace (" + why + "): nccl";
    }
  }
  p.strategy = s;
  if (s == Strategy::kNccl) {
    p.sync_mode = SyncMode::kFlagBarrier;
  } else if (in.sync != SyncMode::kAuto) {
    if (in.sync == SyncMode::kGridDependency && !in.griddep_allowed)
      return failf(Status::kNotSupported, "GridDependency sync forced but refused: %s", in.griddep_refusal.c_str());
    p.sync_mode = in.sync;
    rule += std::string("; sync ") + toString(in.sync) + " forced";
  } else {
    p.sync_mode = in.sync_auto;
    rule += "; sync " + std::string(toString(in.sync_auto)) + ": " + in.sync_auto_reason;
  }
  p.lamport = usesLamport(t, shape, s, p.sync_mode, p.blocks, p.rows_per_step);
  if (p.lamport && s == Strategy::kOneShot && !shape.extended) {  // (the extended epilogue has no cluster kernels)
    p.row_blocks = oneShotRowBlocks(t, shape, p.blocks, p.rows_per_step, in.test_row_blocks);
    p.blocks *= p.row_blocks;
    if (p.row_blocks > 1) rule += "; " + std::to_string(p.row_blocks) + " blocks per row (a cluster)";
  }
  // The reason must keep its tail (the sync mode and the self-check's outcome) in Plan::reason's
  // 256 bytes: a long table source (a tuning file's path) is what can overflow it, so that source
  // is shortened to its first and last characters first, and only then is the whole cut (ending
  // in "...").
  if (rule.size() >= sizeof p.reason && in.table && in.table->source.size() > 72) {
    const std::string& src = in.table->source;
    const size_t at = rule.find(src);
    if (at != std::string::npos) rule.replace(at, src.size(), src.substr(0, 24) + "..." + src.substr(src.size() - 45));
  }
  if (rule.size() >= sizeof p.reason) rule = rule.substr(0, sizeof p.reason - 4) + "...";
  setReason(rule);
  *out = p;
  return Status::kSuccess;
}

}  // namespace arfusion::detail
