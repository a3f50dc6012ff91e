// Communicator creation, in named steps. Every step after the first exchange runs on every rank
// with the same inputs, and every step a rank may fail alone (bad config, an allocation) is carried
// into the next exchange, so that all ranks fail together with the same message instead of one
// leaving the others waiting.
//
//   1. readConfig          Config + environment, checked           (local)
//   2. allocate            workspace, control words, streams        (local)
//   3. describe            what this rank tells its peers           (local)
//   4. exchange            every rank's description; agreement on the settings
//   5. classifyTopology    peer access, link, arch, grid limits     (then agreed)
//   6. mapPeers            each peer's workspace (IPC or pointers)  (then agreed)
//   7. buildDeviceView     the DeviceComm the kernels take
//   8. chooseTable         the built-in Auto table or the tuning file every rank loaded
//   9. runChecks           arch policy, GridDependency self-check, speed check (creation_checks.h)
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <string>

#include "arch.h"
#include "check_faults.h"
#include "communicator.h"
#include "creation_checks.h"
#include "env.h"
#include "errors.h"
#include "names.h"
#include "tuning_file.h"

namespace arfusion::detail {
namespace {

// What each rank tells the others at creation. Fixed size: exchanged with allGather.
struct PeerInfo {
  int32_t ok;     // this rank's setup up to the exchange succeeded
  char why[160];  // if not, why
  uint64_t workspace_bytes;
  int32_t strategy, sync_mode, self_check;
  int32_t speed_check_forced;  // test hook (check_faults.h): run the speed check if any rank says so
  int32_t max_blocks;          // Config::max_blocks (0: no cap)
  uint64_t host_hash;
  uint64_t process_id;  // processId(): tells processes apart where pids repeat (containers)
  int32_t pid;
  int32_t device;  // ordinal in its own process
  char bus_id[32];
  int32_t sm_count;
  int32_t row_clusters[kMaxRowBlocks + 1];  // [s]: one-shot clusters of s = 2, 4 blocks resident at once (others 0)
  int32_t cc_major, cc_minor;
  int32_t ipc_ok;
  cudaIpcMemHandle_t ipc;
  uint64_t base;  // workspace pointer in its own process (valid for same-process peers)
};

struct Verdict {
  int32_t ok;
  char why[160];
};

uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Same host = same hostname and same boot id (containers on one machine share the boot id and may
// not share hostnames; either differing means "not provably the same host").
uint64_t hostHash() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  std::string id;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, id);
  return fnv1a(id, fnv1a(name));
}

// Random per process, drawn once: two ranks are threads of one process (and may use each other's
// workspace pointers as they are) only if pid and this agree. Containers on one host each have
// their own pid 1; the pid alone would take their ranks for threads of one process.
uint64_t processId() {
  static const uint64_t id = [] {
    std::random_device rd;
    return (uint64_t(rd()) << 32 | rd()) ^ uint64_t(getpid());
  }();
  return id;
}

bool sameProcess(const PeerInfo& a, const PeerInfo& b) { return a.pid == b.pid && a.process_id == b.process_id; }

// Every rank contributes a verdict; all agree on the first failing one.
Status agree(Bootstrap& boot, bool ok, const std::string& why, bool* all_ok, std::string* first_why) {
  Verdict mine{};
  mine.ok = ok ? 1 : 0;
  std::snprintf(mine.why, sizeof mine.why, "%s", why.c_str());
  std::vector<Verdict> all(boot.world());
  ARF_TRY(boot.allGather(&mine, all.data(), sizeof(Verdict)));
  *all_ok = true;
  for (int r = 0; r < boot.world(); ++r) {
    if (!all[r].ok) {
      *all_ok = false;
      *first_why = "rank " + std::to_string(r) + ": " + all[r].why;
      break;
    }
  }
  return Status::kSuccess;
}

std::mutex g_blocks_mu;
std::map<int, int> g_blocks_on_device;

// ---- 1. readConfig: the Config and the environment, checked.
Status readConfig(Communicator* c, const Config& config_in, const std::string& pre_error) {
  if (!pre_error.empty()) return fail(Status::kInvalidArgument, pre_error);
  if (config_in.version != kConfigVersion)
    return failf(Status::kInvalidArgument, "Config::version is %u, this library expects %u", config_in.version, kConfigVersion);
  c->config = config_in;
  if (config_in.tuning_file) {
    c->tuning_file_storage = config_in.tuning_file;
    c->config.tuning_file = c->tuning_file_storage.c_str();
  }
  if (c->config.read_env) ARF_TRY(applyEnv(processEnv(), &c->config, &c->tuning_file_storage));
  bool split = true;
  ARF_TRY(twoShotSplitFromEnv(processEnv(), &split));  // whatever read_env says (env.h)
  c->dev.two_shot_split = split ? 1 : 0;
  const Config& cfg = c->config;
  if (cfg.timeout_seconds <= 0 || !(cfg.timeout_seconds < 1e9))
    return failf(Status::kInvalidArgument, "timeout_seconds must be > 0 (got %g)", cfg.timeout_seconds);
  if (cfg.workspace_bytes < (size_t(1) << 20))
    return failf(Status::kInvalidArgument, "workspace_bytes must be >= 1 MiB (got %zu)", cfg.workspace_bytes);
  if (cfg.max_blocks < 0) return failf(Status::kInvalidArgument, "max_blocks must be >= 0 (got %d)", cfg.max_blocks);
  if (static_cast<unsigned>(cfg.strategy) > 3 || static_cast<unsigned>(cfg.sync_mode) > 2)
    return fail(Status::kInvalidArgument, "Config::strategy or sync_mode is not a valid enum value");
  if (c->world < 1 || c->world > kMaxRanks)
    return failf(Status::kNotSupported, "world size %d: arfusion supports 1..%d ranks", c->world, kMaxRanks);
  c->strategy = cfg.strategy;
  c->sync = cfg.sync_mode;
  return Status::kSuccess;
}

// ---- 2. allocate: the workspace (control words and flag area zeroed, Lamport area all-ones), the
// pinned control words, the abort stream, the call event, the NCCL path's scratch buffer.
Status allocate(Communicator* c, cudaDeviceProp* prop, char (&bus_id)[32]) {
  ARF_CUDA(cudaGetDevice(&c->device));
  ARF_CUDA(cudaGetDeviceProperties(prop, c->device));
  ARF_CUDA(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, c->device));
  const WorkspaceLayout layout(c->config.workspace_bytes, c->world);
  ARF_CUDA(cudaMalloc(&c->workspace, layout.total()));
  auto* ws = static_cast<uint8_t*>(c->workspace);
  // Zeroed, so that no kernel ever reads a byte nobody wrote (compute-sanitizer initcheck, run per
  // process, cannot see a peer's stores). On a stream of our own, waited for alone: a device-wide
  // wait would also wait for other communicators' kernels, which may be waiting for a peer that is
  // itself in this creation's exchange.
  ARF_CUDA(cudaStreamCreateWithFlags(&c->abort_stream, cudaStreamNonBlocking));
  ARF_CUDA(cudaMemsetAsync(ws, 0, WorkspaceLayout::kAreasOffset, c->abort_stream));
  ARF_CUDA(cudaMemsetAsync(ws + layout.dataOffset(), 0, layout.dataBytes(), c->abort_stream));
  // The Lamport area starts all-ones ("nothing arrived"); every reader restores it after use.
  ARF_CUDA(cudaMemsetAsync(ws + WorkspaceLayout::kLamportOffset, 0xff, layout.lamport_bytes, c->abort_stream));
  ARF_CUDA(cudaStreamSynchronize(c->abort_stream));
  void* ctl = nullptr;
  ARF_CUDA(cudaHostAlloc(&ctl, sizeof(ControlWords), cudaHostAllocMapped | cudaHostAllocPortable));
  c->ctl = static_cast<ControlWords*>(ctl);
  std::memset(c->ctl, 0, sizeof(ControlWords));
  void* ctl_dev = nullptr;
  ARF_CUDA(cudaHostGetDevicePointer(&ctl_dev, ctl, 0));
  c->ctl_dev = static_cast<ControlWords*>(ctl_dev);
  ARF_CUDA(cudaEventCreateWithFlags(&c->last_call, cudaEventDisableTiming));
  if (c->nccl) {
    c->scratch_bytes = size_t(8) << 20;
    ARF_CUDA(cudaMalloc(&c->scratch, c->scratch_bytes));
  }
  return Status::kSuccess;
}

