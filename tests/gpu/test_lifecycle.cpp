// GPU tests: creation failures and create/destroy cycles.
#include <thread>

#include "gpu_tests.h"

using namespace gputest;

// commCreate with the wrong current device on one rank: both ranks fail, each saying why, and
// the exchange that tells them runs on each NCCL communicator's device (not on the current one).
// The caller's current device is left as it was.
TEST(ThreadsNccl2, WrongCurrentDeviceOnOneRankFailsOnBoth) {
  if (gpuCount() < 2) GTEST_SKIP() << "needs 2 GPUs, found " << gpuCount();
  std::vector<ncclComm_t> ncomms(2);
  const int devs[2] = {0, 1};
  ASSERT_EQ(ncclCommInitAll(ncomms.data(), 2, devs), ncclSuccess);
  Status st[2] = {Status::kSuccess, Status::kSuccess};
  std::string msg[2];
  int current_after[2] = {-1, -1};
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      cudaSetDevice(0);  // right for rank 0, wrong for rank 1
      arfusion::Communicator* comm = nullptr;
      st[r] = arfusion::commCreate(ncomms[r], testConfig(), &comm);
      msg[r] = arfusion::lastError();
      cudaGetDevice(&current_after[r]);
      if (comm) arfusion::commDestroy(comm);
    });
  }
  for (auto& t : threads) t.join();
  for (auto c : ncomms) ncclCommDestroy(c);
  const std::string why = "current CUDA device 0 is not the NCCL communicator's device 1";
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(st[r], Status::kInvalidArgument) << "rank " << r << ": " << msg[r];
    EXPECT_NE(msg[r].find(why), std::string::npos) << "rank " << r << ": " << msg[r];
    EXPECT_EQ(current_after[r], 0) << "rank " << r;
  }
  EXPECT_NE(msg[0].find("rank 1 failed"), std::string::npos) << msg[0];
}

// ------------------------------------------------------------------ lifecycle
// 200 create/destroy cycles of a 2-rank group (one GPU each where there are two) leave the free
// device memory where it was after the first cycle (within 2 MiB: the allocator's own rounding).
TEST(Lifecycle, CreateDestroy200TimesLeaksNoDeviceMemory) {
  const int ngpu = gpuCount();
  if (ngpu < 1) GTEST_SKIP() << "needs a GPU";
  arfusion::Config cfg = testConfig();
  cfg.workspace_bytes = size_t(8) << 20;
  const int devs[2] = {0, ngpu > 1 ? 1 : 0};
  auto cycle = [&]() -> bool {
    std::vector<arfusion::Communicator*> comms;
    if (arfusion::testing::createGroup(2, devs, cfg, &comms, 8) != Status::kSuccess) return false;
    for (int r = 0; r < 2; ++r) {
      cudaSetDevice(devs[r]);
      if (arfusion::commDestroy(comms[r]) != Status::kSuccess) return false;
    }
    return true;
  };
  auto freeBytes = [&](int dev) {
    size_t f = 0, t = 0;
    cudaSetDevice(dev);
    cudaDeviceSynchronize();
    cudaMemGetInfo(&f, &t);
    return f;
  };
  ASSERT_TRUE(cycle()) << arfusion::lastError();
  const size_t base0 = freeBytes(devs[0]), base1 = freeBytes(devs[1]);
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(cycle()) << "cycle " << i << ": " << arfusion::lastError();
  const size_t slack = size_t(2) << 20;
  EXPECT_GE(freeBytes(devs[0]) + slack, base0);
  EXPECT_GE(freeBytes(devs[1]) + slack, base1);
}

// As gtest_main, but a run in which every test was skipped (no GPU, or fewer than the tests need)
