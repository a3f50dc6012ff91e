// lap.cu (session 21): does a load issued right after the same thread's NVLink stores wait for
// them to drain, and does the load's PTX form matter?
// Both GPUs at once, B blocks x 512 threads each. Every thread stores K 16-byte packs into the peer
// GPU's memory (st.relaxed.sys.v4, or weak st.global.v4 with ST=1), then runs a chain of S dependent
// 16-byte loads of its own L2-resident local data (each address from the previous value) in one of
// the load forms below. clock64 per warp (lane 0) after the stores and after each load. Prints per
// (B, K, form, ST): median over 15 runs of the median over warps of: stores issued, "load1",
// "loads2-8", in ns (SM clock from the device). Reading the results (session 21): the dependent
// mov does not make the clock read wait (ptxas folds it), so "load1" is only the first load's
// issue; each later load waits for the previous one's address, so "loads2-8" = (t8 - t1) / 7 is
// the latency of one dependent load, the number that matters. "load1max": the slowest warp's load1.
// Forms: 0 ld.global (what loadPack emits), 1 .cg, 2 .nc, 3 ld.relaxed.gpu, 4 ld.relaxed.sys (the
// Lamport polls' form), 5 ld.volatile, 6 .cv, 7 .L1::no_allocate, 8 .nc.L1::no_allocate.
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <vector>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); return 1; } } while (0)
#define LDV4(q) asm volatile(q " {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory")

template <int LT>
__device__ __forceinline__ uint4 ld(const uint4* p) {
  uint4 v;
  if constexpr (LT == 0) LDV4("ld.global.v4.u32");
  else if constexpr (LT == 1) LDV4("ld.global.cg.v4.u32");
  else if constexpr (LT == 2) LDV4("ld.global.nc.v4.u32");
  else if constexpr (LT == 3) LDV4("ld.relaxed.gpu.global.v4.u32");
  else if constexpr (LT == 4) LDV4("ld.relaxed.sys.global.v4.u32");
  else if constexpr (LT == 5) LDV4("ld.volatile.global.v4.u32");
  else if constexpr (LT == 6) LDV4("ld.global.cv.v4.u32");
  else if constexpr (LT == 7) LDV4("ld.global.L1::no_allocate.v4.u32");
  else LDV4("ld.global.nc.L1::no_allocate.v4.u32");
  return v;
}
__device__ __forceinline__ long long clk() { long long t; asm volatile("mov.u64 %0, %%clock64;" : "=l"(t)); return t; }

