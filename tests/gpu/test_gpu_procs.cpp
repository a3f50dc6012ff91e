// GPU tests, ranks as processes: main() forks one child per rank before any CUDA call; rank 0
// creates the NCCL unique id and hands it to the others through pipes. Each child runs the same
// GoogleTest list (so every collective is entered by every rank in the same order) with its own
// NCCL communicator and arfusion communicator (CUDA IPC between the processes).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "gpu_harness.h"

using namespace arftest;

namespace {
RankCtx g_ctx;
std::string g_skip;
double g_timeout_s = 5;     // ARFTEST_TIMEOUT_S if set (sanitizers slow kernels down a lot)
bool g_self_check = true;   // ARFTEST_SELF_CHECK=0: no creation-time self-check (its timing loops
                            // take minutes under racecheck; the kernels it runs are tested anyway)
bool g_peer_killed = false;  // set by the last test: NCCL must then be aborted, not destroyed
int g_report_fd = -1;        // rank 1: where it writes its failed-test count before it is killed


#define NEED_RANKS() \
  if (!g_skip.empty()) GTEST_SKIP() << g_skip

}  // namespace

// The shapes the one-shot and two-shot issues name, for ranks as processes (CUDA IPC) with the
// default 256 MiB workspace; test_gpu runs them too, as threads, at 64 MiB.
TEST(Processes, Shapes) {
  NEED_RANKS();
  uint64_t seed = 9000;
  for (arfusion::DType d : {arfusion::DType::kBFloat16, arfusion::DType::kFloat16, arfusion::DType::kFloat32})
    for (int64_t t : {1, 2, 3, 17, 64, 128, 129, 300})
      for (int64_t h : {1024, 2880, 4096, 5120, 8192}) {
        const std::string e = scenarioShape(g_ctx, ShapeCase{d, t, h, seed++, h == 2880});
        ASSERT_EQ(e, "");
      }
  for (int64_t t : {1000, 4097, 16384})
    ASSERT_EQ(scenarioShape(g_ctx, ShapeCase{arfusion::DType::kBFloat16, t, 2048, seed++}), "");
}

// Small and quick: the target of compute-sanitizer runs (the sanitize_* ctest entries). Ranks
// as processes, so the tool instruments each rank's kernels without serialising them against the
// peer's (threads of one process under the tool: waits timed out). A 1 MiB workspace makes the
// 300-row case take several steps per block. ARFTEST_SAN_BLOCKS (default 8) caps the fused grid
// (1 makes one block run every unit of a call). Under racecheck the Lamport one-shot once hung
// here: the tool appears to run a block's warps one at a time, and a warp waited for a peer's rows
// that the peer's later warps had not pushed yet (the epochs in the timeout reports fit exactly).
// The kernel now pushes with every warp before any waits; racecheck then ran to the end.
TEST(Processes, SanitizeSmallShapes) {
  NEED_RANKS();
  arfusion::Config cfg;
  cfg.timeout_seconds = g_timeout_s;
  cfg.workspace_bytes = size_t(1) << 20;
  const char* blocks = std::getenv("ARFTEST_SAN_BLOCKS");
  cfg.max_blocks = blocks ? std::atoi(blocks) : 8;
  cfg.self_check = g_self_check;
  cfg.read_env = false;
  RankCtx ctx = g_ctx;
  ASSERT_EQ(arfusion::commCreate(ctx.nccl, cfg, &ctx.comm), arfusion::Status::kSuccess) << arfusion::lastError();
  if (cfg.max_blocks >= 8) {  // the last case below must run the cluster kernel
    arfusion::Plan pl;
    ASSERT_EQ(arfusion::commSetStrategy(ctx.comm, arfusion::Strategy::kOneShot, arfusion::SyncMode::kGridDependency), arfusion::Status::kSuccess);
    ASSERT_EQ(arfusion::plan(ctx.comm, arfusion::Shape{2, 4096}, &pl), arfusion::Status::kSuccess) << arfusion::lastError();
    EXPECT_EQ(pl.row_blocks, 4) << pl.reason;
    ASSERT_EQ(arfusion::commSetStrategy(ctx.comm, arfusion::Strategy::kAuto, arfusion::SyncMode::kAuto), arfusion::Status::kSuccess);
  }
  for (const ShapeCase& c : {ShapeCase{arfusion::DType::kBFloat16, 3, 1024, 61, true},
                             ShapeCase{arfusion::DType::kFloat32, 17, 2880, 62},
                             ShapeCase{arfusion::DType::kFloat16, 5, 1000, 63, false, true},
                             ShapeCase{arfusion::DType::kBFloat16, 300, 1024, 64},
                             // the Lamport one-shot over clusters: 2 rows of 4 blocks (Plan::row_blocks)
                             ShapeCase{arfusion::DType::kBFloat16, 2, 4096, 65, true},
                             // and its two passes: 64 KB fp32 rows
                             ShapeCase{arfusion::DType::kFloat32, 2, 16384, 66}})
    EXPECT_EQ(scenarioShape(ctx, c), "");
  arfusion::commDestroy(ctx.comm);
}

