// Test-only entry points. Not for production: they bypass NCCL.
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

}  // namespace arfusion::testing
