// What creation agreed on about the group: identical on every rank, so that every decision derived
// from it (plan, grid, kernel) is identical too.
#pragma once

#include <string>

#include "kernels/kernels.h"

namespace arfusion::detail {

// Ordered from fastest to slowest: creation agrees on the slowest any rank saw (create.cpp).
enum class LinkType : int { kSingleRank = 0, kSameDevice = 1, kNVLink = 2, kPCIe = 3 };

struct Topology {
  int world = 1;
  bool has_nccl = true;         // false only for test groups built from peer pointers
  bool fusion_ok = false;       // every pair of ranks can use the peer workspace
  std::string no_fusion_reason; // why not, when !fusion_ok
  int cc_major = 0;             // compute capability (of every rank, unless mixed_arch)
  int cc_minor = 0;
  bool mixed_arch = false;
  LinkType link = LinkType::kSingleRank;  // slowest link between any two ranks
  int max_blocks = 0;           // min SM count over ranks (and Config::max_blocks): fused grids never exceed it
  size_t region_bytes = 0;      // bytes of one (block, slot) region of the flag-protocol area
  size_t lamport_region_bytes = 0;  // ... and of the Lamport area (workspace.h)
  // [s]: clusters of s = 2, 4 blocks of the Lamport one-shot that may be resident at once (the
  // fewest over ranks, in this communicator's max_blocks share of each GPU): the most rows a grid
  // of such clusters may take. 0: clusters of that size are never planned. Other entries unused.
  int row_clusters[kMaxRowBlocks + 1] = {};
};

// "sm90/nvlink/2 ranks": a topology's key in table sources, tuning files and logs.
std::string topoKey(const Topology& topo);

}  // namespace arfusion::detail
