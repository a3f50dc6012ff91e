// Can link-bound peer pushes and HBM-bound local work overlap? Both GPUs at once.
// push: src -> peer dst (16 B stores); epi: r1 = a + b, r2 = a - b (read 2, write 2 buffers), local.
#include <cuda_runtime.h>
#include <cstdio>
#include <algorithm>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1);} } while (0)

struct Bufs { const uint4* src; uint4* peer; const uint4* a; const uint4* b; uint4* r1; uint4* r2; size_t np, ne; };

__device__ __forceinline__ uint4 add4(uint4 x, uint4 y) { return make_uint4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w); }
__device__ __forceinline__ uint4 sub4(uint4 x, uint4 y) { return make_uint4(x.x - y.x, x.y - y.y, x.z - y.z, x.w - y.w); }

// Range [lo, hi) of n split over `parts`, part p.
__device__ __forceinline__ void part(size_t n, int parts, int p, size_t* lo, size_t* hi) {
  const size_t per = (n + parts - 1) / parts; *lo = min(n, per * p); *hi = min(n, *lo + per);
}
__device__ void doPush(const Bufs& B, int parts, int p) {
  size_t lo, hi; part(B.np, parts, p, &lo, &hi);
  size_t i = lo + threadIdx.x;
  for (; i + 3 * blockDim.x < hi; i += 4 * blockDim.x) {
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = B.src[i + u * blockDim.x];
#pragma unroll
    for (int u = 0; u < 4; ++u) __stwb(B.peer + i + u * blockDim.x, v[u]);
  }
  for (; i < hi; i += blockDim.x) __stwb(B.peer + i, B.src[i]);
}
__device__ void doEpi(const Bufs& B, int parts, int p) {
  size_t lo, hi; part(B.ne, parts, p, &lo, &hi);
  for (size_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
    const uint4 x = B.a[i], y = B.b[i];
    __stwb(B.r1 + i, add4(x, y));
    __stwb(B.r2 + i, sub4(x, y));
  }
}
// mode 0: push only (all blocks); 1: epi only (all blocks); 2: split (first `split` blocks push, rest epi);
// 3: interleaved (every block pushes and does epi, chunk by chunk).
__global__ void __launch_bounds__(512) k(Bufs B, int mode, int split) {
  const int G = gridDim.x, b = blockIdx.x;
  if (mode == 0) doPush(B, G, b);
  else if (mode == 1) doEpi(B, G, b);
  else if (mode == 2) { if (b < split) doPush(B, split, b); else doEpi(B, G - split, b - split); }
  else {
    // 16 chunks each: push chunk c, then epi chunk c.
    for (int c = 0; c < 16; ++c) { doPush(B, G * 16, b * 16 + c); doEpi(B, G * 16, b * 16 + c); }
  }
}

int main() {
  const size_t pb = size_t(128) << 20;  // pushed bytes per GPU
  const size_t eb = size_t(128) << 20;  // epilogue: bytes per buffer (a, b, r1, r2)
  Bufs B[2];
  cudaStream_t st[2]; cudaEvent_t e0[2], e1[2];
  int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  uint4* peerbuf[2];
  for (int d = 0; d < 2; ++d) {
    CK(cudaSetDevice(d)); CK(cudaDeviceEnablePeerAccess(1 - d, 0));
    void *s, *p, *a, *b, *r1, *r2;
    CK(cudaMalloc(&s, pb)); CK(cudaMalloc(&p, pb)); CK(cudaMalloc(&a, eb)); CK(cudaMalloc(&b, eb)); CK(cudaMalloc(&r1, eb)); CK(cudaMalloc(&r2, eb));
    CK(cudaMemset(s, 1, pb)); CK(cudaMemset(a, 2, eb)); CK(cudaMemset(b, 3, eb));
    peerbuf[d] = (uint4*)p;
    B[d] = Bufs{(const uint4*)s, nullptr, (const uint4*)a, (const uint4*)b, (uint4*)r1, (uint4*)r2, pb / 16, eb / 16};
    CK(cudaStreamCreateWithFlags(&st[d], cudaStreamNonBlocking)); CK(cudaEventCreate(&e0[d])); CK(cudaEventCreate(&e1[d]));
  }
  for (int d = 0; d < 2; ++d) { B[d].peer = peerbuf[1 - d]; CK(cudaSetDevice(d)); CK(cudaDeviceSynchronize()); }
  auto run = [&](const char* name, int grid, int mode, int split, double pscale, double escale) {
    float best = 1e30f;
    for (int rep = 0; rep < 4; ++rep) {
      for (int d = 0; d < 2; ++d) {
        CK(cudaSetDevice(d));
        Bufs x = B[d]; x.np = size_t(x.np * pscale); x.ne = size_t(x.ne * escale);
        k<<<grid, 512, 0, st[d]>>>(x, mode, split);
        CK(cudaEventRecord(e0[d], st[d]));
        for (int i = 0; i < 5; ++i) k<<<grid, 512, 0, st[d]>>>(x, mode, split);
        CK(cudaEventRecord(e1[d], st[d]));
      }
      float worst = 0;
      for (int d = 0; d < 2; ++d) { CK(cudaSetDevice(d)); CK(cudaEventSynchronize(e1[d])); float ms; CK(cudaEventElapsedTime(&ms, e0[d], e1[d])); worst = std::max(worst, ms); }
      best = std::min(best, worst);
    }
    CK(cudaGetLastError());
    printf("%-40s grid %3d split %3d push %5.0f MiB epi 4x%5.0f MiB: %7.1f us\n", name, grid, split, pb * pscale / 1048576, eb * escale / 1048576, best * 1000 / 5);
  };
  for (double es : {0.5, 1.0}) {
    run("push only", sms, 0, 0, 1, es);
    run("push only, half the SMs", sms / 2, 0, 0, 1, es);
    run("push only, 2/3 of the SMs", sms * 2 / 3, 0, 0, 1, es);
    run("epi only", sms, 1, 0, 1, es);
    run("epi only, half the SMs", sms / 2, 1, 0, 1, es);
    run("epi only, 1/3 of the SMs", sms / 3, 1, 0, 1, es);
    run("split: half push, half epi", sms, 2, sms / 2, 1, es);
    run("split: 2/3 push, 1/3 epi", sms, 2, sms * 2 / 3, 1, es);
    run("interleaved per chunk, all SMs", sms, 3, 0, 1, es);
  }
  return 0;
}
