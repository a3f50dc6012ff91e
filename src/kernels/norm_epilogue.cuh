// The row epilogue every path shares: residual add and RMSNorm of one token row.
//
// Given the reduced sum s of a row (already rounded to T, exactly as an allreduce in T returns it):
//   kAllReduce           out          = s
//   kAllReduceAdd        residual_out = T(float(residual_in) + float(s))
//   kAllReduceAddRMSNorm residual_out as above, then with z = float(residual_out) (the stored value)
//                        norm_out     = T(z * rsqrt(sum(z^2) / hidden + eps) * float(gamma))
// All arithmetic is fp32. Because the NCCL path and the fused kernels call this same code with the
// same block shape, they agree bit for bit whenever their sums agree (always at 2 ranks).
//
// A row whose vectors fit kThreads * kMaxVecPerThread stays in registers (one HBM read of each
// input, one write of each output). A wider row takes two passes: pass 1 writes residual_out and
// accumulates sum(z^2); pass 2 re-reads residual_out (the thread's own writes) to write norm_out.
//
// Must be called by every thread of the block (it contains __syncthreads).
#pragma once

#include <cub/block/block_reduce.cuh>

#include "kernels.h"
#include "vec.cuh"

namespace arfusion::detail {

template <typename T, int VEC>
struct RowEpilogue {
  using P = Pack<T, VEC>;
  using BlockReduce = cub::BlockReduce<float, kThreads>;
  struct Shared {
    typename BlockReduce::TempStorage reduce;
    float scale;
  };

  // sumFn(i) returns the reduced pack of vector i of the row (and may have side effects, e.g. the
  // two-shot owner pushes it to its peers); it is called exactly once per vector.
  template <typename SumFn>
  __device__ __forceinline__ static void run(const RowArgs& a, int64_t row, Shared& sh, SumFn&& sumFn) {
    const int64_t nvec = a.hidden / VEC;
    const int64_t base = row * a.hidden;
    const T* res_in = static_cast<const T*>(a.residual_in) + base;
    T* res_out = static_cast<T*>(a.residual_out) + base;
    T* out = static_cast<T*>(a.out) + base;
    const bool norm = a.op == Op::kAllReduceAddRMSNorm;

    if (a.op == Op::kAllReduce) {
      for (int64_t i = threadIdx.x; i < nvec; i += kThreads) storePack<T, VEC>(out + i * VEC, sumFn(i));
      return;
    }

    if (nvec <= int64_t(kThreads) * kMaxVecPerThread) {
      float z[kMaxVecPerThread][VEC];
      float ss = 0.f;
#pragma unroll
      for (int k = 0; k < kMaxVecPerThread; ++k) {
        const int64_t i = threadIdx.x + int64_t(k) * kThreads;
        if (i < nvec) {
          const P s = sumFn(i);
          const P r = loadPack<T, VEC>(res_in + i * VEC);
          P ro;
#pragma unroll
          for (int e = 0; e < VEC; ++e) {
            ro.v[e] = fromFloat<T>(toFloat(s.v[e]) + toFloat(r.v[e]));
            z[k][e] = toFloat(ro.v[e]);
            ss += z[k][e] * z[k][e];
          }
          storePack<T, VEC>(res_out + i * VEC, ro);
        }
      }
      if (!norm) return;
      const float scale = blockScale(a, sh, ss);
      const T* gamma = static_cast<const T*>(a.gamma);
#pragma unroll
      for (int k = 0; k < kMaxVecPerThread; ++k) {
        const int64_t i = threadIdx.x + int64_t(k) * kThreads;
        if (i < nvec) {
          const P g = loadPack<T, VEC>(gamma + i * VEC);
          P o;
#pragma unroll
          for (int e = 0; e < VEC; ++e) o.v[e] = fromFloat<T>(z[k][e] * scale * toFloat(g.v[e]));
          storePack<T, VEC>(out + i * VEC, o);
        }
      }
      return;
    }

    // Wide rows: two passes.
    float ss = 0.f;
    for (int64_t i = threadIdx.x; i < nvec; i += kThreads) {
      const P s = sumFn(i);
      const P r = loadPack<T, VEC>(res_in + i * VEC);
      P ro;
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        ro.v[e] = fromFloat<T>(toFloat(s.v[e]) + toFloat(r.v[e]));
        const float zz = toFloat(ro.v[e]);
        ss += zz * zz;
      }
      storePack<T, VEC>(res_out + i * VEC, ro);
    }
    if (!norm) return;
    const float scale = blockScale(a, sh, ss);
    const T* gamma = static_cast<const T*>(a.gamma);
    for (int64_t i = threadIdx.x; i < nvec; i += kThreads) {
      const P zr = loadPack<T, VEC>(res_out + i * VEC);
      const P g = loadPack<T, VEC>(gamma + i * VEC);
      P o;
#pragma unroll
      for (int e = 0; e < VEC; ++e) o.v[e] = fromFloat<T>(toFloat(zr.v[e]) * scale * toFloat(g.v[e]));
      storePack<T, VEC>(out + i * VEC, o);
    }
  }

 private:
  // rsqrt(mean(z^2) + eps) of the row, on every thread. Leaves `sh` free for the next row.
  __device__ __forceinline__ static float blockScale(const RowArgs& a, Shared& sh, float ss) {
    const float total = BlockReduce(sh.reduce).Sum(ss);
    if (threadIdx.x == 0) sh.scale = rsqrtf(total / static_cast<float>(a.hidden) + a.eps);
    __syncthreads();
    const float scale = sh.scale;
    __syncthreads();
    return scale;
  }
};

}  // namespace arfusion::detail
