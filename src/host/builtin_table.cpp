// The built-in Auto table and the measured rules Auto applies on top of any table. Every number is
// in tuning.h with the measurement behind it.
#include "auto_table.h"
#include "tuning.h"

namespace arfusion::detail {
namespace {

// The topology the built-in table and the one-shot's rows over clusters were measured on.
bool measuredPair(const Topology& t) {
  return t.cc_major == 9 && !t.mixed_arch && t.link == LinkType::kNVLink && t.world == 2;
}

}  // namespace

AutoTable builtinTable(const Topology& t) {
  AutoTable table;
  if (measuredPair(t)) {
    table.rules = {{tuned::kPairOneShotMaxBytes, Strategy::kOneShot}, {kAllSizes, Strategy::kTwoShot}};
    table.twoshot_min_tokens = tuned::kPairTwoShotMinTokens;
    table.source = "built-in " + topoKey(t) + " (measured)";
    table.measured = true;
    return table;
  }
  // SM90 at 3..8 ranks, SM100, SM120, PCIe peers: not measured. The fused one-shot for small decode
  // messages only, the NCCL path above; creation's speed check replaces this (unless the user turned
  // the checks off, forced the NCCL path, or loaded a tuning file).
  table.rules = {{tuned::kGuessOneShotMaxBytes, Strategy::kOneShot}, {kAllSizes, Strategy::kNccl}};
  table.source = "built-in " + topoKey(t) + " (conservative default, not measured)";
  return table;
}

int oneShotRowBlocks(const Topology& t, const Shape& shape, int blocks, int rows_per_step, int forced) {
  const int64_t row = static_cast<int64_t>(rowStride(shape.hidden, shape.dtype));
  if (rows_per_step != 1 || blocks != shape.tokens) return 1;
  // A grid of tokens clusters of s blocks: within the grid cap, within what the agreed occupancy
  // query says is resident at once on every rank (so the launch cannot fail), shares >= 2 KiB.
  const auto fits = [&](int s) {
    return shape.tokens * s <= t.max_blocks && shape.tokens <= t.row_clusters[s] && row / s >= tuned::kClusterMinShare;
  };
  if (forced > 1) return forced <= kMaxRowBlocks && (forced & (forced - 1)) == 0 && fits(forced) ? forced : 1;
  const bool small = shape.tokens * row <= tuned::kClusterMaxMessage;
  const bool wide = row >= tuned::kClusterWideRowMin && row <= tuned::kClusterWideRowMax &&
                    shape.tokens <= tuned::kClusterWideMaxTokens;
  if (!measuredPair(t) || !(small || wide)) return 1;
  for (int s = kMaxRowBlocks; s > 1; s /= 2)
    if (fits(s)) return s;
  return 1;
}

bool narrowRowsToNccl(const Topology& t, const Shape& shape) {
  const int64_t row_bytes = shape.hidden * static_cast<int64_t>(shape.dtype == DType::kFloat32 ? 4 : 2);
  // Rows per block from max_blocks (the same on every rank), so every rank decides alike.
  const int64_t per_block = t.max_blocks > 0 ? (shape.tokens + t.max_blocks - 1) / t.max_blocks : 0;
  return (row_bytes <= tuned::kNarrowRowBytes && per_block > tuned::kNarrowRowsPerBlock) ||
         (row_bytes <= tuned::kSmallRowBytes && per_block > tuned::kSmallRowsPerBlock);
}

}  // namespace arfusion::detail
