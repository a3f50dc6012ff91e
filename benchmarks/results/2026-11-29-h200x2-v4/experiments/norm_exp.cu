// Experiment (not part of the library): add-RMSNorm kernel variants, bitwise-compared with the
// current one (variant 0 == src/kernels/norm_epilogue.cuh as of fa348cc), timed in CUDA graphs.
#include <cub/block/block_reduce.cuh>
#include <cuda_bf16.h>
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cstring>
#include <type_traits>
#include "../src/kernels/vec.cuh"
using namespace arfusion::detail;
constexpr int kT = 512;
struct Args { const void* x; const void* rin; void* rout; const void* g; void* out; int64_t tokens, hidden; float eps; };

template <typename T, int VEC, bool kPacked, int kGamma, bool kLdcs, int kMaxV, bool kI32 = false>
struct Epi {
  using I = std::conditional_t<kI32, int, int64_t>;
  using P = Pack<T, VEC>;
  using BR = cub::BlockReduce<float, kT>;
  struct Shared { typename BR::TempStorage r; float scale; };
  __device__ static P ld(const T* p) {
    if constexpr (kLdcs) { uint4 raw = __ldcs(reinterpret_cast<const uint4*>(p)); P v; memcpy(&v, &raw, 16); return v; }
    else return loadPack<T, VEC>(p);
  }
  __device__ static float scaleOf(const Args& a, Shared& sh, float ss) {
    const float total = BR(sh.r).Sum(ss);
    if (threadIdx.x == 0) sh.scale = rsqrtf(total / static_cast<float>(a.hidden) + a.eps);
    __syncthreads();
    const float s = sh.scale;
    __syncthreads();
    return s;
  }
  __device__ static void run(const Args& a, int64_t row, Shared& sh) {
    const int64_t nvec = a.hidden / VEC, base = row * a.hidden;
    const T* x = static_cast<const T*>(a.x) + base;
    const T* rin = static_cast<const T*>(a.rin) + base;
    T* rout = static_cast<T*>(a.rout) + base;
    T* out = static_cast<T*>(a.out) + base;
    const T* gamma = static_cast<const T*>(a.g);
    P g[kMaxV];
    if constexpr (kGamma == 2) {
#pragma unroll
      for (int k = 0; k < kMaxV; ++k) { const I i = threadIdx.x + I(k) * kT; if (i < nvec) g[k] = loadPack<T, VEC>(gamma + i * VEC); }
    }
    float z[kPacked ? 1 : kMaxV][VEC];
    P ro[kPacked ? kMaxV : 1];
    float ss = 0.f;
#pragma unroll
    for (int k = 0; k < kMaxV; ++k) {
      const I i = threadIdx.x + I(k) * kT;
      if (i < nvec) {
        const P s = ld(x + i * VEC);
        const P r = ld(rin + i * VEC);
        P o;
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          o.v[e] = fromFloat<T>(toFloat(s.v[e]) + toFloat(r.v[e]));
          const float zz = toFloat(o.v[e]);
          if constexpr (!kPacked) z[k][e] = zz;
          ss += zz * zz;
        }
        if constexpr (kPacked) ro[k] = o;
        storePack<T, VEC>(rout + i * VEC, o);
      }
    }
    if constexpr (kGamma == 1) {
#pragma unroll
      for (int k = 0; k < kMaxV; ++k) { const I i = threadIdx.x + I(k) * kT; if (i < nvec) g[k] = loadPack<T, VEC>(gamma + i * VEC); }
    }
    const float scale = scaleOf(a, sh, ss);
#pragma unroll
    for (int k = 0; k < kMaxV; ++k) {
      const I i = threadIdx.x + I(k) * kT;
      if (i < nvec) {
        const P gg = kGamma == 0 ? loadPack<T, VEC>(gamma + i * VEC) : g[k];
        P o;
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          const float zz = kPacked ? toFloat(ro[k].v[e]) : z[k][e];
          o.v[e] = fromFloat<T>(zz * scale * toFloat(gg.v[e]));
        }
        storePack<T, VEC>(out + i * VEC, o);
      }
    }
  }
};

