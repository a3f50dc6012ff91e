#include "plan.h"

#include <algorithm>
#include <cmath>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "arch.h"
#include "env.h"
#include "errors.h"

namespace arfusion::detail {

size_t elemSize(DType d) { return d == DType::kFloat32 ? 4 : 2; }

const char* toString(LinkType l) {
  switch (l) {
    case LinkType::kSingleRank: return "single-rank";
    case LinkType::kSameDevice: return "same-device";
    case LinkType::kNVLink: return "nvlink";
    case LinkType::kPCIe: return "pcie";
  }
  return "unknown";
}

std::string topoKey(const Topology& t) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "sm%d%d/%s/%d ranks", t.cc_major, t.cc_minor, toString(t.link), t.world);
  return buf;
}

namespace {
constexpr int64_t kKiB = 1024, kMiB = 1024 * 1024;
constexpr int64_t kAll = INT64_MAX;
// Most bytes a one-shot step may put into one region (see fusedGeometry).
constexpr int64_t kOneShotStepBytes = 128 * kKiB;
// Most bytes of a two-shot step per peer and phase (R rows) for rows of at most 16 KB (fusedGeometry).
constexpr int64_t kTwoShotStepBytes = 128 * kKiB;
constexpr int64_t kTwoShotSplitRowBytes = 16 * kKiB;

// The topology the built-in table and the one-shot's rows over clusters were measured on.
bool measuredPair(const Topology& t) {
  return t.cc_major == 9 && !t.mixed_arch && t.link == LinkType::kNVLink && t.world == 2;
}
}  // namespace

AutoTable builtinTable(const Topology& t) {
  AutoTable table;
  if (measuredPair(t)) {
    // Measured 2026-11-30 (session 26, calls 1-2: benchmarks/results/2026-11-30-h200x2-v26), 2 x H200
    // NV18, allreduce + add + RMSNorm, CUDA-graph replay, us per call, median of 7, max over ranks,
    // one-shot / two-shot, both with kernels compiled for two ranks:
    //   rows of 8 KB (bf16 4096):   131 rows 6.9 / 7.2, 133: 8.3 / 7.2, 156: 8.7 / 7.3
    //   rows of 16 KB (bf16 8192):  131 rows 11.2 / 11.9, 133: 12.8 / 12.1, 156: 13.4 / 12.8
    //   rows of 32 KB (bf16 16384): 131 rows 19.0 / 21.1, 133: 23.6 / 21.1, 156: 25.8 / 22.3
    //   rows of 32 KB (fp32 8192):  131 rows 17.5 / 19.4, 133: 20.8 / 19.5, 156: 23.4 / 21.3
    //   rows of 64 KB (fp32 16384): 131 rows 34.9 / 42.1, 133: 42.0 / 42.6, 135: 47.3 / 43.0
    //   rows of 4 KB (bf16 2048):   128 rows 5.2 / 6.0, 144: 6.5 / 6.1, 203: 7.2 / 6.5
    // At every width from 4 KB the crossover is one step: the one-shot takes one row per block
    // while the rows fit the grid (132 SMs) and wins by 4-24% up to 131-132 rows; from 133 rows
    // its blocks take two rows each and the two-shot wins by 4-16% (at 64 KB rows from 135).
    // Hence the two-shot from 133 tokens. Narrower rows (bf16 hidden 256-1024, messages of
    // 0.5-0.9 MiB with 287-1625 rows) are mixed: one-shot / two-shot within 0.93-1.06 either way,
    // 0.88 at 406 x 1024; the byte rule sits at 512 KiB, above which 4 KB rows gain 6-12% (the
    // 896 KiB of session 19 kept them on the one-shot up to 224 rows). With rows of 2 KB and more
    // the NCCL path is slower at every size measured (by 1.69x or more at up to 1 MiB, session 25;
    // 1.40x or more above); narrower rows: narrowRowsToNccl.
    // A GPU with another SM count has its one-shot step elsewhere: tools/arfusion-tune measures it.
    table.rules = {{512 * kKiB, Strategy::kOneShot}, {kAll, Strategy::kTwoShot}};
    table.twoshot_min_tokens = 133;
    table.source = "built-in " + topoKey(t) + " (measured)";
    table.measured = true;
    return table;
  }
  // SM90 at 3..8 ranks, SM100, SM120, PCIe peers, mixed arches: never measured here. Fused one-shot only for small
  // decode messages, where a peer-memory path should beat NCCL's launch and protocol latency; the
  // NCCL path above. Creation replaces this with the speed check's table (speedCheckTable: the
  // one-shot only where it was measured faster on this machine), unless Config::self_check is off
  // or the NCCL path is forced; a tuning file from tools/arfusion-tune replaces it too.
  table.rules = {{256 * kKiB, Strategy::kOneShot}, {kAll, Strategy::kNccl}};
  table.source = "built-in " + topoKey(t) + " (conservative default, not measured)";
  return table;
}

