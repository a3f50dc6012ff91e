// Element types, 16-byte packs and fp32 conversions shared by every kernel.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels.h"

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

// Elements e and e + 1 (e even) of a pack of 16-bit elements as one word, e in the low half.
template <typename T, int VEC>
__device__ __forceinline__ uint32_t pairWord(const Pack<T, VEC>& p, int e) {
  static_assert(sizeof(T) == 2 && VEC % 2 == 0, "packs of whole pairs of 16-bit elements");
  uint32_t w;
  memcpy(&w, &p.v[e], 4);
  return w;
}

// toFloat(p.v[e]), read from the 32-bit word that holds elements e & ~1 and e | 1 of a pack of
// 16-bit elements: a bf16's fp32 bits are its own shifted up (the even element) or masked (the odd
// one), one instruction, and an fp16 converts from its half of the pair. Reading p.v[e] alone made
// the compiler keep each odd element in a register of its own (a permute to split it off the
// converted pair, another to join them for the store). Other packs: toFloat(p.v[e]).
template <typename T, int VEC>
__device__ __forceinline__ float elementOf(const Pack<T, VEC>& p, int e) {
  if constexpr (sizeof(T) == 2 && VEC % 2 == 0) {
    const uint32_t w = pairWord(p, e & ~1);
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      return __uint_as_float(e % 2 == 0 ? w << 16 : w & 0xffff0000u);
    } else {
      __half2 h;
      memcpy(&h, &w, 4);
      return e % 2 == 0 ? __low2float(h) : __high2float(h);
    }
  } else {
    return toFloat(p.v[e]);
  }
}

// The bits of one element: bit-pattern tests (Lamport sentinel), single-element stores.
template <typename T>
using ElemBits = std::conditional_t<sizeof(T) == 4, uint32_t, uint16_t>;

// 16-byte packs move through uint4, and stores through the __stwb intrinsic, so every access is one
// 128-bit instruction. A plain struct (or uint4) assignment let the compiler split the one-shot's
// peer stores into 2- or 4-byte stores, which cut its peer-store bandwidth ~5x; the kernel checks
// (tests/scripts/check_kernels.py) keep it from coming back.
template <typename T, int VEC>
__device__ __forceinline__ Pack<T, VEC> loadPack(const T* p) {
  if constexpr (sizeof(Pack<T, VEC>) == 16) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    Pack<T, VEC> v;
    memcpy(&v, &raw, 16);
    return v;
  } else {
    return *reinterpret_cast<const Pack<T, VEC>*>(p);
  }
}

// loadPack where `load` is true, else zeros; the choice is made on the loaded words (four selects
// of a 16-byte pack), not element by element after they are unpacked.
template <typename T, int VEC>
__device__ __forceinline__ Pack<T, VEC> loadPackOrZero(const T* p, bool load) {
  Pack<T, VEC> v;
  if constexpr (sizeof(Pack<T, VEC>) == 16) {
    uint4 raw = make_uint4(0, 0, 0, 0);
    if (load) raw = *reinterpret_cast<const uint4*>(p);
    memcpy(&v, &raw, 16);
  } else {
    memset(&v, 0, sizeof v);
    if (load) v = *reinterpret_cast<const Pack<T, VEC>*>(p);
  }
  return v;
}

// Loads data written by another GPU: cached in L2 only, never in the (non-coherent) L1.
template <typename T, int VEC>
__device__ __forceinline__ Pack<T, VEC> loadPackCg(const T* p) {
  Pack<T, VEC> v;
  if constexpr (sizeof(Pack<T, VEC>) == 16) {
    const uint4 raw = __ldcg(reinterpret_cast<const uint4*>(p));
    memcpy(&v, &raw, 16);
  } else if constexpr (sizeof(Pack<T, VEC>) == 4) {
    const unsigned raw = __ldcg(reinterpret_cast<const unsigned*>(p));
    memcpy(&v, &raw, 4);
  } else {
    const unsigned short raw = __ldcg(reinterpret_cast<const unsigned short*>(p));
    memcpy(&v, &raw, 2);
  }
  return v;
}

template <typename T, int VEC>
__device__ __forceinline__ void storePack(T* p, const Pack<T, VEC>& v) {
  if constexpr (sizeof(Pack<T, VEC>) == 16) {
    uint4 raw;
    memcpy(&raw, &v, 16);
    __stwb(reinterpret_cast<uint4*>(p), raw);  // the intrinsic is always one st.global.v4
  } else {
    *reinterpret_cast<Pack<T, VEC>*>(p) = v;
  }
}

