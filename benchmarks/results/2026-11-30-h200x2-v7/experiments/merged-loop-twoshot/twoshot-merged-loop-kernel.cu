#include "dispatch.cuh"
#include "norm_epilogue.cuh"
#include "sync.cuh"

namespace arfusion::detail {
namespace {

template <typename T, int VEC, SyncMode kSync>
__global__ void __launch_bounds__(kThreads, 1) twoShotKernel(DeviceComm c, RowArgs a, int rows_per_step) {
  using Epi = RowEpilogue<T, VEC>;
  using P = Pack<T, VEC>;
  __shared__ typename Epi::Shared sh;
  gridDependencyWait<kSync>();

  const int b = blockIdx.x;
  const int G = gridDim.x;
  const int R = rows_per_step;
  const int n = c.world;
  const int64_t nvec = a.hidden / VEC;
  const int64_t stride = strideElems<T>(a.hidden);
  const int64_t ag_offset = int64_t(n - 1) * R * stride;  // AG part after the RS part
  const T* in = static_cast<const T*>(a.input);
  const int64_t units = (a.tokens + int64_t(n) * R - 1) / (int64_t(n) * R);

  // Rows of rank r's share of unit u (0 past the last token).
  auto rowsOf = [&](int64_t u, int r) -> int {
    const int64_t left = a.tokens - (u * n + r) * R;
    return left <= 0 ? 0 : static_cast<int>(left < R ? left : R);
  };
  // RS, row j of unit u (epoch e): row j of each peer's share goes to that peer's RS part.
  auto scatterRow = [&](int64_t u, uint32_t e, int j) {
    for (int d = 1; d < n; ++d) {
      const int peer = (c.rank + d) % n;
      if (j >= rowsOf(u, peer)) continue;
      const T* src = in + ((u * n + peer) * R + j) * a.hidden;
      T* dst = reinterpret_cast<T*>(regionAddr(c, peer, b, e)) + (int64_t(senderIndex(c.rank, peer)) * R + j) * stride;
      for (int64_t i = threadIdx.x; i < nvec; i += kThreads) storePackPeer<T, VEC>(dst + i * VEC, loadPack<T, VEC>(src + i * VEC));
    }
  };
  // Owner, row j of unit u (epoch e): sum in rank order, push the sum to every peer's AG part,
  // run the epilogue locally.
  auto reduceRow = [&](int64_t u, uint32_t e, int j) {
    const int64_t row = (u * n + c.rank) * R + j;
    const T* own = in + row * a.hidden;
    const T* region = reinterpret_cast<const T*>(regionAddr(c, c.rank, b, e));
    Epi::run(a, row, sh, [&](int64_t i) {
      float acc[VEC];
#pragma unroll
      for (int k = 0; k < VEC; ++k) acc[k] = -0.f;  // -0 + x == x, also for x == -0 (NCCL agrees)
#pragma unroll
      for (int src = 0; src < kMaxRanks; ++src) {
        if (src < n) {
          const P p = src == c.rank ? loadPack<T, VEC>(own + i * VEC)
                                    : loadPackCg<T, VEC>(region + (int64_t(senderIndex(src, c.rank)) * R + j) * stride + i * VEC);
#pragma unroll
          for (int k = 0; k < VEC; ++k) acc[k] += toFloat(p.v[k]);
        }
      }
      P s;
#pragma unroll
      for (int k = 0; k < VEC; ++k) s.v[k] = fromFloat<T>(acc[k]);
#pragma unroll
      for (int d = 1; d < kMaxRanks; ++d) {
        if (d < n) {
          const int peer = (c.rank + d) % n;
          T* dst = reinterpret_cast<T*>(regionAddr(c, peer, b, e)) + ag_offset +
                   (int64_t(senderIndex(c.rank, peer)) * R + j) * stride + i * VEC;
          storePackPeer<T, VEC>(dst, s);
        }
      }
      return s;
    });
  };
  // Row j of every peer-owned share of unit u (epoch e), from the gathered sums.
  auto gatheredRow = [&](int64_t u, uint32_t e, int j) {
    const T* ag = reinterpret_cast<const T*>(regionAddr(c, c.rank, b, e)) + ag_offset;
    for (int d = 1; d < n; ++d) {
      const int owner = (c.rank + d) % n;
      if (j >= rowsOf(u, owner)) continue;
      const T* sums = ag + (int64_t(senderIndex(owner, c.rank)) * R + j) * stride;
      Epi::run(a, (u * n + owner) * R + j, sh, [&](int64_t i) { return loadPackCg<T, VEC>(sums + i * VEC); });
    }
  };

  uint32_t e = c.epochs[b];
  if (b < units) {
    for (int j = 0; j < R; ++j) scatterRow(b, e + 1, j);
    signalPeers(c, 0, b, e + 1, a.sig);
  }
  int64_t prev = -1;  // this block's previous unit: its gathered rows are still to be written
  for (int64_t u = b; u < units; u += G) {
    ++e;
    // RS(e) arrived; and, past the call's first unit, AG(e-1) arrived and every peer finished
    // its unit e-1 (the previous call's last wait covered that for the first unit).
    if (!waitPeers(c, 0, b, e, a.sig)) return;
    if (prev >= 0 && !waitPeers(c, 1, b, e - 1, a.sig)) return;
    const int64_t next = u + G < units ? u + G : -1;
    for (int j = 0; j < R; ++j) {
      if (j < rowsOf(u, c.rank)) reduceRow(u, e, j);
      if (next >= 0) scatterRow(next, e + 1, j);
      if (prev >= 0) gatheredRow(prev, e - 1, j);
    }
    signalPeers(c, 1, b, e, a.sig);
    if (next >= 0) signalPeers(c, 0, b, e + 1, a.sig);
    prev = u;
  }
  if (prev >= 0) {
    if (!waitPeers(c, 1, b, e, a.sig)) return;
    for (int j = 0; j < R; ++j) gatheredRow(prev, e, j);
  }
  if (threadIdx.x == 0) c.epochs[b] = e;
  gridDependencyTrigger<kSync>();
}

}  // namespace
