// exch.cu (session 25): would the 2 MB one-shot gain from a push whose rows cross in row order?
// Call 1 (push.cu) found that 128 blocks pushing 16 KB each share the link fairly: every block's
// bytes complete within ~1.5 us of the end of the whole 2 MB. So in the one-shot (block b pushes
// row b, the peer's block b polls it), every row arrives at about the same time, at the end, and
// all 128 epilogues run after the last byte. If instead every block pushes a 1/G slice of every
// row, rows in order (thread t's k-th store goes to queue place q = k * 512 + t, row q / (nv/G)),
// an SM's stores drain in row order and row r should complete near (r+1)/T of the push: the
// epilogues of early rows overlap the transfer of later ones. This is a stripped model of the
// Lamport one-shot (bf16, 2 GPUs, one row per block, 512 threads, KV packs per thread, PDL in a
// CUDA graph, all-ones = not arrived, the reader clears, slot = launch index % 2 baked into each
// captured launch), in two push layouts:
//   row      block b pushes row b (today's kernel, operands held)
//   ordered  every block pushes a slice of every row, in row order
// each with the norm (residual add, sum of squares, block reduction, norm_out) or without (plain
// sum into out). Prints us per call (64 launches per graph, median of 7 replays, max over GPUs)
// and checks residual_out / out of every row of the last call against a host computation.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); return 1; } } while (0)

constexpr int kThreads = 512;

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
__device__ __forceinline__ float bf(uint32_t w, int hi) {
  return __uint_as_float(hi ? (w & 0xffff0000u) : (w << 16));
}
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

struct Args {
  const uint4 *in, *res, *gamma;
  uint4 *res_out, *out;
  uint4* peer_slot;  // this launch's slot in the peer's buffer
  uint4* my_slot;    // this launch's slot here
  int* err;
  int nv;            // packs per row
};

// kOrdered: push layout; kNorm: residual + RMSNorm, else plain sum.
template <int KV, bool kOrdered, bool kNorm>
__global__ void __launch_bounds__(kThreads, 1) exch(Args a) {
  __shared__ float part[kThreads / 32];
  asm volatile("griddepcontrol.wait;" ::: "memory");
  const int b = blockIdx.x, t = threadIdx.x, G = gridDim.x, nv = a.nv;
  const uint4* in = a.in;
  uint4 mine[KV], r[KV], g[KV];
#pragma unroll
  for (int k = 0; k < KV; ++k) {
    const int i = b * nv + k * kThreads + t;
    mine[k] = in[i];
    if (kNorm) {
      r[k] = a.res[i];
      g[k] = a.gamma[k * kThreads + t];
    }
  }
  if (kOrdered) {
    const int slice = nv / G;  // packs of each row this block pushes
    uint4 v[KV];
    int p[KV];
#pragma unroll
    for (int k = 0; k < KV; ++k) {
      const int q = k * kThreads + t;
      p[k] = (q / slice) * nv + b * slice + q % slice;
      v[k] = in[p[k]];
    }
#pragma unroll
    for (int k = 0; k < KV; ++k) stSys(a.peer_slot + p[k], v[k]);
  } else {
#pragma unroll
    for (int k = 0; k < KV; ++k) stSys(a.peer_slot + b * nv + k * kThreads + t, mine[k]);
  }
  __syncthreads();
  float ss = 0.f;
  uint4 z[KV];
#pragma unroll
  for (int k = 0; k < KV; ++k) {
    const int i = b * nv + k * kThreads + t;
    uint4* slot = a.my_slot + i;
    uint4 v = ldSys(slot);
    for (long long n = 0; !arrived(v); ++n) {
      if (n > (1ll << 26)) { atomicExch(a.err, 1); break; }
      __nanosleep(32);
      v = ldSys(slot);
    }
    stSys(slot, make_uint4(~0u, ~0u, ~0u, ~0u));
    const uint4 s = add(mine[k], v);  // the sum (rank order does not matter for a timing model)
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
      for (int j = 0; j < 4; ++j)
        ow[j] = pack2(bf(zw[j], 0) * scale * bf(gw[j], 0), bf(zw[j], 1) * scale * bf(gw[j], 1));
      a.out[b * nv + k * kThreads + t] = o;
    }
  }
  __syncthreads();
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
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

using Kern = void (*)(Args);
static double med(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}
static float hbf(uint16_t h) { uint32_t w = uint32_t(h) << 16; float f; memcpy(&f, &w, 4); return f; }
static uint16_t hround(float f) {  // round to nearest even, finite inputs
  uint32_t w; memcpy(&w, &f, 4);
  return uint16_t((w + 0x7fffu + ((w >> 16) & 1u)) >> 16);
}