// ---- 3. describe: what this rank tells its peers (also after a local failure: ok = 0 and why).
void describe(const Communicator* c, const cudaDeviceProp& prop, Status local, const std::string& local_error, PeerInfo* me) {
  const Config& cfg = c->config;
  me->ok = local == Status::kSuccess;
  std::snprintf(me->why, sizeof me->why, "%s", local_error.c_str());
  me->workspace_bytes = cfg.workspace_bytes;
  me->strategy = static_cast<int32_t>(cfg.strategy);
  me->sync_mode = static_cast<int32_t>(cfg.sync_mode);
  me->self_check = cfg.self_check ? 1 : 0;
  me->speed_check_forced = speedCheckForced(c->rank) ? 1 : 0;
  me->max_blocks = cfg.max_blocks;
  me->host_hash = hostHash();
  me->pid = static_cast<int32_t>(getpid());
  me->process_id = processId();
  me->device = c->device;
  me->sm_count = prop.multiProcessorCount;
  for (int s = 2; s <= kMaxRowBlocks && me->ok && c->world > 1; s *= 2)  // (the rest stay 0)
    if (oneShotMaxClusters(s, &me->row_clusters[s]) != cudaSuccess) (void)cudaGetLastError();  // it wrote 0
  me->cc_major = prop.major;
  me->cc_minor = prop.minor;
  me->ipc_ok = me->ok && cudaIpcGetMemHandle(&me->ipc, c->workspace) == cudaSuccess;
  (void)cudaGetLastError();
  me->base = reinterpret_cast<uint64_t>(c->workspace);
}

