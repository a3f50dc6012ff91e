// Session 23 microbenchmark (bench only, not part of the library): can copy engines raise the
// two-shot's bandwidth floor? Two GPUs, each moving N bytes into the other at once (as both ranks
// of a two-shot phase do). Per case, the median over 15 repeats of the slower GPU's time, µs.
//   sm       : SM stores (the bench's peer_store kernel: SM-count blocks of 512 threads, 16-byte
//              load local + store peer)
//   ce       : one cudaMemcpyAsync peer copy
//   ce/K     : the same bytes as K copies of N/K (a chunked pipeline's per-copy overhead)
//   hybrid f : SM stores move the first f of the bytes, a copy engine the rest, on two streams at once
//   ce+hbm   : the copy beside a local HBM kernel that reads 2N and writes N (an epilogue's traffic);
//              hbm alone for comparison
// Build: nvcc -O3 -arch=sm_90a -o ce ce.cu ; run: ./ce [MiB ...]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#define CK(x)                                                                      \
  do {                                                                             \
    cudaError_t e_ = (x);                                                          \
    if (e_ != cudaSuccess) {                                                       \
      std::printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                \
    }                                                                              \
  } while (0)

__global__ void __launch_bounds__(512) peerStoreKernel(const uint4* __restrict__ src, uint4* dst, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) __stwb(dst + i, src[i]);
}
// out = a + b, elementwise on 16-byte words (two reads and one write per word).
__global__ void __launch_bounds__(512) hbmKernel(const uint4* __restrict__ a, const uint4* __restrict__ b, uint4* out, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const uint4 x = a[i], y = b[i];
    out[i] = make_uint4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
}

struct Gpu {
  int dev, sms;
  cudaStream_t s1, s2;
  cudaEvent_t e0, e1, mid;
  char *src, *dst, *a, *b, *out;  // dst receives the peer's bytes
};

int main(int argc, char** argv) {
  std::vector<size_t> mibs;
  for (int i = 1; i < argc; ++i) mibs.push_back(std::strtoull(argv[i], nullptr, 10));
  if (mibs.empty()) mibs = {8, 32, 128};
  const size_t max_bytes = *std::max_element(mibs.begin(), mibs.end()) << 20;
  Gpu g[2];
  for (int d = 0; d < 2; ++d) {
    Gpu& x = g[d];
    x.dev = d;
    CK(cudaSetDevice(d));
    CK(cudaDeviceEnablePeerAccess(1 - d, 0));
    CK(cudaDeviceGetAttribute(&x.sms, cudaDevAttrMultiProcessorCount, d));
    CK(cudaStreamCreateWithFlags(&x.s1, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&x.s2, cudaStreamNonBlocking));
    CK(cudaEventCreate(&x.e0));
    CK(cudaEventCreate(&x.e1));
    CK(cudaEventCreateWithFlags(&x.mid, cudaEventDisableTiming));
    for (char** p : {&x.src, &x.dst, &x.a, &x.b, &x.out}) {
      CK(cudaMalloc(p, max_bytes));
      CK(cudaMemset(*p, 0x11 * (d + 1), max_bytes));
    }
  }
  // Runs body(d, gpu) on both GPUs between e0 (s1) and e1 (s1, after s2 joined); median of the
  // slower GPU's time.
  auto time = [&](const std::function<void(Gpu&, Gpu&)>& body) {
    std::vector<float> t;
    for (int rep = 0; rep < 17; ++rep) {
      for (int d = 0; d < 2; ++d) {
        Gpu& x = g[d];
        CK(cudaSetDevice(d));
        CK(cudaEventRecord(x.e0, x.s1));
        CK(cudaStreamWaitEvent(x.s2, x.e0, 0));
        body(x, g[1 - d]);
        CK(cudaEventRecord(x.mid, x.s2));
        CK(cudaStreamWaitEvent(x.s1, x.mid, 0));
        CK(cudaEventRecord(x.e1, x.s1));
      }
      float worst = 0;
      for (int d = 0; d < 2; ++d) {
        CK(cudaSetDevice(d));
        CK(cudaEventSynchronize(g[d].e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, g[d].e0, g[d].e1));
        worst = std::max(worst, ms);
      }
      if (rep >= 2) t.push_back(worst * 1000.f);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  for (size_t mib : mibs) {
    const size_t n = mib << 20;
    auto sm = [&](Gpu& x, Gpu& peer, size_t off, size_t bytes, cudaStream_t s) {
      peerStoreKernel<<<x.sms, 512, 0, s>>>(reinterpret_cast<const uint4*>(x.src + off), reinterpret_cast<uint4*>(peer.dst + off), bytes / 16);
    };
    auto ce = [&](Gpu& x, Gpu& peer, size_t off, size_t bytes, cudaStream_t s) {
      CK(cudaMemcpyAsync(peer.dst + off, x.src + off, bytes, cudaMemcpyDeviceToDevice, s));
    };
    auto report = [&](const char* what, float us, size_t bytes) {
      std::printf("%4zu MiB  %-14s %9.1f us  %6.1f GB/s\n", mib, what, us, bytes / (us * 1e3));
    };
    report("sm", time([&](Gpu& x, Gpu& p) { sm(x, p, 0, n, x.s1); }), n);
    report("ce", time([&](Gpu& x, Gpu& p) { ce(x, p, 0, n, x.s1); }), n);
    for (int k : {4, 16, 64}) {
      char name[32];
      std::snprintf(name, sizeof name, "ce/%d", k);
      report(name, time([&](Gpu& x, Gpu& p) { for (int c = 0; c < k; ++c) ce(x, p, c * (n / k), n / k, x.s1); }), n);
    }
    for (int f8 : {1, 2, 3, 4}) {  // f = f8 / 8 of the bytes by SM stores
      const size_t sm_bytes = n / 8 * f8;
      char name[32];
      std::snprintf(name, sizeof name, "hybrid %d/8", f8);
      report(name, time([&](Gpu& x, Gpu& p) {
               sm(x, p, 0, sm_bytes, x.s1);
               ce(x, p, sm_bytes, n - sm_bytes, x.s2);
             }), n);
    }
    auto hbm = [&](Gpu& x, cudaStream_t s) {
      hbmKernel<<<x.sms * 2, 512, 0, s>>>(reinterpret_cast<const uint4*>(x.a), reinterpret_cast<const uint4*>(x.b), reinterpret_cast<uint4*>(x.out), n / 16);
    };
    report("hbm alone", time([&](Gpu& x, Gpu&) { hbm(x, x.s1); }), n);
    report("ce+hbm", time([&](Gpu& x, Gpu& p) {
             ce(x, p, 0, n, x.s2);
             hbm(x, x.s1);
           }), n);
    report("sm+hbm", time([&](Gpu& x, Gpu& p) {
             sm(x, p, 0, n, x.s2);
             hbm(x, x.s1);
           }), n);
  }
  return 0;
}