constexpr int kS = 8;  // loads per chain
template <int LT, int ST>
__global__ void __launch_bounds__(512, 1) probe(uint4* peer, const uint4* chase, int K, long long* out) {
  const int gtid = blockIdx.x * 512 + threadIdx.x, nth = gridDim.x * 512;
  const uint4 val = make_uint4(gtid, 1, 2, 3);
  __syncthreads();
  const long long t0 = clk();
  for (int q = 0; q < K; ++q) {
    uint4* d = peer + size_t(q) * nth + gtid;
    if (ST == 0)
      asm volatile("st.relaxed.sys.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(d), "r"(val.x), "r"(val.y), "r"(val.z), "r"(val.w) : "memory");
    else
      asm volatile("st.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(d), "r"(val.x), "r"(val.y), "r"(val.z), "r"(val.w) : "memory");
  }
  long long t[kS + 1];
  t[0] = clk();
  uint32_t idx = gtid;
#pragma unroll
  for (int s = 0; s < kS; ++s) {
    const uint4 v = ld<LT>(chase + idx);
    uint32_t dep;
    asm volatile("mov.b32 %0, %1;" : "=r"(dep) : "r"(v.x));
    t[s + 1] = clk();
    idx = dep;
  }
  if ((threadIdx.x & 31) == 0) {
    long long* o = out + (size_t(blockIdx.x) * 16 + threadIdx.x / 32) * (kS + 1);
    for (int s = 0; s <= kS; ++s) o[s] = t[s] - t0;
  }
  if (idx == 0xffffffffu) out[0] = 0;  // keeps the chain
}

__global__ void initChase(uint4* chase, int nth) {
  const size_t n = size_t(kS + 1) * nth;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    chase[i] = make_uint4(uint32_t(i + nth), 7, 8, 9);
}

using Kern = void (*)(uint4*, const uint4*, int, long long*);
template <int LT, int ST> Kern pick() { return probe<LT, ST>; }

static double med(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int main() {
  int ndev = 0;
  CK(cudaGetDeviceCount(&ndev));
  if (ndev < 2) { printf("needs 2 GPUs\n"); return 1; }
  int clock_khz = 0;
  CK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  const double ns_per_clk = 1e6 / clock_khz;
  const int maxB = 132, maxK = 16, nthMax = maxB * 512;
  uint4 *peerbuf[2], *chase[2];
  long long* out[2];
  for (int d = 0; d < 2; ++d) {
    CK(cudaSetDevice(d));
    CK(cudaDeviceEnablePeerAccess(1 - d, 0));
    CK(cudaMalloc(&peerbuf[d], size_t(maxK) * nthMax * 16));
    CK(cudaMalloc(&chase[d], size_t(kS + 1) * nthMax * 16));
    CK(cudaMalloc(&out[d], size_t(maxB) * 16 * (kS + 1) * 8));
  }
  Kern ks[2][9] = {{pick<0, 0>(), pick<1, 0>(), pick<2, 0>(), pick<3, 0>(), pick<4, 0>(), pick<5, 0>(), pick<6, 0>(), pick<7, 0>(), pick<8, 0>()},
                   {pick<0, 1>(), pick<1, 1>(), pick<2, 1>(), pick<3, 1>(), pick<4, 1>(), pick<5, 1>(), pick<6, 1>(), pick<7, 1>(), pick<8, 1>()}};
  const char* names[9] = {"ld.global", "ld.cg", "ld.nc", "ld.relaxed.gpu", "ld.relaxed.sys", "ld.volatile", "ld.cv", "ld.L1::no_alloc", "ld.nc.L1::no_alloc"};
  struct Sc { int B, K; } scs[] = {{1, 0}, {1, 1}, {1, 2}, {4, 1}, {128, 0}, {128, 2}, {132, 8}, {132, 16}};
  printf("SM clock %d kHz; ns: median over 15 runs of the median over warps (lane 0)\n", clock_khz);
  printf("%-5s %-3s %-3s %-20s %9s %9s %9s %9s\n", "B", "K", "ST", "form", "stores", "load1", "loads2-8", "load1max");
  std::vector<long long> h(size_t(maxB) * 16 * (kS + 1));
  for (const Sc& sc : scs) {
    for (int st = 0; st < 2; ++st) {
      for (int lt = 0; lt < 9; ++lt) {
        if (st == 1 && lt != 0 && lt != 4) continue;
        if (sc.K == 0 && st == 1) continue;
        const int nth = sc.B * 512;
        std::vector<double> a, b, c, m;
        for (int rep = 0; rep < 17; ++rep) {
          for (int d = 0; d < 2; ++d) {
            CK(cudaSetDevice(d));
            initChase<<<132, 512>>>(chase[d], nth);
          }
          for (int d = 0; d < 2; ++d) { CK(cudaSetDevice(d)); CK(cudaDeviceSynchronize()); }
          for (int d = 0; d < 2; ++d) {
            CK(cudaSetDevice(d));
            ks[st][lt]<<<sc.B, 512>>>(peerbuf[1 - d], chase[d], sc.K, out[d]);
          }
          for (int d = 0; d < 2; ++d) { CK(cudaSetDevice(d)); CK(cudaDeviceSynchronize()); }
          if (rep < 2) continue;
          CK(cudaSetDevice(0));
          CK(cudaMemcpy(h.data(), out[0], size_t(sc.B) * 16 * (kS + 1) * 8, cudaMemcpyDeviceToHost));
          std::vector<double> s0, l1, l2;
          for (int w = 0; w < sc.B * 16; ++w) {
            const long long* o = &h[size_t(w) * (kS + 1)];
            s0.push_back(o[0] * ns_per_clk);
            l1.push_back((o[1] - o[0]) * ns_per_clk);
            l2.push_back((o[kS] - o[1]) * ns_per_clk / (kS - 1));
          }
          a.push_back(med(s0)); b.push_back(med(l1)); c.push_back(med(l2));
          m.push_back(*std::max_element(l1.begin(), l1.end()));
        }
        printf("%-5d %-3d %-3s %-20s %9.0f %9.0f %9.0f %9.0f\n", sc.B, sc.K, st ? "weak" : "sys", names[lt], med(a), med(b), med(c), med(m));
      }
    }
  }
  return 0;
}
