// Auto tables from measurements: arfusion-tune's sweeps and the creation-time speed check.
#include <algorithm>
#include <cmath>

#include "auto_table.h"
#include "names.h"
#include "tuning.h"

namespace arfusion::detail {

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
  push(kAllSizes, Strategy::kNccl);
  return t;
}

AutoTable speedCheckTable(const std::vector<SizeTiming>& sizes) {
  std::vector<SizeTiming> checked = sizes;
  for (SizeTiming& m : checked) m.us_twoshot = std::nan("");
  std::sort(checked.begin(), checked.end(), [](const SizeTiming& a, const SizeTiming& b) { return a.bytes < b.bytes; });
  AutoTable table = tableFromMeasurements(checked, tuned::kFusedMargin, "speed check at creation");
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

}  // namespace arfusion::detail
