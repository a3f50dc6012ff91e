#include "bench_harness.h"

#include "testing/testing.h"

#include <algorithm>
#include <cstdio>
#include <thread>

namespace arfbench {

std::string gpuShortfall(int need, int* found) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    n = 0;
  }
  *found = n;
  if (n >= need) return "";
  if (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice || n == 0)
    return e == cudaErrorInsufficientDriver ? "no CUDA GPU is visible on this machine (no NVIDIA driver is loaded)"
                                            : "no CUDA GPU is visible on this machine";
  return "this needs " + std::to_string(need) + " GPUs and this machine has " + std::to_string(n);
}

std::string cudaVersionString(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

std::string ncclVersionString(int v) {
  // NCCL_VERSION_CODE: major * 10000 + minor * 100 + patch since 2.9 (major * 1000 + ... before).
  const int major = v >= 10000 ? v / 10000 : v / 1000, rest = v >= 10000 ? v % 10000 : v % 1000;
  return std::to_string(major) + "." + std::to_string(rest / 100) + "." + std::to_string(rest % 100);
}

const char* pathName(Path p) {
  switch (p) {
    case Path::kNcclAllReduce: return "nccl_allreduce";
    case Path::kAddRMSNorm: return "add_rmsnorm";
    case Path::kNcclPath: return "nccl_path";
    case Path::kOneShot: return "oneshot";
    case Path::kTwoShot: return "twoshot";
    case Path::kAuto: return "auto";
    case Path::kPeerCopy: return "peer_copy";
    case Path::kOneShotFlag: return "oneshot_flag";
    case Path::kPeerStore: return "peer_store";
    case Path::kCopy: return "d2d_copy";
  }
  return "?";
}

bool parseQuantFormat(const std::string& text, arfusion::QuantFormat* format) {
  for (arfusion::QuantFormat f : {arfusion::QuantFormat::kNone, arfusion::QuantFormat::kFp8, arfusion::QuantFormat::kFp8PerToken,
                                  arfusion::QuantFormat::kFp8PerGroup, arfusion::QuantFormat::kNvfp4})
    if (text == arfusion::toString(f)) {
      *format = f;
      return true;
    }
  return false;
}

arfusion::ScaleLayout benchLayout(arfusion::QuantFormat f) {
  return f == arfusion::QuantFormat::kFp8PerGroup ? arfusion::ScaleLayout::kColumnMajor
         : f == arfusion::QuantFormat::kNvfp4     ? arfusion::ScaleLayout::kSwizzled128x4
                                                  : arfusion::ScaleLayout::kLinear;
}

double hbmBytes(int64_t tokens, int64_t hidden, arfusion::DType d, arfusion::QuantFormat quant, bool norm_out) {
  const double message = double(tokens * hidden) * (d == arfusion::DType::kFloat32 ? 4 : 2);
  size_t values = 0, scales = 0;
  if (quant != arfusion::QuantFormat::kNone) arfusion::quantBufferBytes(quant, benchLayout(quant), tokens, hidden, &values, &scales);
  return (norm_out ? 4 : 3) * message + double(values) + double(scales);
}

Group::Group(int world, const arfusion::Config& config, bool local) : world_(world), local_(local) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < (local ? 1 : world)) {
    error_ = "needs " + std::to_string(local ? 1 : world) + " GPU(s), found " + std::to_string(n);
    return;
  }
  comms_.assign(world, nullptr);
  streams_.assign(world, nullptr);
  if (local) {
    // Every rank on GPU 0, a share of its SMs each: fused kernels spin-wait for their peers, so
    // every rank's grid must be resident at once.
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    const std::vector<int> devs(world, 0);
    arfusion::Config cfg = config;
    cfg.self_check = config.self_check;
    if (arfusion::testing::createGroup(world, devs.data(), cfg, &comms_, sms / world) != arfusion::Status::kSuccess) {
      error_ = std::string("createGroup: ") + arfusion::lastError();
      comms_.assign(world, nullptr);
      return;
    }
    onAll([&](int r) { cudaStreamCreateWithFlags(&streams_[r], cudaStreamNonBlocking); });
    return;
  }
  nccl_.resize(world);
  std::vector<int> devs(world);
  for (int r = 0; r < world; ++r) devs[r] = r;
  if (ncclCommInitAll(nccl_.data(), world, devs.data()) != ncclSuccess) {
    error_ = "ncclCommInitAll failed";
    return;
  }
  std::vector<std::string> errs(world);
  onAll([&](int r) {
    cudaStreamCreateWithFlags(&streams_[r], cudaStreamNonBlocking);
    if (arfusion::commCreate(nccl_[r], config, &comms_[r]) != arfusion::Status::kSuccess) errs[r] = arfusion::lastError();
    for (int p = 0; p < world_; ++p)
      if (p != r) cudaDeviceEnablePeerAccess(p, 0);
    cudaGetLastError();
  });
  for (auto& e : errs)
    if (!e.empty()) error_ = "commCreate: " + e;
}