std::string formatTuning(const Topology& t, const AutoTable& table) {
  std::ostringstream os;
  os << "# arfusion tuning file: written by tools/arfusion-tune; one rule per line,\n"
     << "# the first rule with max_bytes >= the message size (tokens*hidden*elem) applies.\n"
     << "arfusion-tuning 1\n"
     << "arch " << t.cc_major << "." << t.cc_minor << "\n"
     << "link " << toString(t.link) << "\n"
     << "world " << t.world << "\n";
  for (const Rule& r : table.rules) {
    os << "rule ";
    if (r.max_bytes == kAll) os << "max"; else os << r.max_bytes;
    os << " " << toString(r.strategy) << "\n";
  }
  if (table.twoshot_min_tokens > 0) os << "twoshot-min-tokens " << table.twoshot_min_tokens << "\n";
  return os.str();
}

AutoTable tableFromMeasurements(std::vector<SizeTiming> sizes, double margin, const std::string& source) {
  std::sort(sizes.begin(), sizes.end(), [](const SizeTiming& a, const SizeTiming& b) { return a.bytes < b.bytes; });
  AutoTable t;
  t.source = source;
  t.measured = true;
  auto push = [&](int64_t max_bytes, Strategy s) {
    if (!t.rules.empty() && t.rules.back().strategy == s) t.rules.back().max_bytes = max_bytes;
    else t.rules.push_back({max_bytes, s});
  };
  for (const SizeTiming& m : sizes) {
    Strategy best = Strategy::kNccl;
    double best_us = m.us_nccl;
    // NaN compares false: a strategy that did not run never wins; an NCCL time of NaN lets the
    // fastest fused strategy win outright. Against NCCL a fused strategy needs the margin; between
    // the two fused strategies the faster one wins.
    const bool no_nccl = std::isnan(m.us_nccl);
    for (auto [s, us] : {std::pair<Strategy, double>{Strategy::kOneShot, m.us_oneshot}, {Strategy::kTwoShot, m.us_twoshot}}) {
      if (std::isnan(us)) continue;
      const bool wins = best == Strategy::kNccl ? no_nccl || us * (1 + margin) < best_us : us < best_us;
      if (wins) {
        best = s;
        best_us = us;
      }
    }
    push(m.bytes, best);
  }
  push(kAll, Strategy::kNccl);
  return t;
}

AutoTable speedCheckTable(const std::vector<SizeTiming>& sizes) {
  std::vector<SizeTiming> checked = sizes;
  for (SizeTiming& m : checked) m.us_twoshot = std::nan("");
  std::sort(checked.begin(), checked.end(), [](const SizeTiming& a, const SizeTiming& b) { return a.bytes < b.bytes; });
  AutoTable table = tableFromMeasurements(checked, 0.03, "speed check at creation");
  table.checked = std::move(checked);
  return table;
}

int64_t twoShotTokenFloor(const std::vector<SizeTiming>& sizes) {
  std::vector<const SizeTiming*> both;
  for (const SizeTiming& m : sizes)
    if (m.tokens > 0 && !std::isnan(m.us_oneshot) && !std::isnan(m.us_twoshot) && m.us_oneshot > 0 && m.us_twoshot > 0)
      both.push_back(&m);
  if (both.empty()) return 0;
  // Candidates: every measured token count (the fewest: the two-shot everywhere) and one past the
  // most (the one-shot everywhere).
  std::vector<int64_t> candidates;
  int64_t most = 0, fewest = INT64_MAX;
  for (const SizeTiming* m : both) {
    candidates.push_back(m->tokens);
    most = std::max(most, m->tokens);
    fewest = std::min(fewest, m->tokens);
  }
  candidates.push_back(most + 1);
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());  // sizes share token counts
  int64_t best_t = 0;
  double best_cost = INFINITY;
  for (int64_t t : candidates) {
    double cost = 0;
    for (const SizeTiming* m : both) {
      const double pick = m->tokens >= t ? m->us_twoshot : m->us_oneshot;
      cost += pick / std::min(m->us_oneshot, m->us_twoshot) - 1;
    }
    if (cost < best_cost) {  // strictly less: the smallest T among equals
      best_cost = cost;
      best_t = t;
    }
  }
  return best_t <= fewest ? 0 : best_t;
}