// The quantized outputs with ranks as processes (CUDA IPC), every fused path against the NCCL path.
TEST(Processes, QuantizedOutputs) {
  NEED_RANKS();
  using arfusion::QuantFormat;
  using arfusion::ScaleLayout;
  uint64_t seed = 9500;
  for (const QuantCase& q : {QuantCase{QuantFormat::kFp8PerToken, ScaleLayout::kLinear},
                             QuantCase{QuantFormat::kFp8PerGroup, ScaleLayout::kUE8M0Packed},
                             QuantCase{QuantFormat::kNvfp4, ScaleLayout::kSwizzled128x4, false, 224.f}})
    for (int64_t t : {1, 200})
      ASSERT_EQ(scenarioQuant(g_ctx, QuantShapeCase{arfusion::DType::kBFloat16, t, 4096, seed++, q, t == 1}), "");
}

TEST(Processes, Soak) {
  NEED_RANKS();
  int64_t compared = 0;
  unsigned long long mism = 0;
  EXPECT_EQ(scenarioSoak(g_ctx, 20000, 21, &compared, &mism), "");
  if (g_ctx.rank == 0) std::printf("process soak: %lld calls, %llu mismatching words\n", (long long)compared, mism);
}

TEST(Processes, BadInput) {
  NEED_RANKS();
  EXPECT_EQ(scenarioBadInput(g_ctx), "");
}

// Ranks as processes map each other's workspace through CUDA IPC: 200 create/destroy cycles must
// return every byte of device memory (cudaMemGetInfo, within 2 MiB), close every IPC mapping (the
// process's memory mappings, /proc/self/maps, within 16 lines) and keep host memory flat (resident
// set, /proc/self/statm, within 32 MiB: a leak of 160 KiB per cycle would cross it). Three cycles
// first, so one-time allocations of the CUDA and NCCL runtimes are in the baseline.
namespace {
size_t mapsLines() {
  FILE* f = std::fopen("/proc/self/maps", "r");
  if (!f) return 0;
  size_t n = 0;
  for (int ch; (ch = std::fgetc(f)) != EOF;) n += ch == '\n';
  std::fclose(f);
  return n;
}
size_t residentBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long size = 0, resident = 0;
  const int got = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  return got == 2 ? resident * static_cast<size_t>(sysconf(_SC_PAGESIZE)) : 0;
}
}  // namespace

