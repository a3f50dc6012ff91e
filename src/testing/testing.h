// Test-only entry points of the arfusion_testing library, which only the tests and tools link (the
// shared library does not export them). Not for production: they bypass NCCL and inject faults.
#pragma once

#include <vector>

#include "arfusion/arfusion.h"

namespace arfusion::testing {

// Creates `world` communicators in this process without NCCL: rank r runs on devices[r], and
// several ranks may share one GPU (how 3..8-rank kernels are tested on 1 or 2 GPUs). The ranks
// exchange their records through memory of this process. Such a group has no NCCL path: Auto picks
// a fused strategy, Strategy::kNccl returns kNotSupported. All ranks' blocks must fit on their GPUs
// at once (they spin-wait on each other): max_blocks > 0 caps each rank's grid; keep
// (ranks per GPU) * max_blocks within the GPU's SM count.
Status createGroup(int world, const int* devices, const Config& config, std::vector<Communicator*>* comms,
                   int max_blocks = 0);

// Fault injection for the tests of the bounded waits. With `on`, this rank's flag two-shot (the
// FlagBarrier two-shot, and the GridDependency two-shot of calls whose blocks take several units)
// stops signalling "all-gather ready" for every unit after which its block has another one: a
// peer that stops between two steps of one call, which is where the split steps 3-5 of twoshot.cuh
// wait on half a block. The peers' calls then time out (and so does this rank's, waiting for the
// peers' next step). Takes effect from the next call; kInvalidArgument for a null communicator.
Status skipAllGatherSignals(Communicator* comm, bool on);

// Sets every block's epoch counter of this rank to `value`, once this rank's last call has
// finished: tests of what 2^31 or 2^32 calls do to the flag protocol (src/kernels/sync.cuh) without
// making them. Call it on every rank with the same value between the same two calls (ranks' epochs
// must stay equal), and let no rank make its next call before all have returned (a host barrier).
// kInvalidArgument for a null communicator.
Status setEpochs(Communicator* comm, uint32_t value);

// Fault injection for the creation-time self-check of GridDependency (docs/design.md,
// "Creation-time checks"), which no correct build fails on its own. Applies to the communicators created after it in
// this process, until changed, wherever their creation runs the self-check (fusion on,
// Config::self_check set, GridDependency the arch policy: SM90, SM100): rank `rank` of such a
// communicator (every rank for -1) reports
//   kWrongResult: a GridDependency output one bit off FlagBarrier's (flipped in its host copy of
//     the first round's output, after the kernels ran): the check's "wrong result" branch;
//   kSlow: its GridDependency calls 1000 us slower than measured: the "slower" branch.
// Every rank must then choose FlagBarrier for Auto, and plan() must say why. kNone clears it.
// Set it before the creation, not during one. kInvalidArgument for a rank outside -1..7 or an
// unknown fault.
enum class SelfCheckFault { kNone = 0, kWrongResult = 1, kSlow = 2 };
Status setSelfCheckFault(int rank, SelfCheckFault fault);

// Fault injection for the creation-time speed check of the fused one-shot against the NCCL path
// (docs/design.md, "Creation-time checks"), which runs only where no measured Auto table applies,
// i.e. not on the 2 x H200 NVLink pair. Applies to the communicators created after it in this process,
// until changed, that have an NCCL communicator, fusion on, Config::self_check set and a strategy
// other than kNccl. If any rank's setting is not kNone, every rank runs the check (the ranks
// agree on it at creation, whatever the others set):
//   kRun: the check as it is, also where a measured table applies (it then replaces that table);
//   kFusedSlow: the same, and rank `rank` reports its fused times 1000 us slower than measured.
// With kFusedSlow on any rank, every rank's Auto must take the NCCL path at every size, and plan()
// must name the check. kNone clears it. kInvalidArgument for a rank outside -1..7 or an unknown
// fault.
enum class SpeedCheckFault { kNone = 0, kRun = 1, kFusedSlow = 2 };
Status setSpeedCheckFault(int rank, SpeedCheckFault fault);

// The arch policy of compute capability major.minor for the communicators created after it in this
// process (0, 0: each GPU's own), so that the policy decisions of SM120 or SM100 (their sync mode,
// the self-check of a forced GridDependency) run on the GPU at hand. The kernels stay the build's.
// kInvalidArgument for a capability outside 0.0..99.9.
Status setArchPolicy(int major, int minor);

// Makes the one-shot's Lamport plans spread each row over a thread block cluster of `row_blocks`
// blocks (2 or 4) wherever that fits (one row per block, within the grid cap and the agreed cluster
// occupancy), on any topology; 0 or 1: the library's own rule. Call it on every rank with the same
// value between the same two calls (it changes what kernels wait for). kInvalidArgument for a null
// communicator or another value.
Status forceRowBlocks(Communicator* comm, int row_blocks);

// Fault injection for the bound of the cluster kernels' norm exchange: with `on`, block 1 of every
// cluster of this rank's cluster kernels sends no partial sums of squares to its cluster, so the
// other blocks' wait must end on its timeout (kTimeout). Takes effect from the next call;
// kInvalidArgument for a null communicator.
Status skipClusterPartialSums(Communicator* comm, bool on);

}  // namespace arfusion::testing