Group::~Group() {
  onAll([&](int r) {
    if (comms_.size() > size_t(r) && comms_[r]) arfusion::commDestroy(comms_[r]);
    if (streams_.size() > size_t(r) && streams_[r]) cudaStreamDestroy(streams_[r]);
  });
  for (auto c : nccl_)
    if (c) ncclCommDestroy(c);
}

std::unique_ptr<Group> openAllGpus(const char* tool, int* exit_code, const arfusion::Config& config) {
  int n = 0;
  if (const std::string why = gpuShortfall(2, &n); !why.empty()) {
    std::fprintf(stderr, "%s: %s; it runs one rank per GPU on two or more.\n", tool, why.c_str());
    *exit_code = kExitSkip;
    return nullptr;
  }
  auto g = std::make_unique<Group>(n, config);
  if (!g->error().empty()) {
    std::fprintf(stderr, "%s: %s\n", tool, g->error().c_str());
    *exit_code = kExitFailed;
    return nullptr;
  }
  return g;
}

std::string Group::deviceName() const {
  cudaDeviceProp p{};
  cudaGetDeviceProperties(&p, 0);
  return p.name;
}

void Group::onAll(const std::function<void(int)>& f) {
  std::vector<std::thread> t;
  for (int r = 0; r < world_; ++r)
    t.emplace_back([&, r] {
      cudaSetDevice(local_ ? 0 : r);
      f(r);
    });
  for (auto& x : t) x.join();
}

std::string Group::planOf(arfusion::Op op, arfusion::DType d, int64_t tokens, int64_t hidden, arfusion::Strategy strategy,
                          arfusion::SyncMode sync, bool extended) {
  arfusion::commSetStrategy(comms_[0], strategy, sync);
  arfusion::Plan p;
  const arfusion::Status st = arfusion::plan(comms_[0], arfusion::Shape{tokens, hidden, d, op, extended}, &p);
  arfusion::commSetStrategy(comms_[0], arfusion::Strategy::kAuto, arfusion::SyncMode::kAuto);
  if (st != arfusion::Status::kSuccess) return "?";
  std::string s = arfusion::toString(p.strategy);
  if (p.strategy == arfusion::Strategy::kNccl) return s;
  s += std::string("/") + arfusion::toString(p.sync_mode) + " grid " + std::to_string(p.blocks) + " rows " +
       std::to_string(p.rows_per_step);
  if (p.row_blocks > 1) s += " row-blocks " + std::to_string(p.row_blocks);
  return s;
}

std::string timeOnce(cudaStream_t s, cudaEvent_t e0, cudaEvent_t e1, const std::function<std::string()>& enqueue, float* ms) {
  *ms = 0;
  cudaError_t e = cudaEventRecord(e0, s);
  if (e != cudaSuccess) return cudaGetErrorString(e);
  if (std::string why = enqueue(); !why.empty()) return why;
  e = cudaEventRecord(e1, s);
  if (e == cudaSuccess) e = cudaEventSynchronize(e1);
  if (e == cudaSuccess) e = cudaEventElapsedTime(ms, e0, e1);
  if (e != cudaSuccess) return cudaGetErrorString(e);
  if (!(*ms > 0)) return "non-positive elapsed time";
  return "";
}

