// exch4.cu (session 25, after call 5): exch3.cu plus one switch:
//   ONE    256 launch with 150 KB of dynamic shared memory, so that one block fits an SM, as with
//              the library's kernels (126 registers x 512 threads fill the register file). With
//              PDL, the next launch's blocks are placed at the trigger, while this launch's blocks
//              still run: a model block of 28-60 registers leaves room for one more on its SM.
// exch3.cu (session 25, after call 4): exch2.cu with three more switches, because none of exch2's
// five explained the gap (call 3: all five together cost the model 0.2-0.4 us):
//   LAYOUT  32 the library's Lamport layout: a region of 126,976 bytes per (block, slot), block-major
//              ([block][slot], 32 MiB over 132 blocks), rows after 128 header bytes; without it, one
//              contiguous 2 MB slot per launch parity
//   SLOTMAJ 64 with LAYOUT: the regions slot-major ([slot][block]) instead
//   EPI    128 the library's RowEpilogue::runHeld (src/kernels/norm_epilogue.cuh) for the norm
// The rest is exch2 (below).
// exch2.cu (session 25, after call 2): which part of the real Lamport one-shot costs the ~2 us that
// call 2's stripped model (exch.cu, "row" layout: 9.8 us at 128 x 8192 with the norm, 8.2 plain)
// does not pay (arfusion: 11.9 and 10.3)? The model again, with features of oneshot.cu / sync.cuh
// switched on one at a time (bits of F), then all together:
//   EPOCH  1  the slot from a per-block epoch counter in global memory (load after the
//             grid-dependency wait, e+1 stored after the trigger), instead of baked into the launch
//   HDR    2  the call header: thread 0 pushes 16 bytes after the rows, loads the peer's header
//             once its first pack arrived ("peek") and, after the trigger, waits for it if that
//             load saw nothing, compares it and clears it
//   POLL   4  the real poll: first load inline, then an out-of-line loop that spins 32, 64, ...
//             up to kMaxPause cycles (512 at two packs per thread, 32 at one) between loads
//   PARAM  8  a 320-byte kernel parameter block (DeviceComm + RowArgs are ~330 bytes)
//   GIVEUP 16 the shared give-up word, its initialisation and a __syncthreads after the wait
// Same method as exch.cu: us per call, 64 PDL launches per graph, median of 7 replays, max over
// the 2 GPUs; every row of the last call checked against a host computation.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "kernels/norm_epilogue.cuh"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); return 1; } } while (0)

constexpr int kThreads = 512;
enum { EPOCH = 1, HDR = 2, POLL = 4, PARAM = 8, GIVEUP = 16, LAYOUT = 32, SLOTMAJ = 64, EPI = 128, ONE = 256 };
constexpr long long kRegionPacks = 126976 / 16, kRegions = 132;