int main() {
  int ndev = 0;
  CK(cudaGetDeviceCount(&ndev));
  if (ndev < 2) { printf("needs 2 GPUs\n"); return 1; }
  const int maxT = 128, maxNv = 1024;
  const size_t msg = size_t(maxT) * maxNv;  // packs
  uint4 *in[2], *res[2], *gam[2], *ro[2], *out[2], *buf[2];
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
    CK(cudaMalloc(&buf[d], 2 * msg * 16));
    CK(cudaMalloc(&err[d], 4));
    CK(cudaMemset(err[d], 0, 4));
    CK(cudaMemset(buf[d], 0xff, 2 * msg * 16));
    fill<<<264, 512>>>(in[d], msg, 11 + d);
    fill<<<264, 512>>>(res[d], msg, 21 + d);
    fill<<<8, 128>>>(gam[d], maxNv, 31);
    CK(cudaStreamCreateWithFlags(&st[d], cudaStreamNonBlocking));
    CK(cudaDeviceSynchronize());
  }
  struct Sh { int T, H; } shapes[] = {{128, 8192}, {64, 8192}, {32, 8192}, {128, 4096}, {1, 8192}};
  printf("us per call (64 PDL launches per graph, median of 7 replays, max over the 2 GPUs); check = last call's rows against the host\n");
  printf("%5s %5s | %-10s %-10s | %-10s %-10s | check\n", "T", "H", "row+norm", "ord+norm", "row plain", "ord plain");
  for (const Sh& sh : shapes) {
    const int nv = sh.H / 8;
    if (nv % sh.T != 0 && sh.T > 1) continue;
    Kern ks[4];
    if (nv == 1024) { ks[0] = exch<2, false, true>; ks[1] = exch<2, true, true>; ks[2] = exch<2, false, false>; ks[3] = exch<2, true, false>; }
    else { ks[0] = exch<1, false, true>; ks[1] = exch<1, true, true>; ks[2] = exch<1, false, false>; ks[3] = exch<1, true, false>; }
    double us[4];
    bool ok = true;
    for (int vi = 0; vi < 4; ++vi) {
      if (sh.T == 1 && (vi & 1)) { us[vi] = 0; continue; }  // one block: the layouts are the same
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
          cudaLaunchAttribute at[1];
          at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
          at[0].val.programmaticStreamSerializationAllowed = 1;
          cfg.attrs = at;
          cfg.numAttrs = 1;
          Args a{in[d], res[d], gam[d], ro[d], out[d], buf[1 - d] + (i % 2) * msg, buf[d] + (i % 2) * msg, err[d], nv};
          CK(cudaLaunchKernelEx(&cfg, ks[vi], a));
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
      us[vi] = med(per);
      // Check the last call on GPU 0: every row, every element.
      const size_t n = size_t(sh.T) * nv * 8;
      std::vector<uint16_t> hin0(n), hin1(n), hres(n), hro(n), hout(n), hg(nv * 8);
      int herr[2] = {0, 0};
      for (int d = 0; d < 2; ++d) {
        CK(cudaSetDevice(d));
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(&herr[d], err[d], 4, cudaMemcpyDeviceToHost));
        CK(cudaGraphExecDestroy(ex[d]));
        CK(cudaEventDestroy(e0[d]));
        CK(cudaEventDestroy(e1[d]));
      }
      CK(cudaSetDevice(0));
      // The host copies: row r of a T-row message is at r * nv packs in every buffer.
      CK(cudaMemcpy(hin0.data(), in[0], n * 2, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(hin1.data(), in[1], n * 2, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(hres.data(), res[0], n * 2, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(hro.data(), ro[0], n * 2, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(hout.data(), out[0], n * 2, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(hg.data(), gam[0], nv * 16, cudaMemcpyDeviceToHost));
      size_t bad = 0;
      const bool norm = vi < 2;
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
        printf("  [T %d H %d variant %d: %zu bad elements, timeouts %d/%d]\n", sh.T, sh.H, vi, bad, herr[0], herr[1]);
      }
      for (int d = 0; d < 2; ++d) { CK(cudaSetDevice(d)); CK(cudaMemset(err[d], 0, 4)); }
    }
    printf("%5d %5d | %-10.2f %-10.2f | %-10.2f %-10.2f | %s\n", sh.T, sh.H, us[0], us[1], us[2], us[3], ok ? "ok" : "FAILED");
    fflush(stdout);
  }
  return 0;
}
