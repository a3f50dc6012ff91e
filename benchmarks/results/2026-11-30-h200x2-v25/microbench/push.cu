// push.cu (session 25): is the 2 MB one-shot's push limited by how its bytes are split over SMs?
// Session 21's per-block trace of the 128 x 8192 one-shot saw each block's 16 KB of peer data
// complete anywhere between 5.4 and 10.5 us into the call, while the link moves 2 MB in ~5.8 us.
// If some SMs push slower than others, a static split (one 16 KB row per block) ends when the
// slowest SM ends, and a dynamic split (blocks or warps take the next chunk from a counter) would
// end when the link has moved the bytes. This measures both GPUs pushing S bytes into each other
// at once (16-byte st.relaxed.sys, the one-shot's store form), no synchronisation between them:
//   rows   128 blocks x 512 threads, block b pushes 16 KB rows b, b+128, ... (the one-shot's split)
//   stride 132 blocks, grid-stride over 16-byte packs (the benchmark's peer_store kernel)
//   dyn8k  132 blocks take 8 KB chunks from a counter (thread 0's atomicAdd, one chunk ahead)
//   dyn2k  132 blocks, each warp takes 2 KB chunks from a counter (lane 0, one chunk ahead)
//   half   64 blocks x 32 KB rows (fewer pushers)
// Per variant and size: us per call in CUDA-graph replay (64 launches per graph, median of 7
// replays, max over GPUs), and, from 15 single launches with a system fence after each thread's
// stores, when each block's stores were complete (globaltimer, from the first block's start):
// the median over launches of the min / p50 / p90 / max over blocks.
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); return 1; } } while (0)

__device__ __forceinline__ void st16(uint4* p, uint4 v) {
  asm volatile("st.relaxed.sys.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
__device__ __forceinline__ unsigned long long gtime() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

struct Args {
  const uint4* src;
  uint4* dst;
  int nvec;                 // 16-byte packs
  unsigned* ctr;            // this launch's chunk counter (0 at start)
  unsigned* ctr_next;       // the next launch's, zeroed here
  unsigned long long* tim;  // per block: start, end (timed launches only)
};

enum Mode { kRows, kStride, kDyn8k, kDyn2k, kHalf };

template <int M, bool kTimed>
__global__ void __launch_bounds__(512, 1) push(Args a) {
  unsigned long long t0 = 0;
  if (kTimed && threadIdx.x == 0) t0 = gtime();
  if (blockIdx.x == 0 && threadIdx.x == 0 && a.ctr_next) *a.ctr_next = 0;
  if constexpr (M == kRows || M == kHalf) {
    constexpr int kRowVec = M == kRows ? 1024 : 2048;  // 16 KB or 32 KB
    const int rows = a.nvec / kRowVec;
    for (int r = blockIdx.x; r < rows; r += gridDim.x)
      for (int v = threadIdx.x; v < kRowVec; v += 512) {
        const int i = r * kRowVec + v;
        st16(a.dst + i, a.src[i]);
      }
  } else if constexpr (M == kStride) {
    for (int i = blockIdx.x * 512 + threadIdx.x; i < a.nvec; i += gridDim.x * 512) st16(a.dst + i, a.src[i]);
  } else if constexpr (M == kDyn8k) {
    __shared__ unsigned s_next[2];
    const unsigned chunks = unsigned(a.nvec / 512);
    if (threadIdx.x == 0) s_next[0] = atomicAdd(a.ctr, 1u);
    __syncthreads();
    for (int b = 0;; b ^= 1) {
      const unsigned c = s_next[b];
      if (c >= chunks) break;
      if (threadIdx.x == 0) s_next[b ^ 1] = atomicAdd(a.ctr, 1u);
      const int i = int(c) * 512 + threadIdx.x;
      st16(a.dst + i, a.src[i]);
      __syncthreads();
    }
  } else {  // kDyn2k: per warp, 128 packs (2 KB) per chunk, 4 per lane
    const unsigned chunks = unsigned(a.nvec / 128);
    const int lane = threadIdx.x & 31;
    unsigned next = 0;
    if (lane == 0) next = atomicAdd(a.ctr, 1u);
    next = __shfl_sync(0xffffffffu, next, 0);
    while (next < chunks) {
      const unsigned c = next;
      if (lane == 0) next = atomicAdd(a.ctr, 1u);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int i = int(c) * 128 + k * 32 + lane;
        st16(a.dst + i, a.src[i]);
      }
      next = __shfl_sync(0xffffffffu, next, 0);
    }
  }
  if constexpr (kTimed) {
    asm volatile("fence.sc.sys;" ::: "memory");
    __syncthreads();
    if (threadIdx.x == 0) {
      a.tim[2 * blockIdx.x] = t0;
      a.tim[2 * blockIdx.x + 1] = gtime();
    }
  }
}

template <int M, bool T>
void launch(int grid, cudaStream_t s, Args a) { push<M, T><<<grid, 512, 0, s>>>(a); }

static double med(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}
static double quant(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(q * (v.size() - 1) + 0.5))];
}