TEST(Processes, CreateDestroy200TimesLeaksNothing) {
  NEED_RANKS();
  arfusion::Config cfg;
  cfg.workspace_bytes = size_t(8) << 20;
  cfg.self_check = false;
  cfg.read_env = false;
  cfg.timeout_seconds = g_timeout_s;
  auto cycle = [&]() -> std::string {
    arfusion::Communicator* c = nullptr;
    if (arfusion::commCreate(g_ctx.nccl, cfg, &c) != arfusion::Status::kSuccess) return std::string("create: ") + arfusion::lastError();
    if (arfusion::commDestroy(c) != arfusion::Status::kSuccess) return std::string("destroy: ") + arfusion::lastError();
    return "";
  };
  auto freeDevice = [] {
    size_t f = 0, t = 0;
    cudaDeviceSynchronize();
    cudaMemGetInfo(&f, &t);
    return f;
  };
  for (int i = 0; i < 3; ++i) ASSERT_EQ(cycle(), "");
  const size_t dev0 = freeDevice(), maps0 = mapsLines(), rss0 = residentBytes();
  for (int i = 0; i < 200; ++i) ASSERT_EQ(cycle(), "") << "cycle " << i;
  const size_t dev1 = freeDevice(), maps1 = mapsLines(), rss1 = residentBytes();
  std::printf("rank %d, 200 create/destroy: device free %+.1f MiB, maps %+ld lines, resident %+.1f MiB\n", g_ctx.rank,
              (double(dev1) - double(dev0)) / (1 << 20), long(maps1) - long(maps0), (double(rss1) - double(rss0)) / (1 << 20));
  EXPECT_GE(dev1 + (size_t(2) << 20), dev0);
  EXPECT_LE(maps1, maps0 + 16);
  EXPECT_LE(rss1, rss0 + (size_t(32) << 20));
}

// Must stay the last test: rank 1 dies (SIGKILL, as if the process were killed mid-run); rank 0's
// next call must end with kTimeout within the bound, and teardown must not hang (NCCL is aborted,
// not destroyed, after this). Rank 1 first writes how many of its tests failed to the parent, which
// accepts its SIGKILL only after reading 0 (a SIGKILL alone would hide rank 1's failures).
TEST(Processes, ZzKilledPeerTimesOut) {
  NEED_RANKS();
  g_peer_killed = true;
  if (g_ctx.rank == 1) {
    const int failed = ::testing::UnitTest::GetInstance()->failed_test_count();
    if (g_report_fd >= 0 && write(g_report_fd, &failed, sizeof failed) != sizeof failed) std::fprintf(stderr, "rank 1: report write failed\n");
    raise(SIGKILL);
  }
  const int64_t T = 4, H = 4096;
  const size_t s = T * H * 2;
  void* buf = nullptr;
  ASSERT_EQ(cudaMalloc(&buf, s * 5), cudaSuccess);
  ASSERT_EQ(cudaMemset(buf, 0, s * 5), cudaSuccess);
  char* b = static_cast<char*>(buf);
  ASSERT_EQ(arfusion::commSetStrategy(g_ctx.comm, arfusion::Strategy::kOneShot, arfusion::SyncMode::kFlagBarrier), arfusion::Status::kSuccess);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(arfusion::allReduceAddRMSNorm(g_ctx.comm, b, b + s, b + 2 * s, b + 3 * s, b + 4 * s, T, H, arfusion::DType::kBFloat16,
                                          1e-6f, g_ctx.stream),
            arfusion::Status::kSuccess);
  cudaStreamSynchronize(g_ctx.stream);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(arfusion::commGetAsyncError(g_ctx.comm), arfusion::Status::kTimeout);
  EXPECT_LT(secs, 30.0);
  std::printf("killed peer: rank 0 reported %s after %.2f s\n", arfusion::statusString(arfusion::commGetAsyncError(g_ctx.comm)), secs);
  cudaFree(buf);
}

