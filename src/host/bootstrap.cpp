#include "bootstrap.h"

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <vector>

#include "device_guard.h"
#include "errors.h"

namespace arfusion::detail {
namespace {

class NcclBootstrap final : public Bootstrap {
 public:
  NcclBootstrap(ncclComm_t nccl, int rank, int world, int device, cudaStream_t stream)
      : nccl_(nccl), rank_(rank), world_(world), device_(device), stream_(stream) {}
  ~NcclBootstrap() override {
    if (buf_) cudaFree(buf_);
    cudaStreamDestroy(stream_);
  }
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  Status allGather(const void* mine, void* all, size_t bytes) override {
    // On the NCCL communicator's device whatever the current one is: creation exchanges its
    // errors through here, a wrong current device among them.
    DeviceGuard guard(device_);
    const size_t need = bytes * world_;
    if (need > cap_) {
      if (buf_) cudaFree(buf_);
      buf_ = nullptr;
      cap_ = 0;
      ARF_CUDA(cudaMalloc(&buf_, need));
      // NCCL's in-place all-gather reads the whole buffer (initcheck): give it defined bytes.
      ARF_CUDA(cudaMemsetAsync(buf_, 0, need, stream_));
      cap_ = need;
    }
    char* dev = static_cast<char*>(buf_);
    ARF_CUDA(cudaMemcpyAsync(dev + rank_ * bytes, mine, bytes, cudaMemcpyHostToDevice, stream_));
    ARF_NCCL(ncclAllGather(dev + rank_ * bytes, dev, bytes, ncclUint8, nccl_, stream_));
    ARF_CUDA(cudaMemcpyAsync(all, dev, need, cudaMemcpyDeviceToHost, stream_));
    ARF_CUDA(cudaStreamSynchronize(stream_));
    return Status::kSuccess;
  }

 private:
  ncclComm_t nccl_;
  int rank_, world_, device_;
  cudaStream_t stream_;
  void* buf_ = nullptr;
  size_t cap_ = 0;
};

}  // namespace

Status makeNcclBootstrap(ncclComm_t nccl, std::unique_ptr<Bootstrap>* out) {
  int rank = 0, world = 0, device = -1;
  ARF_NCCL(ncclCommUserRank(nccl, &rank));
  ARF_NCCL(ncclCommCount(nccl, &world));
  ARF_NCCL(ncclCommCuDevice(nccl, &device));
  DeviceGuard guard(device);
  cudaStream_t stream = nullptr;
  ARF_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  out->reset(new NcclBootstrap(nccl, rank, world, device, stream));
  return Status::kSuccess;
}

// A generation-counted rendezvous: each allGather round, ranks deposit their bytes, the last one
// to arrive publishes the round, everyone copies it out.
class LocalExchange {
 public:
  explicit LocalExchange(int world) : world_(world), slots_(world) {}
  void allGather(int rank, const void* mine, void* all, size_t bytes) {
    std::unique_lock<std::mutex> lock(mu_);
    const unsigned long long gen = generation_;
    slots_[rank].assign(static_cast<const char*>(mine), static_cast<const char*>(mine) + bytes);
    if (++arrived_ == world_) {
      published_.clear();
      for (auto& s : slots_) published_.insert(published_.end(), s.begin(), s.end());
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return generation_ != gen; });
    }
    std::memcpy(all, published_.data(), published_.size() < bytes * world_ ? published_.size() : bytes * world_);
    // Keep `published_` until every rank of this round copied it: the next round rebuilds it only
    // after all ranks arrived again, which they do after copying.
  }
  int world() const { return world_; }

 private:
  int world_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  unsigned long long generation_ = 0;
  std::vector<std::vector<char>> slots_;
  std::vector<char> published_;
};

namespace {
class LocalBootstrap final : public Bootstrap {
 public:
  LocalBootstrap(std::shared_ptr<LocalExchange> shared, int rank) : shared_(std::move(shared)), rank_(rank) {}
  int rank() const override { return rank_; }
  int world() const override { return shared_->world(); }
  Status allGather(const void* mine, void* all, size_t bytes) override {
    shared_->allGather(rank_, mine, all, bytes);
    return Status::kSuccess;
  }

 private:
  std::shared_ptr<LocalExchange> shared_;
  int rank_;
};
}  // namespace

std::shared_ptr<LocalExchange> makeLocalExchange(int world) { return std::make_shared<LocalExchange>(world); }

std::unique_ptr<Bootstrap> makeLocalBootstrap(std::shared_ptr<LocalExchange> shared, int rank) {
  return std::unique_ptr<Bootstrap>(new LocalBootstrap(std::move(shared), rank));
}

}  // namespace arfusion::detail