template <typename T, int VEC, bool kPacked, int kGamma, bool kLdcs, int kMin, int kVpt, bool kI32 = false>
__global__ void __launch_bounds__(kT, kMin) kern(Args a) {
  using E = Epi<T, VEC, kPacked, kGamma, kLdcs, kVpt, kI32>;
  __shared__ typename E::Shared sh;
  for (int64_t row = blockIdx.x; row < a.tokens; row += gridDim.x) E::run(a, row, sh);
}

struct Variant { const char* name; void (*k)(Args); int persistent; void (*k1)(Args) = nullptr; void (*k2)(Args) = nullptr; };
using B = __nv_bfloat16;
#define V(name, pk, g, cs, mn, pers) Variant{name, kern<B, 8, pk, g, cs, mn, 4>, pers}
#define VI(name, pk, g, cs, mn, pers) Variant{name, kern<B, 8, pk, g, cs, mn, 4, true>, pers, kern<B, 8, pk, g, cs, mn, 1, true>, kern<B, 8, pk, g, cs, mn, 2, true>}
#define VS(name, pk, g, cs, mn, pers) Variant{name, kern<B, 8, pk, g, cs, mn, 4>, pers, kern<B, 8, pk, g, cs, mn, 1>, kern<B, 8, pk, g, cs, mn, 2>}
std::vector<Variant> variants = {
  V("current", false, 0, false, 1, 0),
  VS("vpt", false, 0, false, 1, 0),
  VS("vpt+packed+gamma1+min2", true, 1, false, 2, 0),
  VS("vpt+min3", false, 0, false, 3, 0),
  VS("vpt+packed+min3", true, 0, false, 3, 0),
  VS("vpt+packed+gamma1+min3", true, 1, false, 3, 0),
  VI("i32+vpt", false, 0, false, 1, 0),
  VI("i32+vpt+packed+gamma1", true, 1, false, 1, 0),
  VI("i32+vpt+packed+gamma1+min2", true, 1, false, 2, 0),
  VI("i32+vpt+min3", false, 0, false, 3, 0),
  VI("i32+vpt+packed+min3", true, 0, false, 3, 0),
  VI("i32+vpt+packed+gamma1+min3", true, 1, false, 3, 0),
  VI("i32+vpt+packed+gamma2+min3", true, 2, false, 3, 0),
  VI("i32+vpt+packed+gamma1+min3+ldcs", true, 1, true, 3, 0),
  VI("i32+vpt+packed+gamma1+min4", true, 1, false, 4, 0),
};

__global__ void fill(B* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed; h ^= h >> 13; h *= 0x5bd1e995; h ^= h >> 15;
    p[i] = __float2bfloat16((float(h & 0xffff) / 65536.f - 0.5f) * 4.f);
  }
}
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e_), __LINE__); return 1; } } while (0)

