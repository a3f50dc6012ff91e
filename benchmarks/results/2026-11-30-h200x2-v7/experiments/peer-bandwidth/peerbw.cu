// Calibration: how fast can SMs move bytes to / from the peer GPU, both directions at once?
// push: load local, store to peer (weak st.v4 or st.relaxed.sys.v4), U packs per iteration.
// pull: load peer (ld.cg / ld.relaxed.sys), store local.
#include <cuda_runtime.h>
#include <cstdio>
#include <vector>
#include <algorithm>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1);} } while (0)

template <int U, int MODE>
__global__ void __launch_bounds__(512) push(const uint4* __restrict__ src, uint4* dst, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (U - 1) * stride < n; i += U * stride) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = src[i + u * stride];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      uint4* p = dst + i + u * stride;
      if (MODE == 0) __stwb(p, v[u]);
      else if (MODE == 1)
        asm volatile("st.relaxed.sys.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v[u].x), "r"(v[u].y), "r"(v[u].z), "r"(v[u].w) : "memory");
      else
        asm volatile("st.relaxed.sys.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v[u].x), "r"(v[u].y), "r"(v[u].z), "r"(v[u].w));
    }
  }
  for (; i < n; i += stride) dst[i] = src[i];
}

// Blocked push: block b owns a contiguous chunk (like the fused kernels' rows).
template <int U>
__global__ void __launch_bounds__(512) pushBlocked(const uint4* __restrict__ src, uint4* dst, size_t n) {
  const size_t per = (n + gridDim.x - 1) / gridDim.x;
  const size_t b0 = blockIdx.x * per, b1 = min(n, b0 + per);
  size_t i = b0 + threadIdx.x;
  for (; i + (U - 1) * blockDim.x < b1; i += U * blockDim.x) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = src[i + u * blockDim.x];
#pragma unroll
    for (int u = 0; u < U; ++u) __stwb(dst + i + u * blockDim.x, v[u]);
  }
  for (; i < b1; i += blockDim.x) dst[i] = src[i];
}

template <int U>
__global__ void __launch_bounds__(512) pull(const uint4* src_peer, uint4* __restrict__ dst, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (U - 1) * stride < n; i += U * stride) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = __ldcg(src_peer + i + u * stride);
#pragma unroll
    for (int u = 0; u < U; ++u) __stwb(dst + i + u * stride, v[u]);
  }
  for (; i < n; i += stride) dst[i] = __ldcg(src_peer + i);
}

int main() {
  int ndev = 0;
  CK(cudaGetDeviceCount(&ndev));
  if (ndev < 2) { printf("need 2 GPUs\n"); return 1; }
  const size_t maxb = size_t(128) << 20;
  uint4 *src[2], *dst[2];
  cudaStream_t st[2];
  cudaEvent_t e0[2], e1[2];
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  for (int d = 0; d < 2; ++d) {
    CK(cudaSetDevice(d));
    CK(cudaDeviceEnablePeerAccess(1 - d, 0));
    CK(cudaMalloc(&src[d], maxb));
    CK(cudaMalloc(&dst[d], maxb));
    CK(cudaMemset(src[d], 0x3c, maxb));
    CK(cudaStreamCreateWithFlags(&st[d], cudaStreamNonBlocking));
    CK(cudaEventCreate(&e0[d]));
    CK(cudaEventCreate(&e1[d]));
  }
  for (int d = 0; d < 2; ++d) { CK(cudaSetDevice(d)); CK(cudaDeviceSynchronize()); }
  printf("SMs %d\n", sms);
  printf("%-28s %6s %10s %8s %8s\n", "kind", "grid", "MiB", "us", "GB/s");
  const int iters = 10;
  auto bench = [&](const char* name, int grid, size_t bytes, auto launch) {
    std::vector<float> best(2, 1e30f);
    for (int rep = 0; rep < 3; ++rep) {
      for (int d = 0; d < 2; ++d) {
        CK(cudaSetDevice(d));
        launch(d, st[d]);  // warm
        CK(cudaEventRecord(e0[d], st[d]));
        for (int i = 0; i < iters; ++i) launch(d, st[d]);
        CK(cudaEventRecord(e1[d], st[d]));
      }
      float worst = 0;
      for (int d = 0; d < 2; ++d) {
        CK(cudaSetDevice(d));
        CK(cudaEventSynchronize(e1[d]));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0[d], e1[d]));
        worst = std::max(worst, ms);
      }
      best[0] = std::min(best[0], worst);
    }
    CK(cudaGetLastError());
    const double us = best[0] * 1000.0 / iters;
    printf("%-28s %6d %10.1f %8.1f %8.1f\n", name, grid, bytes / 1048576.0, us, bytes / (us * 1e-6) / 1e9);
  };
  for (size_t mib : {8, 32, 128}) {
    const size_t bytes = mib << 20, n = bytes / 16;
    bench("copy-engine", 0, bytes, [&](int d, cudaStream_t s) { CK(cudaMemcpyAsync(dst[1 - d], src[d], bytes, cudaMemcpyDeviceToDevice, s)); });
    for (int grid : {sms / 2, sms, 2 * sms}) {
      bench("push weak U1", grid, bytes, [&](int d, cudaStream_t s) { push<1, 0><<<grid, 512, 0, s>>>(src[d], dst[1 - d], n); });
      bench("push weak U4", grid, bytes, [&](int d, cudaStream_t s) { push<4, 0><<<grid, 512, 0, s>>>(src[d], dst[1 - d], n); });
      bench("push relaxed.sys+clobber U1", grid, bytes, [&](int d, cudaStream_t s) { push<1, 1><<<grid, 512, 0, s>>>(src[d], dst[1 - d], n); });
      bench("push relaxed.sys+clobber U4", grid, bytes, [&](int d, cudaStream_t s) { push<4, 1><<<grid, 512, 0, s>>>(src[d], dst[1 - d], n); });
      bench("push relaxed.sys U4", grid, bytes, [&](int d, cudaStream_t s) { push<4, 2><<<grid, 512, 0, s>>>(src[d], dst[1 - d], n); });
      bench("push blocked U4", grid, bytes, [&](int d, cudaStream_t s) { pushBlocked<4><<<grid, 512, 0, s>>>(src[d], dst[1 - d], n); });
      bench("pull U1", grid, bytes, [&](int d, cudaStream_t s) { pull<1><<<grid, 512, 0, s>>>(src[1 - d], dst[d], n); });
      bench("pull U4", grid, bytes, [&](int d, cudaStream_t s) { pull<4><<<grid, 512, 0, s>>>(src[1 - d], dst[d], n); });
    }
  }
  // One direction only (rank 0 pushes), for reference.
  {
    const size_t bytes = maxb, n = bytes / 16;
    CK(cudaSetDevice(0));
    cudaEventRecord(e0[0], st[0]);
    for (int i = 0; i < iters; ++i) push<4, 0><<<sms, 512, 0, st[0]>>>(src[0], dst[1], n);
    cudaEventRecord(e1[0], st[0]);
    cudaEventSynchronize(e1[0]);
    float ms;
    cudaEventElapsedTime(&ms, e0[0], e1[0]);
    printf("one-direction push weak U4 %d blocks 128 MiB: %.1f us %.1f GB/s\n", sms, ms * 100, bytes / (ms * 1e-4) / 1e9);
  }
  return 0;
}