int main() {
  int ndev = 0;
  CK(cudaGetDeviceCount(&ndev));
  if (ndev < 2) { printf("needs 2 GPUs\n"); return 1; }
  const size_t maxBytes = size_t(32) << 20;
  const uint4* src[2];
  uint4* dst[2];
  unsigned* ctr[2];
  unsigned long long* tim[2];
  cudaStream_t st[2];
  for (int d = 0; d < 2; ++d) {
    CK(cudaSetDevice(d));
    CK(cudaDeviceEnablePeerAccess(1 - d, 0));
    uint4* s;
    CK(cudaMalloc(&s, maxBytes));
    CK(cudaMemset(s, 0x3c, maxBytes));
    src[d] = s;
    CK(cudaMalloc(&dst[d], maxBytes));
    CK(cudaMalloc(&ctr[d], 64 * sizeof(unsigned)));
    CK(cudaMemset(ctr[d], 0, 64 * sizeof(unsigned)));
    CK(cudaMalloc(&tim[d], 2 * 1024 * sizeof(unsigned long long)));
    CK(cudaStreamCreateWithFlags(&st[d], cudaStreamNonBlocking));
  }
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  struct V { const char* name; int mode; int grid; };
  const V vs[] = {{"rows", kRows, 128}, {"stride", kStride, sms}, {"dyn8k", kDyn8k, sms}, {"dyn2k", kDyn2k, sms}, {"half", kHalf, 64}};
  using L = void (*)(int, cudaStream_t, Args);
  const L untimed[] = {launch<kRows, false>, launch<kStride, false>, launch<kDyn8k, false>, launch<kDyn2k, false>, launch<kHalf, false>};
  const L timed[] = {launch<kRows, true>, launch<kStride, true>, launch<kDyn8k, true>, launch<kDyn2k, true>, launch<kHalf, true>};
  const size_t sizes[] = {size_t(2) << 20, size_t(8) << 20, size_t(32) << 20};
  printf("SMs %d; us per call: graph of 64 launches, median of 7 replays, max over the 2 GPUs\n", sms);
  printf("block stores complete (us from the first block's start; median over 15 launches, GPU 0 / GPU 1):\n");
  printf("%-7s %6s %9s | %-28s | %-28s\n", "split", "MiB", "us/call", "GPU0 min/p50/p90/max", "GPU1 min/p50/p90/max");
  for (size_t S : sizes) {
    for (int vi = 0; vi < 5; ++vi) {
      const V& v = vs[vi];
      const int nvec = int(S / 16);
      // Graph replay.
      cudaGraphExec_t ex[2];
      for (int d = 0; d < 2; ++d) {
        CK(cudaSetDevice(d));
        CK(cudaMemset(ctr[d], 0, 64 * sizeof(unsigned)));
        CK(cudaDeviceSynchronize());
        cudaGraph_t g;
        CK(cudaStreamBeginCapture(st[d], cudaStreamCaptureModeThreadLocal));
        for (int i = 0; i < 64; ++i)
          untimed[vi](v.grid, st[d], Args{src[d], dst[1 - d], nvec, ctr[d] + (i % 2), ctr[d] + ((i + 1) % 2), nullptr});
        CK(cudaStreamEndCapture(st[d], &g));
        CK(cudaGraphInstantiate(&ex[d], g, 0));
        CK(cudaGraphDestroy(g));
      }
      std::vector<double> per;
      cudaEvent_t e0[2], e1[2];
      for (int d = 0; d < 2; ++d) { CK(cudaSetDevice(d)); CK(cudaEventCreate(&e0[d])); CK(cudaEventCreate(&e1[d])); }
      for (int rep = -2; rep < 7; ++rep) {
        for (int d = 0; d < 2; ++d) { CK(cudaSetDevice(d)); CK(cudaStreamSynchronize(st[d])); }
        for (int d = 0; d < 2; ++d) {
          CK(cudaSetDevice(d));
          CK(cudaEventRecord(e0[d], st[d]));
          CK(cudaGraphLaunch(ex[d], st[d]));
          CK(cudaEventRecord(e1[d], st[d]));
        }
        double worst = 0;
        for (int d = 0; d < 2; ++d) {
          CK(cudaSetDevice(d));
          CK(cudaEventSynchronize(e1[d]));
          float ms = 0;
          CK(cudaEventElapsedTime(&ms, e0[d], e1[d]));
          worst = std::max(worst, double(ms) * 1000.0 / 64);
        }
        if (rep >= 0) per.push_back(worst);
      }
      for (int d = 0; d < 2; ++d) {
        CK(cudaSetDevice(d));
        CK(cudaGraphExecDestroy(ex[d]));
        CK(cudaEventDestroy(e0[d]));
        CK(cudaEventDestroy(e1[d]));
      }
      // Timed single launches.
      std::vector<double> q[2][4];
      std::vector<unsigned long long> h(2 * v.grid);
      for (int rep = -2; rep < 15; ++rep) {
        for (int d = 0; d < 2; ++d) {
          CK(cudaSetDevice(d));
          CK(cudaMemset(ctr[d], 0, 64 * sizeof(unsigned)));
          CK(cudaDeviceSynchronize());
        }
        for (int d = 0; d < 2; ++d) {
          CK(cudaSetDevice(d));
          timed[vi](v.grid, st[d], Args{src[d], dst[1 - d], nvec, ctr[d], ctr[d] + 1, tim[d]});
        }
        for (int d = 0; d < 2; ++d) {
          CK(cudaSetDevice(d));
          CK(cudaStreamSynchronize(st[d]));
          CK(cudaGetLastError());
          if (rep < 0) continue;
          CK(cudaMemcpy(h.data(), tim[d], h.size() * 8, cudaMemcpyDeviceToHost));
          unsigned long long start = ~0ull;
          for (int b = 0; b < v.grid; ++b) start = std::min(start, h[2 * b]);
          std::vector<double> ends;
          for (int b = 0; b < v.grid; ++b) ends.push_back((h[2 * b + 1] - start) / 1000.0);
          q[d][0].push_back(quant(ends, 0));
          q[d][1].push_back(quant(ends, 0.5));
          q[d][2].push_back(quant(ends, 0.9));
          q[d][3].push_back(quant(ends, 1));
        }
      }
      printf("%-7s %6zu %9.2f | %6.2f %6.2f %6.2f %6.2f | %6.2f %6.2f %6.2f %6.2f\n", v.name, S >> 20, med(per),
             med(q[0][0]), med(q[0][1]), med(q[0][2]), med(q[0][3]), med(q[1][0]), med(q[1][1]), med(q[1][2]), med(q[1][3]));
      fflush(stdout);
    }
  }
  return 0;
}
