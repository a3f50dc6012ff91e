#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <curand_kernel.h>

#include "bench_harness.h"

namespace arfbench {
namespace {
template <typename T>
__device__ T conv(float v);
template <> __device__ float conv<float>(float v) { return v; }
template <> __device__ __half conv<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __nv_bfloat16 conv<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

template <typename T>
__global__ void fillKernel(T* p, size_t n, unsigned long long seed) {
  const size_t tid = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  curandStatePhilox4_32_10_t st;
  curand_init(seed, tid, 0, &st);
  for (size_t i = tid; i < n; i += size_t(gridDim.x) * blockDim.x) p[i] = conv<T>(curand_normal(&st));
}

__global__ void __launch_bounds__(512) peerStoreKernel(const uint4* __restrict__ src, uint4* dst, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) __stwb(dst + i, src[i]);
}
}  // namespace

void fillRandom(void* p, size_t n, arfusion::DType d, unsigned long long seed, cudaStream_t s) {
  switch (d) {
    case arfusion::DType::kFloat32: fillKernel<<<512, 256, 0, s>>>(static_cast<float*>(p), n, seed); break;
    case arfusion::DType::kFloat16: fillKernel<<<512, 256, 0, s>>>(static_cast<__half*>(p), n, seed); break;
    case arfusion::DType::kBFloat16: fillKernel<<<512, 256, 0, s>>>(static_cast<__nv_bfloat16*>(p), n, seed); break;
  }
}

void peerStore(const void* src, void* dst, size_t bytes, cudaStream_t s) {
  int dev = 0, sms = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  peerStoreKernel<<<sms, 512, 0, s>>>(static_cast<const uint4*>(src), static_cast<uint4*>(dst), bytes / 16);
}
}  // namespace arfbench
