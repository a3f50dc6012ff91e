// Strategy selection: the Auto tables and the pure function that turns a shape into a Plan.
// Everything here is a function of values every rank holds identically (agreed at creation), so
// every rank decides the same: a rank that decided differently would wait on flags nobody writes.
#pragma once

#include <string>
#include <vector>

#include "arfusion/arfusion.h"
#include "kernels/kernels.h"

namespace arfusion::detail {

// Ordered from fastest to slowest: creation agrees on the largest any rank saw (communicator.cpp).
enum class LinkType : int { kSingleRank = 0, kSameDevice = 1, kNVLink = 2, kPCIe = 3 };
const char* toString(LinkType link);

// What creation agreed on, identical on every rank.
struct Topology {
  int world = 1;
  bool has_nccl = true;         // false only for test groups built from peer pointers
  bool fusion_ok = false;       // every pair of ranks can use the peer workspace
  std::string no_fusion_reason; // why not, when !fusion_ok
  int cc_major = 0;             // compute capability (of every rank, unless mixed_arch)
  int cc_minor = 0;
  bool mixed_arch = false;
  LinkType link = LinkType::kSingleRank;  // slowest link between any two ranks
  int max_blocks = 0;           // min SM count over ranks: fused grids never exceed it
  size_t region_bytes = 0;      // bytes of one (block, slot) region of the flag-protocol area
  size_t lamport_region_bytes = 0;  // ... and of the Lamport area (communicator.h: WorkspaceLayout)
  // [s]: clusters of s = 2, 4 blocks of the Lamport one-shot that may be resident at once (the
  // fewest over ranks, in this communicator's max_blocks share of each GPU): the most rows a grid
  // of such clusters may take (0: none; other entries unused).
  int row_clusters[kMaxRowBlocks + 1] = {};
};
// "sm90/nvlink/2 ranks": a topology's key in table sources and logs.
std::string topoKey(const Topology& topo);

// One measured message size (tools/arfusion-tune, the speed check): us per call of each strategy (max over
// ranks), NaN where a strategy could not run.
struct SizeTiming {
  int64_t bytes = 0;
  double us_oneshot = 0, us_twoshot = 0, us_nccl = 0;
  int64_t tokens = 0;  // rows of the measured message (0: unknown)
};

// Auto rules: the first rule whose max_bytes >= the message size (tokens*hidden*elem) applies.
struct Rule {
  int64_t max_bytes;
  Strategy strategy;  // kOneShot, kTwoShot or kNccl
};
struct AutoTable {
  std::vector<Rule> rules;  // ascending max_bytes; the last one must cover everything
  std::string source;       // "built-in SM90/NVLink/2 ranks", or the tuning file path
  // Auto takes the two-shot only from this many tokens on (below, the one-shot; 0: no floor but
  // the plan's 2 x world). The two-shot runs at most tokens / world blocks, so with few rows it
  // leaves SMs and the link idle whatever the row width (plan.cpp has the measurements).
  int64_t twoshot_min_tokens = 0;
  // Measured on this topology (the built-in table of the measured pair, a tuning file, the
  // creation-time speed check): creation runs the speed check only where this is false.
  bool measured = false;
  // The speed check's timings (max over ranks), ascending: plan() quotes the one that decided a
  // size in Plan::reason. Empty for every other table.
  std::vector<SizeTiming> checked;
};

// The built-in table for this topology: measured for SM90 over NVLink at 2 ranks, conservative
// everywhere else (plan.cpp has the measurements behind each number).
AutoTable builtinTable(const Topology& topo);

// Parses a tuning file (format in tools/arfusion-tune and the README). Rejects, with a message, a
// file that does not parse or was measured for another arch, link or world size.
Status loadTuningFile(const char* path, const Topology& topo, AutoTable* out);
// The same from text (tests).
Status parseTuning(const std::string& text, const std::string& source, const Topology& topo,
                   AutoTable* out);
std::string formatTuning(const Topology& topo, const AutoTable& table);

// Turns measurements into rules. A fused strategy is chosen for a size only if it beats the NCCL
// path by more than `margin` (0.03: 3%); each rule ends at the last measured size it won, sizes
// between two measurements go to the rule of the larger one, and everything above the largest
// measured size takes the NCCL path. Adjacent rules with the same strategy are merged.
AutoTable tableFromMeasurements(std::vector<SizeTiming> sizes, double margin, const std::string& source);
// The table of the creation-time speed check (selfcheck.cpp): `sizes` holds the fused one-shot
// (us_oneshot) and the NCCL path (us_nccl) per size, max over ranks, NaN where the one-shot could
// not run; the one-shot takes a size only if it beat the NCCL path there by more than 3%, every
// size above the largest checked takes the NCCL path (tableFromMeasurements). The source names
// the check; AutoTable::checked keeps the timings.
AutoTable speedCheckTable(const std::vector<SizeTiming>& sizes);
// The token count from which the two-shot should be taken (AutoTable::twoshot_min_tokens): of the
// sizes with tokens and both fused timings, the threshold T whose pick (two-shot at tokens >= T,
// one-shot below) adds the least time over the faster fused strategy, summed as ratios; the
// smallest such T. 0 when no floor helps (T at or below every measured token count). The one- and
// two-shot cross near a row count rather than a size (plan.cpp), so a floor measured at one hidden
// size keeps the two-shot off few wide rows at other hidden sizes.
int64_t twoShotTokenFloor(const std::vector<SizeTiming>& sizes);

struct PlanInputs {
  Topology topo;
  Strategy strategy = Strategy::kAuto;        // Config or commSetStrategy
  SyncMode sync = SyncMode::kAuto;            // Config or commSetStrategy
  SyncMode sync_auto = SyncMode::kFlagBarrier;  // arch policy, after the self-check
  std::string sync_auto_reason;
  const AutoTable* table = nullptr;
};

// Grid of a fused strategy for this shape: false (with a reason) if a row does not fit a region.
bool fusedGeometry(const Topology& topo, Strategy strategy, const Shape& shape, int* blocks,
                   int* rows_per_step, std::string* why);

// Whether a fused call runs a Lamport kernel (the data is its own ready flag, sync.cuh): every
// GridDependency one-shot, and a GridDependency two-shot whose blocks take one unit each and whose
// unit (the RS and AG parts, 2 (n-1) R rows, and the headers) fits a Lamport region. A function of
// the plan and creation constants only, so every rank picks the same kernel; makePlan reports it in
// Plan::lamport and the launch recomputes it from the plan it runs.
bool usesLamport(const Topology& topo, const Shape& shape, Strategy strategy, SyncMode sync, int blocks,
                 int rows_per_step);

// Blocks per row of a Lamport one-shot (Plan::row_blocks) whose one-block-per-row geometry is
// `blocks` x `rows_per_step`: 1, or 2 or 4 (kMaxRowBlocks) when every row had a block, on the
// measured H200 pair, for a message of at most 128 KiB or rows of 32-64 KB at up to 16 tokens,
// with shares of at least 2 KiB per block and a grid that fits max_blocks and row_clusters.
// makePlan multiplies the grid by it.
int oneShotRowBlocks(const Topology& topo, const Shape& shape, int blocks, int rows_per_step);

// The decision. For a forced fused strategy that cannot run, returns kNotSupported with the reason
// in lastError(); Auto never fails: it falls back to the NCCL path (or, without NCCL, to a fused
// strategy that fits).
Status makePlan(const PlanInputs& in, const Shape& shape, Plan* out);

size_t elemSize(DType dtype);

}  // namespace arfusion::detail