// ---- 4. exchange: every rank's description, any rank's failure, and the settings that must agree.
Status exchange(Communicator* c, const PeerInfo& me, Status local, const std::string& local_error,
                std::vector<PeerInfo>* peers) {
  peers->assign(c->world, PeerInfo{});
  ARF_TRY(c->boot->allGather(&me, peers->data(), sizeof(PeerInfo)));
  if (!me.ok) return fail(local, local_error);
  for (int r = 0; r < c->world; ++r)
    if (!(*peers)[r].ok) return failf(Status::kInvalidArgument, "rank %d failed to create its communicator: %s", r, (*peers)[r].why);
  // Workspace size (region addressing on peers), strategy, sync mode and self-check (what kernels
  // wait for) must be the same everywhere: a rank with a larger workspace would write past a
  // peer's allocation.
  for (int r = 0; r < c->world; ++r) {
    const PeerInfo& p = (*peers)[r];
    if (p.workspace_bytes != me.workspace_bytes || p.strategy != me.strategy || p.sync_mode != me.sync_mode ||
        p.self_check != me.self_check)
      return failf(Status::kInvalidArgument,
                   "ranks disagree on settings (rank %d: workspace %llu B, strategy %d, sync %d, self_check %d; rank %d: "
                   "%llu B, %d, %d, %d): Config and ARFUSION_* must be the same on every rank",
                   r, (unsigned long long)p.workspace_bytes, p.strategy, p.sync_mode, p.self_check, c->rank,
                   (unsigned long long)me.workspace_bytes, me.strategy, me.sync_mode, me.self_check);
  }
  return Status::kSuccess;
}