namespace {

int child(int rank, int world, int read_fd, const std::vector<int>& write_fds, int argc, char** argv) {
  ncclUniqueId id;
  if (rank == 0) {
    ncclGetUniqueId(&id);
    for (int fd : write_fds)
      if (write(fd, &id, sizeof id) != sizeof id) return 3;
  } else if (read(read_fd, &id, sizeof id) != sizeof id) {
    return 3;
  }
  ::testing::InitGoogleTest(&argc, argv);
  if (rank != 0) ::testing::GTEST_FLAG(brief) = true;
  if (gpuCount() < world) {
    g_skip = "needs " + std::to_string(world) + " GPUs for " + std::to_string(world) + " processes, found " + std::to_string(gpuCount());
    const int rc = RUN_ALL_TESTS();
    return rc == 0 ? kExitSkipped : rc;
  }
  cudaSetDevice(rank);
  // The tests' own kernels loaded before any fused call, as the thread harnesses do (gpu_harness.cpp).
  if (const std::string e = preloadTestKernels(); !e.empty()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.c_str());
    return 6;
  }
  g_ctx.rank = rank;
  g_ctx.world = world;
  g_ctx.device = rank;
  if (ncclCommInitRank(&g_ctx.nccl, world, id, rank) != ncclSuccess) return 4;
  cudaStreamCreateWithFlags(&g_ctx.stream, cudaStreamNonBlocking);
  g_ctx.allGather = ncclHostAllGather(g_ctx.nccl, g_ctx.stream, rank, world);
  if (const char* env = std::getenv("ARFTEST_TIMEOUT_S")) g_timeout_s = std::atof(env);
  if (const char* env = std::getenv("ARFTEST_SELF_CHECK")) g_self_check = std::atoi(env) != 0;
  arfusion::Config cfg;
  cfg.timeout_seconds = g_timeout_s;
  cfg.self_check = g_self_check;
  if (arfusion::commCreate(g_ctx.nccl, cfg, &g_ctx.comm) != arfusion::Status::kSuccess) {
    std::fprintf(stderr, "rank %d: commCreate: %s\n", rank, arfusion::lastError());
    return 5;
  }
  const int rc = RUN_ALL_TESTS();
  arfusion::commDestroy(g_ctx.comm);
  if (g_peer_killed) ncclCommAbort(g_ctx.nccl);
  else ncclCommDestroy(g_ctx.nccl);
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  const int world = 2;
  std::vector<int> rfd(world, -1), wfd;
  for (int r = 1; r < world; ++r) {
    int p[2];
    if (pipe(p) != 0) return 2;
    rfd[r] = p[0];
    wfd.push_back(p[1]);
  }
  int report[2];  // rank 1 -> parent: its failed-test count, written before it is killed
  if (pipe(report) != 0) return 2;
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      close(report[0]);
      if (r == 1) g_report_fd = report[1];
      else close(report[1]);
      _exit(child(r, world, rfd[r], r == 0 ? wfd : std::vector<int>{}, argc, argv));
    }
    pids.push_back(pid);
  }
  close(report[1]);  // EOF once rank 1 is gone, whether or not it wrote
  // Never hang: a rank that failed early leaves its peer waiting in a collective; give the group
  // a deadline, then kill what is left.
  int rc = 0, skipped = 0;
  size_t done = 0;
  std::vector<bool> finished(world, false);
  for (int tick = 0; done < pids.size(); ++tick) {
    for (int r = 0; r < world; ++r) {
      if (finished[r]) continue;
      int status = 0;
      if (waitpid(pids[r], &status, WNOHANG) == pids[r]) {
        finished[r] = true;
        ++done;
        if (r != 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {  // the last test kills rank 1
          int failed = -1;
          if (read(report[0], &failed, sizeof failed) != sizeof failed || failed != 0) {
            std::fprintf(stderr, "test_gpu_procs: rank %d was killed %s\n", r,
                         failed > 0 ? "after failed tests (its log above says which)" : "without reporting its tests");
            rc = 1;
          }
        } else if (WIFEXITED(status) && WEXITSTATUS(status) == kExitSkipped) {
          ++skipped;
        } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
          rc = 1;
        }
      }
    }
    if (done < pids.size() && tick > 10 * 1200) {  // 1200 s
      std::fprintf(stderr, "test_gpu_procs: deadline passed, killing the remaining ranks\n");
      for (int r = 0; r < world; ++r)
        if (!finished[r]) kill(pids[r], SIGKILL);
      return 1;
    }
    if (done < pids.size()) usleep(100000);
  }
  // Every rank skipped everything (too few GPUs): ctest reports the entry as skipped, not passed.
  return rc == 0 && skipped == world ? kExitSkipped : rc;
}