Status parseTuning(const std::string& text, const std::string& source, const Topology& t, AutoTable* out) {
  std::istringstream in(text);
  std::string line;
  int lineno = 0;
  bool header = false, arch = false, link = false, world = false;
  AutoTable table;
  auto bad = [&](const std::string& why) {
    return failf(Status::kInvalidArgument, "tuning file %s, line %d: %s", source.c_str(), lineno, why.c_str());
  };
  while (std::getline(in, line)) {
    ++lineno;
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream ls(line);
    std::string key;
    if (!(ls >> key)) continue;
    std::string extra;
    if (key == "arfusion-tuning") {
      int v = 0;
      if (!(ls >> v) || v != 1) return bad("unsupported version (expected 'arfusion-tuning 1')");
      header = true;
    } else if (!header) {
      return bad("first line must be 'arfusion-tuning 1'");
    } else if (key == "arch") {
      std::string v;
      ls >> v;
      char want[16];
      std::snprintf(want, sizeof want, "%d.%d", t.cc_major, t.cc_minor);
      if (v != want) return bad("measured on arch " + v + ", this machine is " + want);
      arch = true;
    } else if (key == "link") {
      std::string v;
      ls >> v;
      if (v != toString(t.link)) return bad("measured over link " + v + ", this group uses " + toString(t.link));
      link = true;
    } else if (key == "world") {
      int w = 0;
      if (!(ls >> w) || w != t.world) return bad("measured for another world size (this group has " + std::to_string(t.world) + ")");
      world = true;
    } else if (key == "twoshot-min-tokens") {
      long long v = -1;
      if (!(ls >> v) || v < 0) return bad("expected 'twoshot-min-tokens <tokens >= 0>'");
      table.twoshot_min_tokens = v;
    } else if (key == "rule") {
      std::string size, strat;
      if (!(ls >> size >> strat)) return bad("expected 'rule <max_bytes|max> <oneshot|twoshot|nccl>'");
      Rule r{};
      if (size == "max") {
        r.max_bytes = kAll;
      } else {
        char* end = nullptr;
        const long long v = std::strtoll(size.c_str(), &end, 10);
        if (*end != '\0' || v <= 0) return bad("max_bytes '" + size + "' is not a positive integer");
        r.max_bytes = v;
      }
      if (!parseStrategy(strat.c_str(), &r.strategy) || r.strategy == Strategy::kAuto)
        return bad("strategy '" + strat + "' is not oneshot|twoshot|nccl");
      if (!table.rules.empty() && r.max_bytes <= table.rules.back().max_bytes)
        return bad("rules must have increasing max_bytes");
      table.rules.push_back(r);
    } else {
      return bad("unknown key '" + key + "'");
    }
    if (ls >> extra) return bad("unexpected '" + extra + "'");
  }
  if (!header) return failf(Status::kInvalidArgument, "tuning file %s: empty or not a tuning file", source.c_str());
  if (!arch || !link || !world)
    return failf(Status::kInvalidArgument, "tuning file %s: needs 'arch', 'link' and 'world' lines", source.c_str());
  if (table.rules.empty() || table.rules.back().max_bytes != kAll)
    return failf(Status::kInvalidArgument, "tuning file %s: the last rule must be 'rule max ...'", source.c_str());
  table.source = source;
  table.measured = true;
  *out = std::move(table);
  return Status::kSuccess;
}