// ---- 5. classifyTopology: grid limits, arches, peer access and link type, kernel loading; then
// the ranks agree whether fusion is possible (the first rank's reason if not). peer_dev[r]: rank
// r's device as this process numbers it (-1 where unknown).
Status classifyTopology(Communicator* c, const PeerInfo& me, const std::vector<PeerInfo>& peers, int max_blocks_cap,
                        std::vector<int>* peer_dev) {
  Topology& t = c->topo;
  t.world = c->world;
  t.has_nccl = c->nccl != nullptr;
  t.cc_major = me.cc_major;
  t.cc_minor = me.cc_minor;
  t.max_blocks = max_blocks_cap > 0 ? std::min(max_blocks_cap, kMaxBlocksCap) : kMaxBlocksCap;
  bool any_pcie = false, any_nvlink = false;
  bool local_ok = true;
  std::string local_why;
  peer_dev->assign(c->world, -1);
  for (int r = 0; r < c->world; ++r) {
    const PeerInfo& p = peers[r];
    t.max_blocks = std::min(t.max_blocks, int(p.sm_count));
    if (p.max_blocks > 0) t.max_blocks = std::min(t.max_blocks, int(p.max_blocks));
    if (p.cc_major != me.cc_major || p.cc_minor != me.cc_minor) t.mixed_arch = true;
    if (r == c->rank || !local_ok) continue;
    if (p.host_hash != me.host_hash) {
      local_ok = false;
      local_why = "ranks span hosts (rank " + std::to_string(r) + " is on another host)";
      continue;
    }
    const bool same_process = sameProcess(p, me);
    int& dev = (*peer_dev)[r];
    if (same_process) {
      dev = p.device;
    } else if (cudaDeviceGetByPCIBusId(&dev, p.bus_id) != cudaSuccess) {
      (void)cudaGetLastError();
      local_ok = false;
      local_why = std::string("GPU ") + p.bus_id + " of rank " + std::to_string(r) + " is not visible to this process";
      continue;
    }
    if (!same_process && !p.ipc_ok) {
      local_ok = false;
      local_why = "rank " + std::to_string(r) + " could not export its workspace through CUDA IPC";
      continue;
    }
    if (dev == c->device) continue;  // several ranks on one GPU (test groups)
    int can = 0;
    if (cudaDeviceCanAccessPeer(&can, c->device, dev) != cudaSuccess) (void)cudaGetLastError(), can = 0;
    if (!can) {
      local_ok = false;
      local_why = "no peer access from GPU " + std::string(me.bus_id) + " to " + p.bus_id;
      continue;
    }
    // NVLink vs PCIe: native peer atomics are an NVLink (or C2C) property; PCIe peers lack them.
    int atomics = 0;
    if (cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, c->device, dev) != cudaSuccess)
      (void)cudaGetLastError(), atomics = 0;
    (atomics ? any_nvlink : any_pcie) = true;
  }
  // Every kernel loaded now, not at its first launch (kernels.h, preloadKernels: lazy loading can
  // deadlock fused kernels of two communicators); fails if the build has no code for this GPU.
  if (c->world > 1 && !t.mixed_arch) {
    const cudaError_t loaded = preloadKernels();
    if (loaded != cudaSuccess) {
      (void)cudaGetLastError();
      local_ok = false;
      local_why = loaded == cudaErrorNoKernelImageForDevice
                      ? "this build has no kernel image for sm_" + std::to_string(me.cc_major) + std::to_string(me.cc_minor) +
                            " (add it to CMAKE_CUDA_ARCHITECTURES)"
                      : std::string("loading the fused kernels failed: ") + cudaGetErrorString(loaded);
    }
  }
  // Clusters resident at once, in this communicator's share of each device (max_blocks of its
  // SMs), the fewest over ranks: a cluster grid beyond it would wait for SMs that its peers' waits hold.
  for (int s = 2; s <= kMaxRowBlocks; s *= 2) {
    t.row_clusters[s] = INT_MAX;
    for (const PeerInfo& p : peers)
      t.row_clusters[s] = std::min<int>(t.row_clusters[s], int(int64_t(p.row_clusters[s]) * t.max_blocks / std::max(1, int(p.sm_count))));
  }
  t.link = c->world == 1 ? LinkType::kSingleRank : any_pcie ? LinkType::kPCIe : any_nvlink ? LinkType::kNVLink : LinkType::kSameDevice;
  // Each rank saw its own pairs; the Auto table (and so every plan) follows the link, so all take
  // the slowest any rank saw: a driver that answered the peer-atomics query differently for the two
  // directions of one pair cannot give two ranks two tables.
  int32_t mine = static_cast<int32_t>(t.link);
  std::vector<int32_t> links(c->world);
  ARF_TRY(c->boot->allGather(&mine, links.data(), sizeof mine));
  t.link = static_cast<LinkType>(*std::max_element(links.begin(), links.end()));
  // The same on every rank: workspace_bytes and world agree (exchange), max_blocks is the minimum.
  const WorkspaceLayout layout(c->config.workspace_bytes, c->world);
  t.region_bytes = layout.regionBytes(t.max_blocks);
  t.lamport_region_bytes = layout.lamportRegionBytes(t.max_blocks);
  if (t.mixed_arch && local_ok) {
    local_ok = false;
    local_why = "ranks run on different GPU architectures";
  }
  ARF_TRY(agree(*c->boot, local_ok, local_why, &t.fusion_ok, &t.no_fusion_reason));
  if (c->world == 1) t.fusion_ok = false, t.no_fusion_reason = "single rank";
  return Status::kSuccess;
}