int main() {
  int sms = 0; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaDeviceProp prop; cudaGetDeviceProperties(&prop, 0);
  printf("device %s, %d SMs\n", prop.name, sms);
  for (auto v0 : variants) for (int w = 0; w < 3; ++w) {
    Variant v = v0;
    if (w == 1) { if (!v.k1) continue; v.k = v.k1; }
    if (w == 2) { if (!v.k2) continue; v.k = v.k2; }
    cudaFuncAttributes fa; cudaFuncGetAttributes(&fa, v.k);
    int occ = 0; cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, v.k, kT, 0);
    printf("  %-34s vpt%d regs %3d spill %4zu B  blocks/SM %d\n", v.name, w == 0 ? 4 : w, fa.numRegs, fa.localSizeBytes, occ);
  }
  struct Shape { int64_t t, h; };
  const int kRot = 3;
  for (Shape s : {Shape{1, 4096}, Shape{128, 8192}, Shape{2048, 8192}, Shape{8192, 8192}, Shape{16384, 4096}}) {
    const size_t n = size_t(s.t) * s.h;
    const int rot = n * 2 < (64u << 20) ? kRot : 1;
    std::vector<B*> x(rot), rin(rot), rout(rot), out(rot);
    B* g;
    for (int r = 0; r < rot; ++r) {
      CK(cudaMalloc(&x[r], n * 2)); CK(cudaMalloc(&rin[r], n * 2)); CK(cudaMalloc(&rout[r], n * 2)); CK(cudaMalloc(&out[r], n * 2));
      fill<<<1024, 256>>>(x[r], n, 1 + r); fill<<<1024, 256>>>(rin[r], n, 100 + r);
    }
    CK(cudaMalloc(&g, s.h * 2)); fill<<<64, 256>>>(g, s.h, 7);
    std::vector<uint16_t> ref_ro(n), ref_o(n), got(n);
    cudaStream_t st; CK(cudaStreamCreate(&st));
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    printf("\nshape %lld x %lld bf16 (rotating %d buffer sets)\n", (long long)s.t, (long long)s.h, rot);
    for (size_t vi = 0; vi < variants.size(); ++vi) {
      Variant v = variants[vi];
      const int64_t vpt = (s.h / 8 + kT - 1) / kT;
      if (v.k1 && vpt == 1) v.k = v.k1; else if (v.k2 && vpt == 2) v.k = v.k2;
      int occ = 0; cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, v.k, kT, 0);
      const unsigned grid = v.persistent ? unsigned(std::min<int64_t>(s.t, int64_t(sms) * occ)) : unsigned(std::min<int64_t>(s.t, 65535));
      CK(cudaMemsetAsync(rout[0], 0xff, n * 2, st)); CK(cudaMemsetAsync(out[0], 0xff, n * 2, st));
      Args a0{x[0], rin[0], rout[0], g, out[0], s.t, s.h, 1e-5f};
      v.k<<<grid, kT, 0, st>>>(a0);
      CK(cudaStreamSynchronize(st));
      CK(cudaMemcpy(got.data(), rout[0], n * 2, cudaMemcpyDeviceToHost));
      bool same = true;
      if (vi == 0) ref_ro = got; else same &= got == ref_ro;
      CK(cudaMemcpy(got.data(), out[0], n * 2, cudaMemcpyDeviceToHost));
      if (vi == 0) ref_o = got; else same &= got == ref_o;
      const int kCalls = s.t >= 2048 ? 12 : 60;
      cudaGraph_t graph; cudaGraphExec_t ge;
      CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
      for (int c = 0; c < kCalls; ++c) {
        const int r = c % rot;
        Args a{x[r], rin[r], rout[r], g, out[r], s.t, s.h, 1e-5f};
        v.k<<<grid, kT, 0, st>>>(a);
      }
      CK(cudaStreamEndCapture(st, &graph));
      CK(cudaGraphInstantiate(&ge, graph, 0));
      CK(cudaGraphLaunch(ge, st)); CK(cudaGraphLaunch(ge, st));
      std::vector<float> us;
      for (int rep = 0; rep < 15; ++rep) {
        cudaEventRecord(e0, st); cudaGraphLaunch(ge, st); cudaEventRecord(e1, st); cudaEventSynchronize(e1);
        float ms; cudaEventElapsedTime(&ms, e0, e1); us.push_back(ms * 1000 / kCalls);
      }
      std::sort(us.begin(), us.end());
      const double bytes = 4.0 * n * 2;
      printf("  %-34s grid %6u  median %8.2f us  min %8.2f  (%5.0f GB/s)  %s\n", v.name, grid, us[7], us[0], bytes / (us[7] * 1e3),
             same ? "bitwise = current" : "DIFFERS FROM CURRENT");
      cudaGraphExecDestroy(ge); cudaGraphDestroy(graph);
    }
    for (int r = 0; r < rot; ++r) { cudaFree(x[r]); cudaFree(rin[r]); cudaFree(rout[r]); cudaFree(out[r]); }
    cudaFree(g); cudaStreamDestroy(st);
  }
  return 0;
}
