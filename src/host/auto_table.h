// Auto: the tables that map a message size to a strategy, where they come from (the built-in
// table, a tuning file, the creation-time speed check), and the measured rules applied on top.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "arfusion/arfusion.h"
#include "topology.h"

namespace arfusion::detail {

// One measured message size (arfusion-tune, the speed check): us per call of each strategy, max
// over ranks; NaN where a strategy could not run.
struct SizeTiming {
  int64_t bytes = 0;
  double us_oneshot = 0, us_twoshot = 0, us_nccl = 0;
  int64_t tokens = 0;  // rows of the measured message (0: unknown)
};

// The first rule whose max_bytes >= the message size (tokens * hidden * element size) applies.
struct Rule {
  int64_t max_bytes;
  Strategy strategy;  // kOneShot, kTwoShot or kNccl
};
constexpr int64_t kAllSizes = INT64_MAX;

struct AutoTable {
  std::vector<Rule> rules;  // ascending max_bytes; the last one covers every size (kAllSizes)
  std::string source;       // "built-in sm90/nvlink/2 ranks (measured)", a tuning file's path, ...
  // Auto takes the two-shot only from this many tokens on (below: the one-shot; 0: no floor but
  // the plan's 2 x world).
  int64_t twoshot_min_tokens = 0;
  // Measured on this topology (the built-in table of the measured pair, a tuning file, the
  // speed check): creation runs the speed check only where this is false.
  bool measured = false;
  // The speed check's timings (max over ranks), ascending: plan() quotes the one that decided a
  // size. Empty for every other table.
  std::vector<SizeTiming> checked;
};

// ---- builtin_table.cpp: the measured rules (tuning.h has the numbers)
// The built-in table for this topology: measured for SM90 over NVLink at 2 ranks, a conservative
// guess everywhere else (the speed check replaces it at creation).
AutoTable builtinTable(const Topology& topo);
// Blocks per row of a Lamport one-shot whose one-block-per-row geometry is blocks x rows_per_step:
// 1, or 2 or 4 (a thread block cluster) on the measured pair for small messages and wide rows, when
// the agreed cluster occupancy (Topology::row_clusters) allows it. makePlan multiplies the grid.
// `forced` > 1 (tests: testing::forceRowBlocks) takes that size wherever it fits, on any topology.
int oneShotRowBlocks(const Topology& topo, const Shape& shape, int blocks, int rows_per_step, int forced = 0);
// Whether Auto leaves a fused strategy for the NCCL path because the rows are narrow and many.
bool narrowRowsToNccl(const Topology& topo, const Shape& shape);

// ---- measured_table.cpp: tables from measurements
// A fused strategy takes a size only if it beats the NCCL path by more than `margin`; each rule ends
// at the last measured size it won, sizes between two measurements go to the rule of the larger one,
// everything above the largest measured size takes the NCCL path; adjacent rules merge.
AutoTable tableFromMeasurements(std::vector<SizeTiming> sizes, double margin, const std::string& source);
// The speed check's table: `sizes` hold the one-shot and the NCCL path per size (max over ranks);
// the one-shot only where it won by more than tuned::kFusedMargin. AutoTable::checked keeps them.
AutoTable speedCheckTable(const std::vector<SizeTiming>& sizes);
// The token count T from which the two-shot should be taken: of the sizes with tokens and both
// fused timings, the T whose pick (two-shot at tokens >= T, one-shot below) adds the least time over
// the faster fused strategy, summed as ratios; the smallest such T; 0 when no floor helps.
int64_t twoShotTokenFloor(const std::vector<SizeTiming>& sizes);

}  // namespace arfusion::detail