// ---- 6. mapPeers: each peer's workspace, through direct pointers (threads of one process) or CUDA
// IPC (processes); fusion is off on every rank if any rank failed to map one.
Status mapPeers(Communicator* c, const PeerInfo& me, const std::vector<PeerInfo>& peers, const std::vector<int>& peer_dev) {
  c->peer_base.assign(c->world, nullptr);
  c->peer_ipc.assign(c->world, false);
  c->peer_base[c->rank] = c->workspace;
  Topology& t = c->topo;
  if (!t.fusion_ok) return Status::kSuccess;
  bool mapped = true;
  std::string why;
  for (int r = 0; r < c->world && mapped; ++r) {
    if (r == c->rank) continue;
    const PeerInfo& p = peers[r];
    if (sameProcess(p, me)) {
      if (peer_dev[r] != c->device) {
        const cudaError_t e = cudaDeviceEnablePeerAccess(peer_dev[r], 0);
        if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) {
          mapped = false;
          why = std::string("cudaDeviceEnablePeerAccess: ") + cudaGetErrorString(e);
        }
        (void)cudaGetLastError();
      }
      c->peer_base[r] = reinterpret_cast<void*>(p.base);
    } else {
      void* ptr = nullptr;
      const cudaError_t e = cudaIpcOpenMemHandle(&ptr, p.ipc, cudaIpcMemLazyEnablePeerAccess);
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        mapped = false;
        why = "cudaIpcOpenMemHandle of rank " + std::to_string(r) + ": " + cudaGetErrorString(e);
      } else {
        c->peer_base[r] = ptr;
        c->peer_ipc[r] = true;
      }
    }
  }
  bool all_mapped = false;
  std::string first_why;
  ARF_TRY(agree(*c->boot, mapped, why, &all_mapped, &first_why));
  if (!all_mapped) {
    t.fusion_ok = false;
    t.no_fusion_reason = "peer mapping failed: " + first_why;
  }
  return Status::kSuccess;
}

// ---- 7. buildDeviceView: the DeviceComm every fused kernel takes by value.
void buildDeviceView(Communicator* c) {
  const WorkspaceLayout layout(c->config.workspace_bytes, c->world);
  const Topology& t = c->topo;
  DeviceComm& d = c->dev;
  for (int r = 0; r < c->world; ++r) {
    auto* base = static_cast<uint8_t*>(c->peer_base[r]);
    d.flags[r] = base ? reinterpret_cast<uint64_t*>(base + WorkspaceLayout::kFlagsOffset) : nullptr;
    d.data[r] = base ? base + layout.dataOffset() : nullptr;
    d.lamport[r] = base ? base + WorkspaceLayout::kLamportOffset : nullptr;
  }
  d.epochs = reinterpret_cast<uint32_t*>(static_cast<uint8_t*>(c->workspace) + WorkspaceLayout::kEpochsOffset);
  d.error = c->ctl_dev->error;
  d.abort_flag = reinterpret_cast<uint32_t*>(static_cast<uint8_t*>(c->workspace) + WorkspaceLayout::kAbortOffset);
  d.timeout_ns = static_cast<unsigned long long>(c->config.timeout_seconds * 1e9);
  d.region_bytes = t.region_bytes;
  d.lamport_region_bytes = t.lamport_region_bytes;
  d.rank = c->rank;
  d.world = c->world;
  d.max_blocks = t.max_blocks;
}

