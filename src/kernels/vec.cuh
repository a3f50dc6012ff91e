// Element types, 16-byte packs and fp32 conversions shared by every kernel.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace arfusion::detail {

template <typename T> __device__ __forceinline__ float toFloat(T v);
template <> __device__ __forceinline__ float toFloat<float>(float v) { return v; }
template <> __device__ __forceinline__ float toFloat<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float toFloat<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

template <typename T> __device__ __forceinline__ T fromFloat(float v);
template <> __device__ __forceinline__ float fromFloat<float>(float v) { return v; }
template <> __device__ __forceinline__ __half fromFloat<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// VEC elements of T moved as one access: 16 bytes on the vector path, one element on the scalar
// path (misaligned pointers or rows whose byte size is not a multiple of 16).
template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Pack {
  T v[VEC];
};

template <typename T, int VEC>
__device__ __forceinline__ Pack<T, VEC> loadPack(const T* p) {
  return *reinterpret_cast<const Pack<T, VEC>*>(p);
}

// Loads data written by another GPU: cached in L2 only, never in the (non-coherent) L1.
template <typename T, int VEC>
__device__ __forceinline__ Pack<T, VEC> loadPackCg(const T* p) {
  if constexpr (sizeof(Pack<T, VEC>) == 16) {
    const uint4 raw = __ldcg(reinterpret_cast<const uint4*>(p));
    return *reinterpret_cast<const Pack<T, VEC>*>(&raw);
  } else if constexpr (sizeof(Pack<T, VEC>) == 4) {
    const unsigned raw = __ldcg(reinterpret_cast<const unsigned*>(p));
    return *reinterpret_cast<const Pack<T, VEC>*>(&raw);
  } else {
    const unsigned short raw = __ldcg(reinterpret_cast<const unsigned short*>(p));
    return *reinterpret_cast<const Pack<T, VEC>*>(&raw);
  }
}

template <typename T, int VEC>
__device__ __forceinline__ void storePack(T* p, const Pack<T, VEC>& v) {
  *reinterpret_cast<Pack<T, VEC>*>(p) = v;
}

// Elements between consecutive rows in the workspace: row bytes rounded up to 16 (kernels.h rowStride).
template <typename T>
__device__ __forceinline__ int64_t strideElems(int64_t hidden) {
  return static_cast<int64_t>((static_cast<uint64_t>(hidden) * sizeof(T) + 15) / 16 * 16 / sizeof(T));
}

}  // namespace arfusion::detail