__device__ __forceinline__ void stSys(uint4* p, uint4 v) {
  asm volatile("st.relaxed.sys.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
__device__ __forceinline__ uint4 ldSys(const uint4* p) {
  uint4 v;
  asm volatile("ld.relaxed.sys.global.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ bool arrived(uint4 v) {
  return v.x != 0xffffffffu && v.y != 0xffffffffu && v.z != 0xffffffffu && v.w != 0xffffffffu;
}
__device__ __forceinline__ float bf(uint32_t w, int hi) { return __uint_as_float(hi ? (w & 0xffff0000u) : (w << 16)); }
__device__ __forceinline__ uint32_t pack2(float a, float b) {
  const __nv_bfloat16 x = __float2bfloat16_rn(a), y = __float2bfloat16_rn(b);
  uint16_t ux, uy;
  memcpy(&ux, &x, 2);
  memcpy(&uy, &y, 2);
  return uint32_t(ux) | (uint32_t(uy) << 16);
}
__device__ __forceinline__ uint4 add(uint4 a, uint4 b) {
  const uint32_t* x = &a.x;
  const uint32_t* y = &b.x;
  uint4 r;
  uint32_t* o = &r.x;
#pragma unroll
  for (int j = 0; j < 4; ++j) o[j] = pack2(bf(x[j], 0) + bf(y[j], 0), bf(x[j], 1) + bf(y[j], 1));
  return r;
}
__device__ __forceinline__ void spinCycles(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}
template <int kMaxPause>
__device__ __noinline__ uint4 waitSlow(const uint4* p, int* err) {
  uint4 v;
  long long backoff = 32;
  for (unsigned polls = 1;; ++polls) {
    spinCycles(backoff);
    if (backoff < kMaxPause) backoff *= 2;
    v = ldSys(p);
    if (arrived(v)) break;
    if (polls > (1u << 24)) { atomicExch(err, 1); break; }
  }
  return v;
}
template <int F, int kMaxPause>
__device__ __forceinline__ uint4 waitPack(const uint4* p, int* err) {
  uint4 v = ldSys(p);
  if (F & POLL) return arrived(v) ? v : waitSlow<kMaxPause>(p, err);
  for (long long n = 0; !arrived(v); ++n) {
    if (n > (1ll << 26)) { atomicExch(err, 1); break; }
    __nanosleep(32);
    v = ldSys(p);
  }
  return v;
}

struct Args {
  const uint4 *in, *res, *gamma;
  uint4 *res_out, *out;
  uint4* peer_buf;  // the peer's two slots (slot stride `msg` packs)
  uint4* my_buf;
  uint4* peer_hdr;  // the peer's headers [2][blocks]
  uint4* my_hdr;
  unsigned* epochs; // per block
  int* err;
  long long msg;
  int nv;           // packs per row
  int launch;       // index in the graph (the slot without EPOCH)
};
struct BigArgs {
  Args a;
  char pad[320 - sizeof(Args)];
};

template <int KV, bool kNorm, int F>
__global__ void __launch_bounds__(kThreads, 1) exch(BigArgs big) {
  const Args& a = big.a;
  constexpr int kMaxPause = KV == 1 ? 32 : 512;
  __shared__ float part[kThreads / 32];
  __shared__ int give_up;
  if ((F & GIVEUP) && threadIdx.x == 0) give_up = 0;
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (F & GIVEUP) __syncthreads();
  const int b = blockIdx.x, t = threadIdx.x, nv = a.nv;
  unsigned e = a.launch;
  if (F & EPOCH) e = a.epochs[b] + 1;
  const int slot = e % 2;
  // Row b of this launch's slot: base + b * nv (contiguous), or its own region (LAYOUT).
  long long off = slot * a.msg, rowoff = (long long)b * nv;
  if (F & LAYOUT) {
    off = ((F & SLOTMAJ) ? (slot * kRegions + b) : (b * 2 + slot)) * kRegionPacks + 8;
    rowoff = 0;
  }
  uint4* peer_slot = a.peer_buf + off - (long long)b * nv + rowoff;  // so that peer_slot + b * nv is row b
  uint4* my_slot = a.my_buf + off - (long long)b * nv + rowoff;
  uint4 mine[KV], r[KV], g[KV];
#pragma unroll
  for (int k = 0; k < KV; ++k) {
    const int i = b * nv + k * kThreads + t;
    mine[k] = a.in[i];
    if (kNorm) {
      r[k] = a.res[i];
      g[k] = a.gamma[k * kThreads + t];
    }
  }
#pragma unroll
  for (int k = 0; k < KV; ++k) stSys(peer_slot + b * nv + k * kThreads + t, mine[k]);
  const uint4 want = make_uint4(0x1234u, e & 0x7fffffffu, 0u, 0u);
  uint4* my_hdr = a.my_hdr + slot * gridDim.x + b;
  if ((F & HDR) && t == 0) stSys(a.peer_hdr + slot * gridDim.x + b, want);
  __syncthreads();
  uint4 head = make_uint4(~0u, ~0u, ~0u, ~0u);
  if constexpr (kNorm && (F & EPI)) {
    using T = __nv_bfloat16;
    using P = arfusion::detail::Pack<T, 8>;
    using Epi = arfusion::detail::RowEpilogue<T, 8, KV, true>;
    __shared__ typename Epi::Shared esh;
    arfusion::detail::RowArgs ra;
    ra.residual_out = a.res_out;
    ra.out = a.out;
    ra.residual_in = a.res;
    ra.gamma = a.gamma;
    ra.hidden = nv * 8;
    ra.tokens = gridDim.x;
    ra.eps = 1e-6f;
    ra.op = arfusion::Op::kAllReduceAddRMSNorm;
    P hres[KV], hgam[KV];
    memcpy(hres, r, sizeof hres);
    memcpy(hgam, g, sizeof hgam);
    Epi::template runHeld<false>(ra, b, esh, hres, hgam, [&](int k, int64_t) {
      const int i = b * nv + k * kThreads + t;
      uint4* p = my_slot + i;
      const uint4 v = waitPack<F, kMaxPause>(p, a.err);
      stSys(p, make_uint4(~0u, ~0u, ~0u, ~0u));
      if ((F & HDR) && t == 0 && k == 0) head = ldSys(my_hdr);
      const uint4 sv = add(mine[k], v);
      P out;
      memcpy(&out, &sv, 16);
      return out;
    });
  } else {
  float ss = 0.f;
  uint4 z[KV];
#pragma unroll
  for (int k = 0; k < KV; ++k) {
    const int i = b * nv + k * kThreads + t;
    uint4* p = my_slot + i;
    const uint4 v = waitPack<F, kMaxPause>(p, a.err);
    stSys(p, make_uint4(~0u, ~0u, ~0u, ~0u));
    if ((F & HDR) && t == 0 && k == 0) head = ldSys(my_hdr);
    const uint4 s = add(mine[k], v);
    if (kNorm) {
      z[k] = add(s, r[k]);
      a.res_out[i] = z[k];
      const uint32_t* w = &z[k].x;
#pragma unroll
      for (int j = 0; j < 4; ++j) ss += bf(w[j], 0) * bf(w[j], 0) + bf(w[j], 1) * bf(w[j], 1);
    } else {
      a.out[i] = s;
    }
  }
  if (kNorm) {
#pragma unroll
    for (int o = 16; o; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (t % 32 == 0) part[t / 32] = ss;
    __syncthreads();
    float tot = 0.f;
#pragma unroll
    for (int w = 0; w < kThreads / 32; ++w) tot += part[w];
    const float scale = rsqrtf(tot / float(nv * 8) + 1e-6f);
#pragma unroll
    for (int k = 0; k < KV; ++k) {
      const uint32_t* zw = &z[k].x;
      const uint32_t* gw = &g[k].x;
      uint4 o;
      uint32_t* ow = &o.x;
#pragma unroll
      for (int j = 0; j < 4; ++j) ow[j] = pack2(bf(zw[j], 0) * scale * bf(gw[j], 0), bf(zw[j], 1) * scale * bf(gw[j], 1));
      a.out[b * nv + k * kThreads + t] = o;
    }
  }
  }
  __syncthreads();
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if ((F & HDR) && t == 0) {
    if (!arrived(head)) head = waitPack<F, kMaxPause>(my_hdr, a.err);
    if (head.x != want.x || head.y != want.y) atomicExch(a.err, 2);
    stSys(my_hdr, make_uint4(~0u, ~0u, ~0u, ~0u));
  }
  if ((F & EPOCH) && t == 0) a.epochs[b] = e;
}

__global__ void fill(uint4* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t w[4];
    for (int j = 0; j < 4; ++j) {
      uint32_t h = uint32_t(i * 4 + j) * 2654435761u ^ seed;
      h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
      const float a = (float((h & 0xffff)) / 65535.f) * 2.f - 1.f, c = (float(h >> 16) / 65535.f) * 2.f - 1.f;
      w[j] = pack2(a, c);
    }
    p[i] = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

using Kern = void (*)(BigArgs);
template <int KV, bool N>
struct Set {
  static constexpr int kAll = EPOCH | HDR | POLL | PARAM | GIVEUP;
  static constexpr int kReal = EPOCH | HDR | POLL | PARAM | GIVEUP | LAYOUT | EPI;
  static constexpr Kern k[4] = {exch<KV, N, 0>, exch<KV, N, ONE>, exch<KV, N, kReal>, exch<KV, N, kReal | ONE>};
};
static const char* kNames[4] = {"model", "model+one", "all", "all+one"};
static const int kFlags[4] = {0, ONE, 0, ONE};

static double med(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}
static float hbf(uint16_t h) { uint32_t w = uint32_t(h) << 16; float f; memcpy(&f, &w, 4); return f; }
static uint16_t hround(float f) {
  uint32_t w; memcpy(&w, &f, 4);
  return uint16_t((w + 0x7fffu + ((w >> 16) & 1u)) >> 16);
}

int main() {
  int ndev = 0;
  CK(cudaGetDeviceCount(&ndev));
  if (ndev < 2) { printf("needs 2 GPUs\n"); return 1; }
  const int maxT = 128, maxNv = 1024;
  const long long msg = (long long)maxT * maxNv;
  uint4 *in[2], *res[2], *gam[2], *ro[2], *out[2], *buf[2], *hdr[2];
  unsigned* ep[2];
  int* err[2];
  cudaStream_t st[2];
  for (int d = 0; d < 2; ++d) {
    CK(cudaSetDevice(d));
    CK(cudaDeviceEnablePeerAccess(1 - d, 0));
    CK(cudaMalloc(&in[d], msg * 16));
    CK(cudaMalloc(&res[d], msg * 16));
    CK(cudaMalloc(&gam[d], maxNv * 16));
    CK(cudaMalloc(&ro[d], msg * 16));
    CK(cudaMalloc(&out[d], msg * 16));
    const size_t bufBytes = std::max<size_t>(2 * msg * 16, size_t(kRegions) * 2 * kRegionPacks * 16);
    CK(cudaMalloc(&buf[d], bufBytes));
    CK(cudaMalloc(&hdr[d], 2 * 256 * 16));
    CK(cudaMalloc(&ep[d], 256 * 4));
    CK(cudaMalloc(&err[d], 4));
    CK(cudaMemset(err[d], 0, 4));
    CK(cudaMemset(ep[d], 0, 256 * 4));
    CK(cudaMemset(buf[d], 0xff, bufBytes));
    CK(cudaMemset(hdr[d], 0xff, 2 * 256 * 16));
    fill<<<264, 512>>>(in[d], msg, 11 + d);
    fill<<<264, 512>>>(res[d], msg, 21 + d);
    fill<<<8, 128>>>(gam[d], maxNv, 31);
    CK(cudaStreamCreateWithFlags(&st[d], cudaStreamNonBlocking));
    CK(cudaDeviceSynchronize());
  }
  struct Sh { int T, H; } shapes[] = {{128, 8192}, {32, 8192}, {1, 8192}, {128, 4096}, {1, 4096}};
  printf("us per call (64 PDL launches per graph, median of 7 replays, max over the 2 GPUs); norm / plain\n");
  printf("%5s %5s |", "T", "H");
  for (const char* n : kNames) printf(" %-13s", n);
  printf("| check\n");
  for (const Sh& sh : shapes) {
    const int nv = sh.H / 8;
    printf("%5d %5d |", sh.T, sh.H);
    bool ok = true;
    for (int vi = 0; vi < 4; ++vi) {
      double us[2];
      for (int norm = 1; norm >= 0; --norm) {
        const Kern kern = nv == 1024 ? (norm ? Set<2, true>::k[vi] : Set<2, false>::k[vi]) : (norm ? Set<1, true>::k[vi] : Set<1, false>::k[vi]);
        cudaGraphExec_t ex[2];
        for (int d = 0; d < 2; ++d) {
          CK(cudaSetDevice(d));
          cudaGraph_t g;
          CK(cudaStreamBeginCapture(st[d], cudaStreamCaptureModeThreadLocal));
          for (int i = 0; i < 64; ++i) {
            cudaLaunchConfig_t cfg = {};
            cfg.gridDim = dim3(sh.T);
            cfg.blockDim = dim3(kThreads);
            cfg.stream = st[d];
            if (kFlags[vi] & ONE) {
              cfg.dynamicSmemBytes = 150 * 1024;
              CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, 150 * 1024));
            }
            cudaLaunchAttribute at[1];
            at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
            at[0].val.programmaticStreamSerializationAllowed = 1;
            cfg.attrs = at;
            cfg.numAttrs = 1;
            BigArgs big = {};
            big.a = Args{in[d], res[d], gam[d], ro[d], out[d], buf[1 - d], buf[d], hdr[1 - d], hdr[d], ep[d], err[d], msg, nv, i};
            CK(cudaLaunchKernelEx(&cfg, kern, big));
          }
          CK(cudaStreamEndCapture(st[d], &g));
          CK(cudaGraphInstantiate(&ex[d], g, 0));
          CK(cudaGraphDestroy(g));
        }
        cudaEvent_t e0[2], e1[2];
        for (int d = 0; d < 2; ++d) { CK(cudaSetDevice(d)); CK(cudaEventCreate(&e0[d])); CK(cudaEventCreate(&e1[d])); }
        std::vector<double> per;
        for (int rep = -2; rep < 7; ++rep) {
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
        us[norm] = med(per);
        int herr[2] = {0, 0};
        for (int d = 0; d < 2; ++d) {
          CK(cudaSetDevice(d));
          CK(cudaDeviceSynchronize());
          CK(cudaMemcpy(&herr[d], err[d], 4, cudaMemcpyDeviceToHost));
          CK(cudaMemset(err[d], 0, 4));
          CK(cudaGraphExecDestroy(ex[d]));
          CK(cudaEventDestroy(e0[d]));
          CK(cudaEventDestroy(e1[d]));
        }
        // Every row of the last call on GPU 0.
        const size_t n = size_t(sh.T) * nv * 8;
        std::vector<uint16_t> hin0(n), hin1(n), hres(n), hro(n), hout(n), hg(nv * 8);
        CK(cudaSetDevice(0));
        CK(cudaMemcpy(hin0.data(), in[0], n * 2, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(hin1.data(), in[1], n * 2, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(hres.data(), res[0], n * 2, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(hro.data(), ro[0], n * 2, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(hout.data(), out[0], n * 2, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(hg.data(), gam[0], nv * 16, cudaMemcpyDeviceToHost));
        size_t bad = 0;
        for (int row = 0; row < sh.T; ++row) {
          double sum2 = 0;
          std::vector<float> z(nv * 8);
          for (int e = 0; e < nv * 8; ++e) {
            const size_t i = size_t(row) * nv * 8 + e;
            const float s = hbf(hround(hbf(hin0[i]) + hbf(hin1[i])));
            if (!norm) { if (hout[i] != hround(s)) ++bad; continue; }
            z[e] = hbf(hround(s + hbf(hres[i])));
            if (hro[i] != hround(z[e])) ++bad;
            sum2 += double(z[e]) * z[e];
          }
          if (!norm) continue;
          const double scale = 1.0 / std::sqrt(sum2 / (nv * 8) + 1e-6);
          for (int e = 0; e < nv * 8; ++e) {
            const double want = z[e] * scale * hbf(hg[e]);
            const double got = hbf(hout[size_t(row) * nv * 8 + e]);
            if (std::fabs(got - want) > 1e-2 * std::fabs(want) + 1e-2) ++bad;
          }
        }
        if (bad || herr[0] || herr[1]) {
          ok = false;
          fprintf(stderr, "[T %d H %d %s norm %d: %zu bad, errors %d/%d]\n", sh.T, sh.H, kNames[vi], norm, bad, herr[0], herr[1]);
        }
      }
      printf(" %5.2f / %5.2f", us[1], us[0]);
      fflush(stdout);
    }
    printf(" | %s\n", ok ? "ok" : "FAILED");
  }
  return 0;
}
