// Both GPUs push 128 MiB into each other at once (as an allreduce does), with SM stores from
// `push_blocks` blocks of 512 threads, `batch` 16-byte packs in flight per thread; the other blocks
// of a 132-block grid run a dependent chain of local loads. Prints each GPU's push time and GB/s,
// and the readers' ns per dependent load.
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdint>
#include <thread>
#include <vector>

__device__ __forceinline__ unsigned long long gt() { unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }

template <int kBatch>
__global__ void __launch_bounds__(512, 1) k(uint4* dst, const uint4* src, size_t n16, int push_blocks,
                                              const uint32_t* chase, int chase_len, int steps,
                                              unsigned long long* out) {
  if (int(blockIdx.x) < push_blocks) {
    const unsigned long long t0 = gt();
    const size_t tid = blockIdx.x * size_t(512) + threadIdx.x;
    const size_t nthreads = size_t(push_blocks) * 512;
    for (size_t i = tid; i < n16; i += kBatch * nthreads) {
      uint4 v[kBatch];
#pragma unroll
      for (int q = 0; q < kBatch; ++q) if (i + q * nthreads < n16) v[q] = __ldcg(src + i + q * nthreads);
#pragma unroll
      for (int q = 0; q < kBatch; ++q) if (i + q * nthreads < n16)
        asm volatile("st.relaxed.sys.global.v4.u32 [%0], {%1,%2,%3,%4};" :: "l"(dst + i + q * nthreads), "r"(v[q].x), "r"(v[q].y), "r"(v[q].z), "r"(v[q].w) : "memory");
    }
    if (threadIdx.x == 0) atomicMax(out + 3, gt() - t0);
    return;
  }
  uint32_t p = (blockIdx.x * 977u + threadIdx.x * 131u) % chase_len;
  const unsigned long long t0 = gt();
  for (int s = 0; s < steps; ++s) p = __ldcg(chase + p);
  const unsigned long long t1 = gt();
  if (p == 0xffffffffu) out[0] = 1;
  atomicAdd(out + 1, t1 - t0);
  atomicAdd(out + 2, (unsigned long long)steps);
}

int main() {
  const size_t bytes = 128ull << 20, n16 = bytes / 16;
  const int chase_len = 64 << 20;
  std::vector<uint32_t> h(chase_len);
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < chase_len; ++i) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; h[i] = uint32_t(x % chase_len); }
  uint4 *buf[2], *src[2]; uint32_t* chase[2]; unsigned long long* out[2];
  for (int d = 0; d < 2; ++d) {
    cudaSetDevice(d); cudaDeviceEnablePeerAccess(1 - d, 0);
    cudaMalloc(&buf[d], bytes); cudaMalloc(&src[d], bytes); cudaMemset(src[d], 1, bytes);
    cudaMalloc(&chase[d], size_t(chase_len) * 4); cudaMemcpy(chase[d], h.data(), size_t(chase_len) * 4, cudaMemcpyHostToDevice);
    cudaMalloc(&out[d], 32);
  }
  for (int batch : {4, 16}) for (int pb : {132, 99, 66, 44}) for (int rep = 0; rep < 2; ++rep) {
    double push_us[2], ns[2];
    std::thread th[2];
    for (int d = 0; d < 2; ++d) th[d] = std::thread([&, d] {
      cudaSetDevice(d);
      cudaMemset(out[d], 0, 32); cudaDeviceSynchronize();
      if (batch == 4) k<4><<<132, 512>>>(buf[1 - d], src[d], n16, pb, chase[d], chase_len, 200, out[d]);
      else k<16><<<132, 512>>>(buf[1 - d], src[d], n16, pb, chase[d], chase_len, 200, out[d]);
      cudaDeviceSynchronize();
      unsigned long long o[4]; cudaMemcpy(o, out[d], 32, cudaMemcpyDeviceToHost);
      push_us[d] = o[3] / 1e3; ns[d] = o[2] ? double(o[1]) / double(o[2]) : 0;
    });
    for (auto& t : th) t.join();
    printf("batch %2d push blocks %3d: push %7.1f / %7.1f us (%.0f / %.0f GB/s), readers %6.1f / %6.1f ns per load\n", batch, pb,
           push_us[0], push_us[1], bytes / (push_us[0] * 1e3), bytes / (push_us[1] * 1e3), ns[0], ns[1]);
  }
  return 0;
}