Status loadTuningFile(const char* path, const Topology& t, AutoTable* out) {
  std::ifstream f(path);
  if (!f) return failf(Status::kInvalidArgument, "tuning file %s: cannot be opened", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return parseTuning(ss.str(), path, t, out);
}

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
  // The one-shot does not overlap a block's push with its reduction, so it wants many small steps
  // (blocks drift apart and one's push overlaps another's epilogue); the pipelined two-shot wants
  // few large ones (each step pays two flag crossings). H200 pair, bf16 8192 x 8192 one-shot:
  // 622 us at 7 rows per step, 705 us at 31 (docs/PERF-NOTES.md). A pipelined one-shot (session 5)
  // lost more than it gained: docs/PERF-NOTES.md, session 5, item 3.
  if (s == Strategy::kOneShot) r_max = std::min(r_max, std::max<int64_t>(1, kOneShotStepBytes / per_r));
  // A two-shot block whose next step exists runs this step's peer-row epilogue on half its warps
  // while the other half pushes the next step's reduce-scatter (twoshot.cu, steps 3-5), so the
  // epilogue no longer leaves the link idle between steps and smaller steps pay: H200 pair, bf16,
  // session 13, same run: 8192 x 8192 456 us at 16 rows per step (no split) -> 435 (split) -> 423-427
  // at 8 rows; 8192 x 4096 246 at 32 rows -> 231 at 16, 236 at 11, 238 at 8; 2048 x 8192 126 at 8
  // rows, 126 at 4, 134 at 3. Best at about 128 KiB per peer and phase, which is what the cap keeps.
  // The split needs rows of at most two vectors per thread (16 KB); wider rows keep the fewest steps.
  // The plan does not know whether a call takes the scalar path (odd hidden or misaligned pointers,
  // api.cpp): there the kernel splits rows of at most 2048 elements only, and wider rows up to 16 KB
  // get the small steps without the split (slower, unmeasured; the scalar path is a fallback).
  if (s == Strategy::kTwoShot && stride <= kTwoShotSplitRowBytes)
    r_max = std::min(r_max, std::max<int64_t>(1, kTwoShotStepBytes / stride));
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
  // Session 12 (benchmarks/results/2026-11-30-h200x2-v12): the Lamport two-shot with a larger
  // Lamport area (2048 x 8192 in one unit) or several units per block was slower than the flag
  // kernel (125 -> 133 us, 452 -> 466 at 8192 x 8192), so it stays at one unit per block.
  const int64_t unit_rows = int64_t(t.world) * rows_per_step;
  const int64_t units = (shape.tokens + unit_rows - 1) / unit_rows;
  const size_t need = kLamportHeaderBytes + size_t(2) * (t.world - 1) * rows_per_step * rowStride(shape.hidden, shape.dtype);
  return units <= blocks && need <= t.lamport_region_bytes;
}

int oneShotRowBlocks(const Topology& t, const Shape& shape, int blocks, int rows_per_step) {
  // A decode call's time grows with the bytes each SM pushes and polls: the plain one-shot took
  // 4.4 us at 1 x 8192 and 3.4 at 1 x 4096 on one block per row, whatever the block's threads
  // (session 17). Rows over a cluster (oneshot.cu) cut that share; the cluster's norm costs a
  // little. H200 pair, bf16 Auto, session 18 call 2, us, one block per row -> 2 -> 4 (-> 8):
  //   1 x 4096 4.1-4.2 -> 3.9-4.1 -> 3.8;   4 x 4096 4.2-4.3 -> 4.0 -> 3.9-4.0
  //   16 x 4096 4.8-4.9 -> 4.7 -> 4.6;      64 x 4096 6.0-6.1 -> 6.2
  //   1 x 8192 6.2 -> 5.7-5.8 -> 5.5 (5.7); 4 x 8192 6.2-6.3 -> 5.8 -> 5.7 (5.9)
  //   16 x 8192 6.4 -> 6.5-6.7 -> 6.8-7.0
  // Hence: messages up to 128 KiB, shares of at least 2 KiB, at most 4 blocks.
  // Wide rows pay above 128 KiB too: one block then pushes 32-64 KB per call. Session 18 call 6,
  // one-shot us, 2 runs, one block per row -> 4: bf16 16384 (32 KB rows) x 6 10.7 -> 8.8, x 16
  // 11.7-12.2 -> 9.0-9.9, x 32 11.2 -> 12.3; fp32 16384 (64 KB) x 3-16 13.0-13.8 -> 11.0-11.2;
  // fp32 8192 (32 KB) x 6-11 8.6-8.9 -> 7.7-8.3, x 16 the same, x 23 9.0 -> 9.8; bf16 8192
  // (16 KB) x 16-23 6.4-6.5 -> 6.5-6.9. Hence also rows of 32-64 KB up to 16 tokens (session 19
  // call 1, Auto, same call: bf16 16384 x 6-16 10.7-11.8 -> 8.8-9.2, fp32 16384 x 3-16 12.9-13.3
  // -> 11.0-11.2, the rest within 1%).
  // Measured on the H200 pair only (the built-in table's topology); elsewhere one block per row.
  constexpr int64_t kMaxMessage = 128 * kKiB, kMinShare = 2 * kKiB;
  constexpr int64_t kWideRowMin = 32 * kKiB, kWideRowMax = 64 * kKiB, kWideMaxTokens = 16;
  const int64_t row = static_cast<int64_t>(rowStride(shape.hidden, shape.dtype));
  const bool small = shape.tokens * row <= kMaxMessage;
  const bool wide = row >= kWideRowMin && row <= kWideRowMax && shape.tokens <= kWideMaxTokens;
  if (!measuredPair(t) || rows_per_step != 1 || blocks != shape.tokens || !(small || wide)) return 1;
  for (int s = kMaxRowBlocks; s > 1; s /= 2)
    if (shape.tokens * s <= t.max_blocks && shape.tokens <= t.row_clusters[s] && row / s >= kMinShare) return s;
  return 1;
}

