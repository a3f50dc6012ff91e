// The communicator: owns the peer workspace, the control words and everything agreed at creation.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "arfusion/arfusion.h"
#include "bootstrap.h"
#include "kernels/kernels.h"
#include "plan.h"

namespace arfusion {

namespace detail {

// Typed layout of one rank's workspace allocation (one cudaMalloc, exported to peers):
//   [flags: kPhases x kMaxBlocksCap x kMaxRanks uint64][epochs: kMaxBlocksCap uint32][abort: uint32]
//   [pad to 4 KiB]
//   [lamport: max_blocks x kSlots regions of lamport_region_bytes]  Lamport protocol, all-ones when idle
//   [data:    max_blocks x kSlots regions of region_bytes]          flag protocol (sync.cuh), any contents
// workspace_bytes is split between the two areas: the Lamport area takes half, but never more than
// kLamportBytesPerPeer per peer, and the flag-protocol area the rest. The Lamport area only serves
// the one-shot, whose steps are capped at 128 KiB per region (plan.cpp): 32 MiB per peer gives
// each of 132 blocks a region of ~124 KiB per peer (7 rows of 8192 bf16 at 2 ranks; one row of up
// to ~124 KiB at any world size, where the workspace has room), and a larger workspace goes to the
// flag-protocol area, where it buys the two-shot larger steps (measured at 2 ranks:
// docs/PERF-NOTES.md, session 5). Peers write flags, data and lamport; only
// this rank touches its epochs and its abort word.
constexpr int kMaxBlocksCap = 1024;
struct WorkspaceLayout {
  static constexpr size_t kFlagsOffset = 0;
  static constexpr size_t kFlagsBytes = sizeof(uint64_t) * kPhases * kMaxBlocksCap * kMaxRanks;
  static constexpr size_t kEpochsOffset = kFlagsBytes;
  static constexpr size_t kEpochsBytes = sizeof(uint32_t) * kMaxBlocksCap;
  static constexpr size_t kAbortOffset = kEpochsOffset + kEpochsBytes;
  static constexpr size_t kAreasOffset = (kAbortOffset + sizeof(uint32_t) + 4095) / 4096 * 4096;
  static constexpr size_t kLamportBytesPerPeer = size_t(32) << 20;
  static constexpr size_t kLamportOffset = kAreasOffset;

  WorkspaceLayout(size_t workspace_bytes, int world) : workspace_bytes_(workspace_bytes) {
    const size_t half = workspace_bytes / 2 / 4096 * 4096;
    const size_t cap = kLamportBytesPerPeer * size_t(world > 1 ? world - 1 : 1);
    lamport_bytes = half < cap ? half : cap;
  }
  size_t lamport_bytes = 0;
  size_t total() const { return kAreasOffset + workspace_bytes_; }
  size_t dataOffset() const { return kAreasOffset + lamport_bytes; }
  size_t dataBytes() const { return workspace_bytes_ - lamport_bytes; }
  // Bytes of one (block, slot) region of each area, multiples of kRegionAlign, so that every
  // region starts on a 128-byte line (and so does every row whose bytes are a multiple of 128).
  // Rounded to 16 bytes, 32 MiB over 132 blocks and two slots gave 127,088-byte Lamport regions
  // (112 mod 128: 7 of 8 off a line, every other one off a 32-byte sector) and 889,696-byte flag
  // regions (96 mod 128). Aligned, same call, 2 runs each, H200 pair, bf16, session 22 call 5:
  // Auto 512 x 8192 33.5-33.7 -> 32.4 us, 256 x 8192 19.5 -> 19.0-19.1, 512 x 4096 17.9-18.1 ->
  // 17.4-17.6, 8192 x 8192 424.8-429.1 -> 421.4-423.1; plain two-shot 512 x 8192 29.7-30.0 ->
  // 28.5; the bare push unchanged (benchmarks/results/2026-11-30-h200-v22/call5/).
  static constexpr size_t kRegionAlign = 128;
  size_t regionBytes(int max_blocks) const {
    return max_blocks > 0 ? dataBytes() / (size_t(max_blocks) * kSlots) / kRegionAlign * kRegionAlign : 0;
  }
  size_t lamportRegionBytes(int max_blocks) const {
    return max_blocks > 0 ? lamport_bytes / (size_t(max_blocks) * kSlots) / kRegionAlign * kRegionAlign : 0;
  }

 private:
  size_t workspace_bytes_;
};

// Pinned host words. error: host-mapped, written by a kernel only when it fails (the kernels never
// read host memory: a GPU read of host memory took up to milliseconds on H200 and stalled every
// waiting block behind it). abort_src: the source of the copy commAbort() makes into the abort word
// in device memory.
struct ControlWords {
  uint32_t error[4];   // DeviceComm::error
  uint32_t abort_src;  // 1 once commAbort() was called
};

// max_blocks_cap > 0 caps the fused grid below the SM count (test groups that put several ranks on
// one GPU need every rank's blocks resident at once).
// pre_error: a failure the caller found before creation (e.g. the wrong current device); it is
// exchanged like any other, so every rank fails together instead of one waiting for the others.
Status createCommunicator(std::unique_ptr<Bootstrap> boot, ncclComm_t nccl, const Config& config,
                          Communicator** out, int max_blocks_cap = 0, const std::string& pre_error = "");

}  // namespace detail

class Communicator {
 public:
  ~Communicator();

  // Identity
  int rank = 0, world = 1, device = -1;  // device: -1 until creation has queried it
  ncclComm_t nccl = nullptr;
  std::unique_ptr<detail::Bootstrap> boot;

  // Agreed at creation (identical on every rank)
  Config config;
  std::string tuning_file_storage;
  detail::Topology topo;
  detail::AutoTable table;
  SyncMode sync_auto = SyncMode::kFlagBarrier;
  std::string sync_auto_reason;

  // Current settings (commSetStrategy)
  Strategy strategy = Strategy::kAuto;
  SyncMode sync = SyncMode::kAuto;

  // Memory
  void* workspace = nullptr;
  std::vector<void*> peer_base;      // each rank's workspace as mapped here
  std::vector<bool> peer_ipc;        // mapped through cudaIpcOpenMemHandle (close on destroy)
  detail::ControlWords* ctl = nullptr;  // host view
  detail::ControlWords* ctl_dev = nullptr;  // device view of the same pinned memory
  cudaStream_t abort_stream = nullptr;  // commAbort()'s copy into the abort word (runs beside spinning
                                        // kernels) and creation's workspace memsets
  int registered_blocks = 0;         // this communicator's share in the per-device block count
  void* scratch = nullptr;           // NCCL path, in-place allReduceAdd
  size_t scratch_bytes = 0;
  detail::DeviceComm dev{};

  // One call in flight: eager calls are ordered after the previous call even when it was made on
  // another stream (the event of the last call, see run(); waiting on a never-recorded event is a
  // no-op). call_mu serialises host threads.
  cudaEvent_t last_call = nullptr;
  std::mutex call_mu;

  // Failure state: kSuccess, kTimeout or kAborted once the device reported a failure.
  std::atomic<int> failed{0};
  std::string failure_detail;
  std::mutex failure_mu;

  detail::PlanInputs planInputs() const;
  // Reads the control words; turns a device-side failure into the communicator's failed state.
  Status checkHealth();
  // One call, validated and planned (api.cpp).
  Status run(const detail::RowArgs& args, DType dtype, cudaStream_t stream);
  Status runPlanned(const detail::RowArgs& args, DType dtype, bool vector, const Plan& plan,
                    cudaStream_t stream);
};

}  // namespace arfusion