// ---- 8. chooseTable: the tuning file only if every rank loaded the same one. Every rank joins the
// exchange, with or without a file (hash 0), so that a file set on some ranks only cannot leave
// the others' later exchanges paired with this one.
Status chooseTable(Communicator* c) {
  const Topology& t = c->topo;
  c->table = builtinTable(t);
  AutoTable loaded;
  bool ok = false;
  std::string why = "no tuning file on this rank";
  if (c->config.tuning_file) {
    ok = loadTuningFile(c->config.tuning_file, t, &loaded) == Status::kSuccess;
    why = ok ? "" : lastError();
    clearError();
  }
  uint64_t h = ok ? fnv1a(formatTuning(t, loaded)) : 0;
  std::vector<uint64_t> hashes(c->world);
  ARF_TRY(c->boot->allGather(&h, hashes.data(), sizeof h));
  const bool same = std::all_of(hashes.begin(), hashes.end(), [&](uint64_t x) { return x == hashes[0] && x != 0; });
  const bool any = std::any_of(hashes.begin(), hashes.end(), [](uint64_t x) { return x != 0; });
  if (same) {
    c->table = std::move(loaded);
  } else if (c->config.tuning_file || any) {
    logf(LogLevel::kWarn, c->rank, "tuning file ignored, built-in table used: %s",
         ok ? "ranks loaded different tuning files (or some none)" : why.c_str());
  }
  return Status::kSuccess;
}

// ---- 9. runChecks: the sync policy, then the creation-time checks (creation_checks.h). The
// GridDependency self-check runs wherever GridDependency may be used: where the arch policy picks
// it, and where the user forces it. A forced GridDependency that failed it, or that was never
// checked on an arch where it is not validated, is refused (arch.h gridDependencyAllowed).
Status runChecks(Communicator* c, bool speed_check_forced) {
  const Topology& t = c->topo;
  const Config& cfg = c->config;
  ArchPolicy pol = t.mixed_arch ? archPolicyMixed() : archPolicy(t.cc_major, t.cc_minor);
  if (const int forced = checkFaults().arch_policy.load(); forced > 0 && !t.mixed_arch) pol = archPolicy(forced / 10, forced % 10);
  const bool policy_griddep = pol.default_sync == SyncMode::kGridDependency;
  const bool forced_griddep = cfg.sync_mode == SyncMode::kGridDependency;
  c->sync_auto = pol.default_sync;
  c->sync_auto_reason = pol.why;
  // The checks run fused kernels, so none runs where the NCCL path is forced (a user may force it
  // because fusion misbehaves on the machine); Auto then gets FlagBarrier, valid on every arch,
  // should commSetStrategy turn it on later.
  const bool checks = t.fusion_ok && cfg.self_check;
  const bool nccl_forced = cfg.strategy == Strategy::kNccl;
  GridDepCheck check = GridDepCheck::kNotRun;
  if (checks && !nccl_forced && (policy_griddep || forced_griddep)) {
    std::string outcome;
    ARF_TRY(selfCheck(c, &check, &outcome));
    if (policy_griddep) {
      if (check != GridDepCheck::kPassed) {
        c->sync_auto = SyncMode::kFlagBarrier;
        c->sync_auto_reason = outcome + ", using flag barrier";
        logf(LogLevel::kWarn, c->rank, "%s", c->sync_auto_reason.c_str());
      } else {
        c->sync_auto_reason += "; " + outcome;
      }
    } else {
      c->sync_auto_reason += std::string("; forced GridDependency ") + (check == GridDepCheck::kPassed ? "checked: " : "refused: ") + outcome;
    }
  } else if (checks && nccl_forced && policy_griddep) {
    c->sync_auto = SyncMode::kFlagBarrier;
    c->sync_auto_reason = std::string(pol.why) + "; self-check not run (NCCL path forced at creation): flag barrier";
  }
  c->griddep_allowed = gridDependencyAllowed(pol, check, &c->griddep_refusal);
  if (forced_griddep && t.fusion_ok && !nccl_forced) {
    if (!c->griddep_allowed)
      return failf(Status::kNotSupported, "GridDependency sync forced (Config::sync_mode or ARFUSION_SYNC) but refused: %s",
                   c->griddep_refusal.c_str());
    if (!policy_griddep) logf(LogLevel::kWarn, c->rank, "GridDependency sync forced where the arch policy says: %s", pol.why);
  }
  // The speed check where the Auto table is a guess: it needs the NCCL path to compare with.
  if (checks && !nccl_forced && t.has_nccl && (!c->table.measured || speed_check_forced)) ARF_TRY(speedCheck(c));
  return Status::kSuccess;
}

}  // namespace

