#include "gpu_harness.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include "testing/testing.h"
#include "host/bootstrap.h"

namespace arftest {

int gpuCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

namespace {

// Bounds a thread group's run: past the deadline (ARFTEST_DEADLINE_S, default 900 s, under ctest's
// 1,200 s kill) it says which run hung and aborts the process. A rank that left early leaves its
// peers waiting in a host exchange, where no device timeout reaches them; ctest's kill would say
// nothing about where.
class Watchdog {
 public:
  explicit Watchdog(const std::string& what) : what_(what), thread_([this] { watch(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  void watch() {
    const char* env = std::getenv("ARFTEST_DEADLINE_S");
    const double seconds = env ? std::atof(env) : 900.0;
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return done_; })) {
      std::fprintf(stderr, "%s: still running after %.0f s (a rank waiting for one that left?): aborting\n", what_.c_str(), seconds);
      std::fflush(stderr);
      std::abort();
    }
  }
  const std::string what_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

// Every failing rank's error, not only the first: a rank that stopped early for a host-side reason
// leaves its peers with a device-side timeout or mismatch, and the root cause is then on a later rank.
std::string allFailures(const std::vector<std::string>& errs) {
  std::string all;
  for (size_t r = 0; r < errs.size(); ++r)
    if (!errs[r].empty()) all += (all.empty() ? "rank " : "; rank ") + std::to_string(r) + ": " + errs[r];
  return all;
}

// The tests' own kernels (compare.cu) loaded on every device of the group before any rank starts,
// for every scenario: loaded lazily while a fused kernel spins, a kernel may wait for the device to
// go idle, which it never does while that kernel waits for the loading rank (arfusion preloads its
// own kernels at commCreate for the same reason). Without it, the 2-rank soak with both ranks on
// one H200 did not finish, and two communicators used at once hung.
std::string preloadTestKernelsOn(const std::vector<int>& devs) {
  for (int d : devs) {
    if (cudaSetDevice(d) != cudaSuccess) return "cudaSetDevice(" + std::to_string(d) + ") failed";
    if (std::string e = preloadTestKernels(); !e.empty()) return e;
  }
  return "";
}

}  // namespace

std::function<void(const void*, void*, size_t)> ncclHostAllGather(ncclComm_t nccl, cudaStream_t stream, int rank, int world) {
  // A failure anywhere leaves `all` all-ones: agreeStep then reads every rank as failed, so a
  // broken exchange stops the scenario instead of reading as agreement.
  return [=](const void* mine, void* all, size_t bytes) {
    void* d = nullptr;
    bool ok = cudaMalloc(&d, bytes * world) == cudaSuccess;
    // Defined bytes for NCCL's in-place all-gather (initcheck).
    ok = ok && cudaMemsetAsync(d, 0, bytes * world, stream) == cudaSuccess;
    ok = ok && cudaMemcpyAsync(static_cast<char*>(d) + rank * bytes, mine, bytes, cudaMemcpyHostToDevice, stream) == cudaSuccess;
    // Issued even after a failure above (into nothing useful), so that the peers' all-gather is
    // not left waiting for this rank's.
    const bool gathered = ncclAllGather(d ? static_cast<char*>(d) + rank * bytes : nullptr, d, bytes, ncclUint8, nccl, stream) == ncclSuccess;
    ok = ok && gathered && cudaMemcpyAsync(all, d, bytes * world, cudaMemcpyDeviceToHost, stream) == cudaSuccess;
    ok = cudaStreamSynchronize(stream) == cudaSuccess && ok;
    if (d) cudaFree(d);
    if (!ok) {
      (void)cudaGetLastError();
      std::memset(all, 0xff, bytes * world);
    }
  };
}

std::string runThreadsNccl(int world, const arfusion::Config& config, const Scenario& scenario, std::string* skip) {
  if (gpuCount() < world) {
    *skip = "needs " + std::to_string(world) + " GPUs, found " + std::to_string(gpuCount());
    return "";
  }
  std::vector<ncclComm_t> ncomms(world);
  std::vector<int> devs(world);
  for (int r = 0; r < world; ++r) devs[r] = r;
  if (std::string e = preloadTestKernelsOn(devs); !e.empty()) return e;
  if (ncclCommInitAll(ncomms.data(), world, devs.data()) != ncclSuccess) return "ncclCommInitAll failed";
  std::vector<std::string> errs(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      cudaSetDevice(r);
      RankCtx ctx;
      ctx.rank = r;
      ctx.world = world;
      ctx.device = r;
      ctx.nccl = ncomms[r];
      cudaStreamCreateWithFlags(&ctx.stream, cudaStreamNonBlocking);
      ctx.allGather = ncclHostAllGather(ctx.nccl, ctx.stream, r, world);
      const arfusion::Status st = arfusion::commCreate(ctx.nccl, config, &ctx.comm);
      if (st != arfusion::Status::kSuccess) {
        errs[r] = std::string("commCreate: ") + arfusion::statusString(st) + ": " + arfusion::lastError();
      } else {
        errs[r] = scenario(ctx);
        arfusion::commDestroy(ctx.comm);
      }
      cudaStreamDestroy(ctx.stream);
    });
  }
  {
    Watchdog watchdog("runThreadsNccl(" + std::to_string(world) + " ranks)");
    for (auto& t : threads) t.join();
  }
  for (auto c : ncomms) ncclCommDestroy(c);
  return allFailures(errs);
}

std::string runLocalGroup(int world, const arfusion::Config& config, int max_blocks, const Scenario& scenario,
                          std::string* skip) {
  const int ngpu = gpuCount();
  if (ngpu < 1) {
    *skip = "needs a GPU";
    return "";
  }
  std::vector<int> devs(world);
  for (int r = 0; r < world; ++r) devs[r] = r % ngpu;
  if (std::string e = preloadTestKernelsOn(devs); !e.empty()) return e;
  std::vector<arfusion::Communicator*> comms;
  const arfusion::Status st = arfusion::testing::createGroup(world, devs.data(), config, &comms, max_blocks);
  if (st != arfusion::Status::kSuccess) return std::string("createGroup: ") + arfusion::lastError();
  auto exchange = arfusion::detail::makeLocalExchange(world);
  std::vector<std::string> errs(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      cudaSetDevice(devs[r]);
      RankCtx ctx;
      ctx.rank = r;
      ctx.world = world;
      ctx.device = devs[r];
      ctx.comm = comms[r];
      cudaStreamCreateWithFlags(&ctx.stream, cudaStreamNonBlocking);
      auto boot = std::shared_ptr<arfusion::detail::Bootstrap>(arfusion::detail::makeLocalBootstrap(exchange, r));
      ctx.allGather = [boot](const void* mine, void* all, size_t bytes) { boot->allGather(mine, all, bytes); };
      errs[r] = scenario(ctx);
      cudaStreamDestroy(ctx.stream);
    });
  }
  {
    Watchdog watchdog("runLocalGroup(" + std::to_string(world) + " ranks)");
    for (auto& t : threads) t.join();
  }
  for (int r = 0; r < world; ++r) {
    cudaSetDevice(devs[r]);
    arfusion::commDestroy(comms[r]);
  }
  return allFailures(errs);
}

}  // namespace arftest
