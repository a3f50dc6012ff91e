// Does a block's back-pressured NVLink push slow the other warps' local loads on the same SM?
// GPU 0, 132 blocks x 512 threads. Warps [0, P) push 16-byte stores (st.relaxed.sys.v4) to a
// target: the peer GPU's memory, or local memory, or nothing. Warps [P, 16) run a dependent chain
// of 16-byte local loads (ld.global.cg, each address from the previous value) and time it with
// %globaltimer. Prints per config: push time, readers' mean ns per dependent load.
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdint>
#include <vector>

__device__ __forceinline__ unsigned long long gt() { unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }

__global__ void __launch_bounds__(512, 1) k(uint4* dst, const uint4* src, size_t n16, int push_warps,
                                              const uint32_t* chase, int chase_len, int steps,
                                              unsigned long long* out_ns, unsigned long long* out_push, int tma, int chunk, int split) {
  int warp = threadIdx.x / 32;
  if (split > 0) {  // push blocks [0, split) with every warp, read blocks [split, grid) with every warp
    if (blockIdx.x < split) {
      if (dst == nullptr) return;
      const unsigned long long t0 = gt();
      const size_t tid = blockIdx.x * size_t(512) + threadIdx.x;
      const size_t nthreads = size_t(split) * 512;
      for (size_t i = tid; i < n16; i += 4 * nthreads) {
        uint4 v[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) if (i + q * nthreads < n16) v[q] = __ldcg(src + i + q * nthreads);
#pragma unroll
        for (int q = 0; q < 4; ++q) if (i + q * nthreads < n16)
          asm volatile("st.relaxed.sys.global.v4.u32 [%0], {%1,%2,%3,%4};" :: "l"(dst + i + q * nthreads), "r"(v[q].x), "r"(v[q].y), "r"(v[q].z), "r"(v[q].w) : "memory");
      }
      if (threadIdx.x == 0) atomicMax(out_push, gt() - t0);
      return;
    }
    warp = 16;  // all readers
  }
  __shared__ __align__(128) uint4 buf[2048];  // 32 KB
  if (tma) {
    for (int i = threadIdx.x; i < 2048; i += blockDim.x) buf[i] = make_uint4(i, 1, 2, 3);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (warp < push_warps) {
      if (threadIdx.x == 0 && dst != nullptr) {
        const unsigned long long t0 = gt();
        const size_t per_block = (n16 * 16) / gridDim.x;
        char* base = reinterpret_cast<char*>(dst) + per_block * blockIdx.x;
        const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(buf));
        for (size_t off = 0; off + chunk <= per_block; off += chunk) {
          asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" :: "l"(base + off), "r"(s), "r"(chunk) : "memory");
          asm volatile("cp.async.bulk.commit_group;" ::: "memory");
          asm volatile("cp.async.bulk.wait_group.read 4;" ::: "memory");
        }
        asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
        atomicMax(out_push, gt() - t0);
      }
      return;
    }
  }
  if (!tma && warp < push_warps) {
    if (dst == nullptr) return;
    const unsigned long long t0 = gt();
    const size_t tid = blockIdx.x * size_t(push_warps * 32) + threadIdx.x;
    const size_t nthreads = size_t(gridDim.x) * push_warps * 32;
    for (size_t i = tid; i < n16; i += 4 * nthreads) {
      uint4 v[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) if (i + q * nthreads < n16) v[q] = __ldcg(src + i + q * nthreads);
#pragma unroll
      for (int q = 0; q < 4; ++q) if (i + q * nthreads < n16)
        asm volatile("st.relaxed.sys.global.v4.u32 [%0], {%1,%2,%3,%4};" :: "l"(dst + i + q * nthreads), "r"(v[q].x), "r"(v[q].y), "r"(v[q].z), "r"(v[q].w) : "memory");
    }
    if (threadIdx.x == 0) atomicMax(out_push, gt() - t0);
    return;
  }
  // readers: dependent chain of loads
  uint32_t p = (blockIdx.x * 977u + threadIdx.x * 131u) % chase_len;
  const unsigned long long t0 = gt();
  for (int s = 0; s < steps; ++s) p = __ldcg(chase + p);
  const unsigned long long t1 = gt();
  if (p == 0xffffffffu) out_ns[0] = 1;  // keep the chain
  atomicAdd(out_ns + 1, t1 - t0);
  atomicAdd(out_ns + 2, (unsigned long long)steps);
}

int main() {
  int n = 0; cudaGetDeviceCount(&n);
  if (n < 2) { printf("needs 2 GPUs\n"); return 1; }
  const size_t bytes = 128ull << 20, n16 = bytes / 16;
  uint4 *peer = nullptr, *local_dst = nullptr, *src = nullptr;
  cudaSetDevice(1); cudaMalloc(&peer, bytes);
  cudaSetDevice(0); cudaDeviceEnablePeerAccess(1, 0);
  cudaMalloc(&local_dst, bytes); cudaMalloc(&src, bytes); cudaMemset(src, 1, bytes);
  const int chase_len = 64 << 20;  // 256 MB of uint32: misses L2
  std::vector<uint32_t> h(chase_len);
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < chase_len; ++i) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; h[i] = uint32_t(x % chase_len); }
  uint32_t* chase; cudaMalloc(&chase, size_t(chase_len) * 4); cudaMemcpy(chase, h.data(), size_t(chase_len) * 4, cudaMemcpyHostToDevice);
  unsigned long long *out, *outp; cudaMalloc(&out, 24); cudaMalloc(&outp, 8);
  struct C { const char* name; uint4* dst; int pw; int steps; int tma; int chunk; int split = 0; };
  std::vector<C> cs;
  for (C c : {C{"split no push", nullptr, 0, 200, 0, 0, 66}, C{"split local", local_dst, 0, 200, 0, 0, 66}, C{"split peer", peer, 0, 200, 0, 0, 66}}) cs.push_back(c);
  for (int pw : {8}) for (C c : {C{"no push", nullptr, pw, 200, 0, 0}, C{"push to local", local_dst, pw, 200, 0, 0}, C{"push to peer", peer, pw, 200, 0, 0}}) cs.push_back(c);
  for (int chunk : {16384}) for (C c : {C{"tma to local", local_dst, 1, 200, 1, chunk}, C{"tma to peer", peer, 1, 200, 1, chunk}}) cs.push_back(c);
  {
    for (C c : cs) {
      for (int rep = 0; rep < 3; ++rep) {
        cudaMemset(out, 0, 24); cudaMemset(outp, 0, 8);
        cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
        cudaEventRecord(a);
        k<<<132, 512>>>(c.dst, src, n16, c.pw, chase, chase_len, c.steps, out, outp, c.tma, c.chunk, c.split);
        cudaEventRecord(b); cudaEventSynchronize(b);
        float ms; cudaEventElapsedTime(&ms, a, b);
        unsigned long long o[3], op; cudaMemcpy(o, out, 24, cudaMemcpyDeviceToHost); cudaMemcpy(&op, outp, 8, cudaMemcpyDeviceToHost);
        printf("chunk %5d push warps %d  %-14s kernel %8.1f us  push %8.1f us (%.0f GB/s)  readers %6.1f ns per dependent load%s\n", c.chunk, c.pw, c.name, ms * 1e3,
               op / 1e3, op ? double(c.tma ? (bytes / 132 / c.chunk) * c.chunk * 132 : bytes) / (op * 1e-9) / 1e9 : 0.0, double(o[1]) / double(o[2]), cudaGetLastError() ? " ERROR" : "");
      }
    }
  }
  // Readers' chain length chosen so it lasts about as long as the push; check: readers-only time.
  return 0;
}