// A store that no one reads soon (st.global.cs, evict first): residual_out, which the next layer
// reads long after the kernels between have cycled L2, and the Lamport clears, which the peer
// overwrites before anyone reads them. It leaves L2 to the data that is read next. norm_out and
// the allreduce's out keep plain stores: the next GEMM reads them at once (2 x H200 NV18, bf16: Auto
// 512 x 8192 31.2 -> 30.4 us; every output store evict-first measured no better).
template <typename T, int VEC>
__device__ __forceinline__ void storePackEvictFirst(T* p, const Pack<T, VEC>& v) {
  if constexpr (sizeof(Pack<T, VEC>) == 16) {
    uint4 raw;
    memcpy(&raw, &v, 16);
    __stcs(reinterpret_cast<uint4*>(p), raw);  // one st.global.cs.v4
  } else {  // the scalar path: one element
    ElemBits<T> raw;
    memcpy(&raw, &v, sizeof raw);
    __stcs(reinterpret_cast<ElemBits<T>*>(p), raw);
  }
}

// Stores into a peer's workspace: relaxed at system scope, i.e. strong. The PTX memory model
// promises that a strong store becomes visible to other observers eventually; a weak (plain) store
// has no such promise without a fence, and the Lamport protocol has no fence. Same speed as plain
// stores on H200.
template <typename T, int VEC>
__device__ __forceinline__ void storePackPeer(T* p, const Pack<T, VEC>& v) {
  if constexpr (sizeof(Pack<T, VEC>) == 16) {
    uint4 r;
    memcpy(&r, &v, 16);
    asm volatile("st.relaxed.sys.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(r.x), "r"(r.y), "r"(r.z), "r"(r.w)
                 : "memory");
  } else if constexpr (sizeof(Pack<T, VEC>) == 4) {
    unsigned r;
    memcpy(&r, &v, 4);
    asm volatile("st.relaxed.sys.global.u32 [%0], %1;" ::"l"(p), "r"(r) : "memory");
  } else {
    unsigned short r;
    memcpy(&r, &v, 2);
    asm volatile("st.relaxed.sys.global.u16 [%0], %1;" ::"l"(p), "h"(r) : "memory");
  }
}

// Relaxed system-scope load (L1 bypassed): polls data another GPU writes (Lamport protocol).
template <typename T, int VEC>
__device__ __forceinline__ Pack<T, VEC> loadPackRelaxedSys(const T* p) {
  Pack<T, VEC> v;
  if constexpr (sizeof(Pack<T, VEC>) == 16) {
    uint4 r;
    asm volatile("ld.relaxed.sys.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p)
                 : "memory");
    memcpy(&v, &r, 16);
  } else if constexpr (sizeof(Pack<T, VEC>) == 4) {
    unsigned r;
    asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(r) : "l"(p) : "memory");
    memcpy(&v, &r, 4);
  } else {
    unsigned short r;
    asm volatile("ld.relaxed.sys.global.u16 %0, [%1];" : "=h"(r) : "l"(p) : "memory");
    memcpy(&v, &r, 2);
  }
  return v;
}

// Asks L2 to fetch one row of `hidden` elements (cp.async.bulk.prefetch.L2, sm_90+): one
// instruction, no registers, nothing to wait for. Vector path only (16-byte aligned rows whose
// size is a multiple of 16); a no-op elsewhere and for null rows (e.g. no residual).
template <typename T, int VEC>
__device__ __forceinline__ void prefetchRowL2(const T* row, int64_t hidden) {
  if constexpr (sizeof(T) * VEC == 16) {
    if (row != nullptr)
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(row), "r"(static_cast<uint32_t>(hidden * sizeof(T)))
                   : "memory");
  }
}

// Elements between consecutive rows in the workspace: row bytes rounded up to 16 (kernels.h rowStride).
template <typename T>
__device__ __forceinline__ int64_t strideElems(int64_t hidden) {
  return static_cast<int64_t>((static_cast<uint64_t>(hidden) * sizeof(T) + 15) / 16 * 16 / sizeof(T));
}

// The allreduce of one pack: the fp32 sum of ranks 0..world-1 in that order (load(src) gives rank
// src's pack), rounded to T. Every kernel sums this way, so every rank gets the same bits.
// kWorld: the caller kernel's compile-time world size, or 0 for any (`world` then bounds the
// loop): the loop is unrolled kWorld (else kMaxRanks) times, each with the caller's load inlined.
template <typename T, int VEC, int kWorld = 0, typename LoadFn>
__device__ __forceinline__ Pack<T, VEC> sumInRankOrder(int world, LoadFn&& load) {
  constexpr int kMax = kWorld > 0 ? kWorld : kMaxRanks;
  float acc[VEC];
#pragma unroll
  for (int e = 0; e < VEC; ++e) acc[e] = -0.f;  // -0 + x == x, also for x == -0 (NCCL agrees)
#pragma unroll
  for (int src = 0; src < kMax; ++src) {
    if (kWorld > 0 || src < world) {
      const Pack<T, VEC> p = load(src);
#pragma unroll
      for (int e = 0; e < VEC; ++e) acc[e] += toFloat(p.v[e]);
    }
  }
  Pack<T, VEC> s;
#pragma unroll
  for (int e = 0; e < VEC; ++e) s.v[e] = fromFloat<T>(acc[e]);
  return s;
}

}  // namespace arfusion::detail
