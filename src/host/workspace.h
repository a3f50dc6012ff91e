// The typed layout of one rank's peer-visible workspace, and the pinned host control words.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/kernels.h"

namespace arfusion::detail {

// Most blocks a fused grid may have: the flag and epoch arrays are sized for it.
constexpr int kMaxBlocksCap = 1024;

// One cudaMalloc per rank, exported to its peers:
//   [flags: kPhases x kMaxBlocksCap x kMaxRanks uint64][epochs: kMaxBlocksCap uint32][abort: uint32]
//   [pad to 4 KiB]
//   [lamport: max_blocks x kSlots regions of lamport_region_bytes]  Lamport protocol, all-ones when idle
//   [data:    max_blocks x kSlots regions of region_bytes]          flag protocol, any contents
// Peers write flags, data and lamport; only this rank touches its epochs and its abort word.
// workspace_bytes is split between the two areas: the Lamport area takes half, but never more than
// kLamportBytesPerPeer per peer (the one-shot's steps are small, tuning.h), and the flag-protocol
// area the rest, where a larger workspace buys the two-shot larger steps.
struct WorkspaceLayout {
  static constexpr size_t kFlagsOffset = 0;
  static constexpr size_t kFlagsBytes = sizeof(uint64_t) * kPhases * kMaxBlocksCap * kMaxRanks;
  static constexpr size_t kEpochsOffset = kFlagsBytes;
  static constexpr size_t kEpochsBytes = sizeof(uint32_t) * kMaxBlocksCap;
  static constexpr size_t kAbortOffset = kEpochsOffset + kEpochsBytes;
  static constexpr size_t kAreasOffset = (kAbortOffset + sizeof(uint32_t) + 4095) / 4096 * 4096;
  static constexpr size_t kLamportBytesPerPeer = size_t(32) << 20;
  static constexpr size_t kLamportOffset = kAreasOffset;
  // Regions are whole multiples of a 128-byte line, so that every region, and every row whose bytes
  // are a multiple of 128, starts on a line (docs/design.md, "Workspace").
  static constexpr size_t kRegionAlign = 128;

  WorkspaceLayout(size_t workspace_bytes, int world) : workspace_bytes_(workspace_bytes) {
    const size_t half = workspace_bytes / 2 / 4096 * 4096;
    const size_t cap = kLamportBytesPerPeer * size_t(world > 1 ? world - 1 : 1);
    lamport_bytes = half < cap ? half : cap;
  }
  size_t lamport_bytes = 0;
  size_t total() const { return kAreasOffset + workspace_bytes_; }
  size_t dataOffset() const { return kAreasOffset + lamport_bytes; }
  size_t dataBytes() const { return workspace_bytes_ - lamport_bytes; }
  size_t regionBytes(int max_blocks) const {
    return max_blocks > 0 ? dataBytes() / (size_t(max_blocks) * kSlots) / kRegionAlign * kRegionAlign : 0;
  }
  size_t lamportRegionBytes(int max_blocks) const {
    return max_blocks > 0 ? lamport_bytes / (size_t(max_blocks) * kSlots) / kRegionAlign * kRegionAlign : 0;
  }

 private:
  size_t workspace_bytes_;
};

// Pinned host words. error: host-mapped, written by a kernel only when it fails (kernels never read
// host memory while they wait: docs/design.md, "Bounded waits"). abort_src: the source of the copy
// commAbort() makes into the abort word in device memory.
struct ControlWords {
  uint32_t error[4];   // DeviceComm::error
  uint32_t abort_src;  // kStopAbort once commAbort() was called
};

}  // namespace arfusion::detail