int addFusedBlocks(int device, int delta) {
  std::lock_guard<std::mutex> lock(g_blocks_mu);
  return g_blocks_on_device[device] += delta;
}

Status createCommunicator(std::unique_ptr<Bootstrap> boot, ncclComm_t nccl, const Config& config, Communicator** out,
                          int max_blocks_cap, const std::string& pre_error) {
  std::unique_ptr<Communicator> c(new Communicator());
  c->nccl = nccl;
  c->rank = boot->rank();
  c->world = boot->world();
  c->boot = std::move(boot);
  cudaDeviceProp prop{};
  PeerInfo me{};
  Status local = readConfig(c.get(), config, pre_error);
  if (local == Status::kSuccess) local = allocate(c.get(), &prop, me.bus_id);
  const std::string local_error = local == Status::kSuccess ? "" : lastError();
  describe(c.get(), prop, local, local_error, &me);
  std::vector<PeerInfo> peers;
  ARF_TRY(exchange(c.get(), me, local, local_error, &peers));
  const bool speed_check_forced =
      std::any_of(peers.begin(), peers.end(), [](const PeerInfo& p) { return p.speed_check_forced != 0; });
  std::vector<int> peer_dev;
  ARF_TRY(classifyTopology(c.get(), me, peers, max_blocks_cap, &peer_dev));
  ARF_TRY(mapPeers(c.get(), me, peers, peer_dev));
  buildDeviceView(c.get());
  ARF_TRY(chooseTable(c.get()));
  ARF_TRY(runChecks(c.get(), speed_check_forced));

  const Topology& t = c->topo;
  logf(LogLevel::kInfo, c->rank,
       "created: world %d, device %d (sm_%d%d), link %s, fusion %s%s, max_blocks %d (row clusters of 2/4: %d/%d), "
       "regions %zu B (Lamport %zu B), sync auto %s (%s), table %s",
       c->world, c->device, t.cc_major, t.cc_minor, toString(t.link), t.fusion_ok ? "on" : "off: ",
       t.fusion_ok ? "" : t.no_fusion_reason.c_str(), t.max_blocks, t.row_clusters[2], t.row_clusters[4], t.region_bytes,
       t.lamport_region_bytes, toString(c->sync_auto), c->sync_auto_reason.c_str(), c->table.source.c_str());
  if (t.fusion_ok) {
    c->registered_blocks = t.max_blocks;
    const int used = addFusedBlocks(c->device, t.max_blocks);
    if (used > prop.multiProcessorCount)
      logf(LogLevel::kWarn, c->rank,
           "communicators on device %d may use %d fused blocks together, more than its %d SMs: if they run at the "
           "same time, give each a share with Config::max_blocks (ARFUSION_MAX_BLOCKS) or they can wait until the timeout",
           c->device, used, prop.multiProcessorCount);
  }
  *out = c.release();
  return Status::kSuccess;
}

}  // namespace arfusion::detail