// Whether Auto leaves a fused strategy for the NCCL path because the rows are narrow and many: a
// fused block finishes its rows one after another (each row's waits, its block-wide sum of squares,
// its stores), about 1.3 us a row on the H200 pair whatever its width, so with rows of 1 KB or less
// the fused time grows with rows per block while the NCCL path's grows with bytes. Session 26
// call 3 (benchmarks/results/2026-11-30-h200x2-v26), 2 x H200 NV18, bf16, the faster fused
// strategy against the NCCL path, us per call, by rows per block (tokens / 132, rounded up):
//   rows of 128 B: 16 per block (256 KiB) 20.3 / 15.2, 63 per block 71.0 / 35.4
//   rows of 256 B: 8 per block 12.0 / 12.6; 11: 15.5 / 14.0; 16: 21.3 / 16.8
//   rows of 512 B: 8 per block 12.3 / 14.1; 11: 16.1 / 16.6; 16: 22.0 / 20.5; 63: 79.5 / 53.8
//   rows of 1 KB:  32 per block 43.6 / 44.4; 44: 59.6 / 56.0; 63: 88.1 / 74.9
//   rows of 2 KB:  at most 0.94 of the NCCL path's time up to 64 MiB (249 per block).
// Hence the NCCL path above 10 rows per block of at most 512 B and above 36 of at most 1 KB. Rows
// per block from max_blocks (the same on every rank), so every rank decides alike. Measured at two
// ranks only; applied wherever Auto would run a fused strategy (the cost per row is the kernels').
namespace {
bool narrowRowsToNccl(const Topology& t, const Shape& shape) {
  const int64_t row_bytes = shape.hidden * static_cast<int64_t>(elemSize(shape.dtype));
  const int64_t per_block = t.max_blocks > 0 ? (shape.tokens + t.max_blocks - 1) / t.max_blocks : 0;
  return (row_bytes <= 512 && per_block > 10) || (row_bytes <= 1024 && per_block > 36);
}
}  // namespace

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
        std::snprintf(buf, sizeof buf, " (above the %" PRId64 " KiB checked)", table->checked.back().bytes / kKiB);
      else
        std::snprintf(buf, sizeof buf, " (%" PRId64 " KiB: one-shot %.1f us, NCCL %.1f us)", m->bytes / kKiB, m->us_oneshot, m->us_nccl);
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
    p.sync_mode = in.sync;
    rule += std::string("; sync ") + toString(in.sync) + " forced";
  } else {
    p.sync_mode = in.sync_auto;
    rule += "; sync " + std::string(toString(in.sync_auto)) + ": " + in.sync_auto_reason;
  }
  p.lamport = usesLamport(t, shape, s, p.sync_mode, p.blocks, p.rows_per_step);
  if (p.lamport && s == Strategy::kOneShot) {
    p.row_blocks = oneShotRowBlocks(t, shape, p.blocks, p.rows_per_step);
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
