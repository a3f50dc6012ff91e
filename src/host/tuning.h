// Every measured number the host-side decisions use, one provenance line each (CUB's tuning files
// are the model). "pair": 2 x H200 NV18, bf16, allreduce + add + RMSNorm, CUDA-graph replay, us per
// call, max over ranks; the full tables are in docs/performance.md and the reasoning in
// docs/design.md ("Auto"). A number measured on one topology is applied only there unless its
// comment says otherwise.
#pragma once

#include <cstdint>

namespace arfusion::detail::tuned {

constexpr int64_t kKiB = 1024;

// ---- step sizes (plan.cpp fusedGeometry), every topology
// One-shot: many small steps, so that blocks drift apart and one's push overlaps another's epilogue.
// pair, 8192 x 8192: 622 us at 7 rows (112 KiB) per step, 705 us at 31 rows.
constexpr int64_t kOneShotStepBytes = 128 * kKiB;
// Two-shot, rows of at most kTwoShotSplitRowBytes (the split epilogue, twoshot.cu): small steps pay.
// pair: 8192 x 8192 456 us at 16 rows per step -> 423-427 at 8 rows; 8192 x 4096 246 at 32 -> 231 at 16.
constexpr int64_t kTwoShotStepBytes = 128 * kKiB;
constexpr int64_t kTwoShotSplitRowBytes = 16 * kKiB;  // two 16-byte vectors per thread of 512

// ---- the built-in Auto table of the pair (builtin_table.cpp)
// One-shot while each of 132 blocks takes one row, two-shot from 133 rows: at every row width from
// 4 KB the one-shot won by 4-24% up to 131-132 rows and lost by 4-16% from 133 (pair, 2026-11-30).
constexpr int64_t kPairTwoShotMinTokens = 133;
// Narrower rows (0.5-0.9 MiB messages of 287-1625 rows) are mixed, 0.93-1.06 either way; above
// 512 KiB the two-shot gains 6-12% on 4 KB rows.
constexpr int64_t kPairOneShotMaxBytes = 512 * kKiB;

// ---- the guess for unmeasured topologies, replaced by the speed check at creation
// The one-shot should beat NCCL's launch and protocol latency on small decode messages anywhere.
constexpr int64_t kGuessOneShotMaxBytes = 256 * kKiB;

// ---- rows over a thread block cluster (builtin_table.cpp oneShotRowBlocks), pair only
// A decode call's time grows with the bytes each SM pushes and polls. pair, one block per row -> 4:
// 1 x 8192 6.2 -> 5.5 us, 1 x 4096 4.1 -> 3.8, but 16 x 8192 6.4 -> 6.8-7.0: up to 128 KiB messages.
constexpr int64_t kClusterMaxMessage = 128 * kKiB;
constexpr int64_t kClusterMinShare = 2 * kKiB;  // bytes of a row per block of the cluster
// Rows of 32-64 KB gain up to 16 tokens: bf16 16384 x 6-16 10.7-11.8 -> 8.8-9.2 us, fp32 16384 x 3-16
// 12.9-13.3 -> 11.0-11.2; bf16 16384 x 32 loses (11.2 -> 12.3).
constexpr int64_t kClusterWideRowMin = 32 * kKiB, kClusterWideRowMax = 64 * kKiB, kClusterWideMaxTokens = 16;

// ---- many narrow rows take the NCCL path (builtin_table.cpp narrowRowsToNccl), every topology
// A fused block finishes its rows one after another, ~1.3 us a row whatever its width (pair). Rows of
// 512 B at 16 per block: fused 22.0 us, NCCL path 20.5; rows of 1 KB at 44 per block: 59.6 vs 56.0;
// rows of 2 KB stay at or below 0.94 of the NCCL path's time up to 64 MiB.
constexpr int64_t kNarrowRowBytes = 512, kNarrowRowsPerBlock = 10;
constexpr int64_t kSmallRowBytes = 1024, kSmallRowsPerBlock = 36;

// ---- Auto against the NCCL path
// A fused strategy takes a size only if it beat the NCCL path there by more than this (speed check,
// arfusion-tune): a margin above the run-to-run spread of graph replays (1-2% on the pair).
constexpr double kFusedMargin = 0.03;

// ---- the GridDependency self-check (selfcheck.cpp)
// GridDependency may be at most this much slower than FlagBarrier (ratio, then us). One H200, 2 ranks
// sharing it, 8 x 2048: GridDependency 3.1 us per call, FlagBarrier 5.1; a correct PDL path passes by
// far, and a PDL path 8x slower (the SM120 incident) fails by far.
constexpr float kSelfCheckSlowRatio = 1.25f, kSelfCheckSlowUs = 1.0f;

}  // namespace arfusion::detail::tuned