Timing Group::time(Path path, arfusion::Op op, arfusion::DType d, int64_t tokens, int64_t hidden, arfusion::QuantFormat quant,
                    bool gemma, bool norm_out) {
  const bool eager = false;
  Timing out;
  if (!error_.empty()) {
    out.error = error_;
    return out;
  }
  if (!norm_out && quant == arfusion::QuantFormat::kNone) {
    out.error = "a call without norm_out needs a quantized output";
    return out;
  }
  if (local_ && (path == Path::kNcclAllReduce || path == Path::kNcclPath || path == Path::kPeerCopy || path == Path::kPeerStore)) {
    out.error = std::string(pathName(path)) + " needs one GPU per rank (a local group shares one GPU and has no NCCL)";
    return out;
  }
  const size_t elem = d == arfusion::DType::kFloat32 ? 4 : 2;
  const size_t count = static_cast<size_t>(tokens * hidden), bytes = count * elem;
  // Enough calls per graph that one replay is well past launch overhead, few enough to stay short.
  const int calls = static_cast<int>(std::clamp<int64_t>((int64_t(256) << 20) / int64_t(std::max<size_t>(bytes, 1)), 4, 64));
  const int reps = 7;
  std::vector<std::vector<float>> per_rank(world_);
  std::vector<std::string> errs(world_);
  std::vector<void*> peer_dst(world_, nullptr);
  const arfusion::Strategy strat = path == Path::kNcclPath ? arfusion::Strategy::kNccl
                                   : path == Path::kOneShot || path == Path::kOneShotFlag ? arfusion::Strategy::kOneShot
                                   : path == Path::kTwoShot ? arfusion::Strategy::kTwoShot
                                                            : arfusion::Strategy::kAuto;
  const ncclDataType_t nt = d == arfusion::DType::kFloat32 ? ncclFloat32 : d == arfusion::DType::kFloat16 ? ncclFloat16 : ncclBfloat16;
  // Buffers first (peer copy needs every rank's destination before capturing).
  // input, residual, residual_out, gamma, out; the quantized values, scales and the scale read;
  // the copy's source and destination (twice the message).
  size_t q_values = 0, q_scales = 0;
  if (quant != arfusion::QuantFormat::kNone &&
      arfusion::quantBufferBytes(quant, benchLayout(quant), tokens, hidden, &q_values, &q_scales) != arfusion::Status::kSuccess) {
    out.error = arfusion::lastError();
    return out;
  }
  const size_t copy_bytes = path == Path::kCopy ? 2 * bytes : 0;
  const size_t sizes[] = {bytes, bytes, bytes, hidden * elem, bytes, std::max<size_t>(q_values, 16), std::max<size_t>(q_scales, 16), 16,
                          std::max<size_t>(copy_bytes, 16), std::max<size_t>(copy_bytes, 16)};
  constexpr int kBufs = sizeof sizes / sizeof sizes[0];
  std::vector<std::vector<void*>> bufs(world_);
  onAll([&](int r) {
    bufs[r].assign(kBufs, nullptr);
    for (int i = 0; i < kBufs; ++i) {
      if (cudaMalloc(&bufs[r][i], sizes[i]) != cudaSuccess) {
        errs[r] = "out of memory";
        return;
      }
      if (i < 5) fillRandom(bufs[r][i], i == 3 ? hidden : count, d, 1000 * r + i, streams_[r]);
    }
    // The scale a quantized output reads: FP8's static scale, NVFP4's global scale (448 * 6 / amax).
    const float scale = quant == arfusion::QuantFormat::kNvfp4 ? 224.f : 0.05f;
    cudaMemcpyAsync(bufs[r][7], &scale, sizeof scale, cudaMemcpyHostToDevice, streams_[r]);
    cudaStreamSynchronize(streams_[r]);
    peer_dst[r] = bufs[r][4];
  });
  for (auto& e : errs)
    if (!e.empty()) out.error = e;
  if (out.error.empty()) {
    const arfusion::SyncMode sync = path == Path::kOneShotFlag ? arfusion::SyncMode::kFlagBarrier : arfusion::SyncMode::kAuto;
    if (path == Path::kAuto || path == Path::kOneShot || path == Path::kOneShotFlag || path == Path::kTwoShot)
      out.plan = planOf(op, d, tokens, hidden, strat, sync, quant != arfusion::QuantFormat::kNone || gemma);
    onAll([&](int r) {
      cudaStream_t s = streams_[r];
      void *in = bufs[r][0], *res = bufs[r][1], *res_out = bufs[r][2], *g = bufs[r][3], *o = bufs[r][4];
      arfusion::commSetStrategy(comms_[r], strat, sync);
      arfusion::NormArgs na;  // the fused op with a quantized output or Gemma weights
      na.input = in, na.residual_in = res, na.residual_out = res_out, na.gamma = g, na.norm_out = norm_out ? o : nullptr;
      na.tokens = tokens, na.hidden = hidden, na.dtype = d, na.gemma = gemma;
      na.quant.format = quant, na.quant.layout = benchLayout(quant);
      na.quant.values = bufs[r][5], na.quant.scales = q_scales ? bufs[r][6] : nullptr;
      na.quant.scale = static_cast<const float*>(bufs[r][7]);
      const bool extended = (quant != arfusion::QuantFormat::kNone || gemma) && op == arfusion::Op::kAllReduceAddRMSNorm;
      auto one = [&]() -> bool {
        arfusion::Status st = arfusion::Status::kSuccess;
        switch (path) {
          case Path::kNcclAllReduce:
            return ncclAllReduce(in, o, count, nt, ncclSum, nccl_[r], s) == ncclSuccess;
          case Path::kAddRMSNorm:
            st = extended ? arfusion::addRMSNorm(na, s) : arfusion::addRMSNorm(in, res, res_out, g, o, tokens, hidden, d, 1e-6f, s);
            break;
          case Path::kCopy:
            return cudaMemcpyAsync(bufs[r][9], bufs[r][8], copy_bytes, cudaMemcpyDeviceToDevice, s) == cudaSuccess;
          case Path::kPeerCopy:
            return cudaMemcpyAsync(peer_dst[(r + 1) % world_], in, bytes, cudaMemcpyDeviceToDevice, s) == cudaSuccess;
          case Path::kPeerStore:
            peerStore(in, peer_dst[(r + 1) % world_], bytes, s);
            return cudaGetLastError() == cudaSuccess;
          default:
            if (op == arfusion::Op::kAllReduce) st = arfusion::allReduce(comms_[r], in, o, tokens, hidden, d, s);
            else if (op == arfusion::Op::kAllReduceAdd) st = arfusion::allReduceAdd(comms_[r], in, res, res_out, tokens, hidden, d, s);
            else if (extended) st = arfusion::allReduceAddRMSNorm(comms_[r], na, s);
            else st = arfusion::allReduceAddRMSNorm(comms_[r], in, res, res_out, g, o, tokens, hidden, d, 1e-6f, s);
        }
        if (st != arfusion::Status::kSuccess) errs[r] = arfusion::lastError();
        return st == arfusion::Status::kSuccess;
      };
      cudaEvent_t e0, e1;
      cudaEventCreate(&e0);
      cudaEventCreate(&e1);
      cudaGraphExec_t exec = nullptr;
      if (!eager) {
        cudaGraph_t graph;
        cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
        bool ok = true;
        for (int i = 0; i < calls && ok; ++i) ok = one();
        cudaStreamEndCapture(s, &graph);
        if (!ok || cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
          if (errs[r].empty()) errs[r] = "graph capture failed";
          return;
        }
        cudaGraphDestroy(graph);
      }
      auto enqueue = [&]() -> std::string {
        if (exec) {
          const cudaError_t e = cudaGraphLaunch(exec, s);
          return e == cudaSuccess ? "" : cudaGetErrorString(e);
        }
        for (int i = 0; i < calls; ++i)
          if (!one()) return "a call failed";
        return "";
      };
      for (int rep = -2; rep < reps && errs[r].empty(); ++rep) {
        float ms = 0;
        if (std::string e = timeOnce(s, e0, e1, enqueue, &ms); !e.empty()) {
          if (errs[r].empty()) errs[r] = "timed replay: " + e;  // one() may have said why already
        } else if (rep >= 0) {
          per_rank[r].push_back(ms * 1000.f / calls);
        }
      }
      if (exec) cudaGraphExecDestroy(exec);
      cudaEventDestroy(e0);
      cudaEventDestroy(e1);
      const char* detail = nullptr;
      if (arfusion::commGetAsyncError(comms_[r], &detail) != arfusion::Status::kSuccess) errs[r] = detail;
      arfusion::commSetStrategy(comms_[r], arfusion::Strategy::kAuto, arfusion::SyncMode::kAuto);
    });
    for (auto& e : errs)
      if (!e.empty()) out.error = e;
  }
  onAll([&](int r) {
    cudaDeviceSynchronize();
    for (void* p : bufs[r]) cudaFree(p);
  });
  if (!out.error.empty()) return out;
  // Per repeat: the slowest rank; then the median over repeats.
  std::vector<double> rep_max(reps, 0);
  for (int i = 0; i < reps; ++i)
    for (int r = 0; r < world_; ++r) rep_max[i] = std::max<double>(rep_max[i], per_rank[r][i]);
  std::sort(rep_max.begin(), rep_max.end());
  out.us = rep_max[reps / 2];
  return out;
}

}  // namespace arfbench
