// Test-only device helpers: byte comparison and input perturbation inside CUDA graphs.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <cuda.h>

#include "gpu_harness.h"
#include "kernels/quant.h"
#include "quant_ref.h"

namespace arftest {
namespace {
__global__ void countMismatchKernel(const uint32_t* a, const uint32_t* b, size_t words, unsigned long long* counter) {
  unsigned long long bad = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x)
    bad += a[i] != b[i];
  if (bad) atomicAdd(counter, bad);
}
// Flips the lowest mantissa bit of every 16-bit half-word: always a finite, different value for
// finite inputs, so a kernel that read the previous call's data gives a different result.
__global__ void perturbKernel(uint32_t* p, size_t words) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x)
    p[i] ^= 0x00010001u;
}
// The library's conversions (src/kernels/quant.h) as compiled for the device, as the epilogue calls
// them: in pairs. Each input is converted as the low and as the high value of a pair (beside its
// neighbour), and E4M3 also alone (the NVFP4 block scale's conversion), and its code decoded back
// (the block scale's value: the same bits as the arithmetic decode, or both NaN); the outputs are
// the low value's codes, and where any two of a value's codes or decodes disagree the E2M1 output
// is 0xff, which no reference code equals, so the comparison fails. The sample's E4M3 codes are
// all 256. Where both values of a pair are finite and below kE2M1LanesLimit in magnitude, the E2M1
// pair is also converted two at a time (e2m1MagnitudeLanes, the epilogue's conversion there), both
// ways round.
__global__ void convertKernel(const float* in, uint8_t* e4m3, uint8_t* e2m1, size_t n) {
  using namespace arfusion::detail;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float x = in[i], other = in[(i ^ 1) < n ? (i ^ 1) : i];
    const uint16_t q_lo = e4m3x2FromFloat(x, other), q_hi = e4m3x2FromFloat(other, x);
    const uint8_t f_lo = e2m1x2FromFloat(x, other), f_hi = e2m1x2FromFloat(other, x);
    const uint8_t q = static_cast<uint8_t>(q_lo), f = static_cast<uint8_t>(f_lo & 15u);
    const float d = e4m3ToFloat(q), r = e4m3ToFloatArithmetic(q);
    const bool decodes = (d != d && r != r) || floatBits(d) == floatBits(r);
    const uint16_t lanes = arftest::e2m1BytesOfPairAndSwap(x, other);  // norm_epilogue.cuh's fast path
    const bool small = fabsf(x) < kE2M1LanesLimit && fabsf(other) < kE2M1LanesLimit;  // false for NaN
    const bool pairs = !small || lanes == (f_lo | f_hi << 8);
    const bool agree = q == (q_hi >> 8) && q == e4m3FromFloat(x) && f == (f_hi >> 4) && decodes && pairs;
    e4m3[i] = q;
    e2m1[i] = agree ? f : uint8_t(0xff);
  }
}
// Launched by nothing but loadingProbe(): whether it is loaded says how this process loads kernels.
__global__ void loadingProbeKernel(int* p) {
  if (p) *p = 1;
}
}  // namespace

// 64 blocks of 256 threads on stream s; this launch's own status (a <<<>>> launch followed by
// cudaGetLastError would also report an earlier, handled error of the calling thread).
template <typename... KArgs, typename... Args>
cudaError_t launch64(void (*kernel)(KArgs...), cudaStream_t s, Args... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(64);
  cfg.blockDim = dim3(256);
  cfg.stream = s;
  return cudaLaunchKernelEx(&cfg, kernel, args...);
}

cudaError_t countMismatch(const void* a, const void* b, size_t bytes, unsigned long long* counter, cudaStream_t s) {
  return launch64(countMismatchKernel, s, static_cast<const uint32_t*>(a), static_cast<const uint32_t*>(b), bytes / 4, counter);
}
cudaError_t convertOnDevice(const float* in, uint8_t* e4m3, uint8_t* e2m1, size_t n, cudaStream_t s) {
  return launch64(convertKernel, s, in, e4m3, e2m1, n);
}
cudaError_t perturb(void* p, size_t bytes, cudaStream_t s) { return launch64(perturbKernel, s, static_cast<uint32_t*>(p), bytes / 4); }

// Loads the kernels above now: a test that spins fused kernels of two communicators at once must
// not load one of its own kernels lazily in between (arfusion's preloadKernels() says why).
std::string preloadTestKernels() {
  cudaFuncAttributes attr;
  for (const void* k : {reinterpret_cast<const void*>(countMismatchKernel), reinterpret_cast<const void*>(perturbKernel),
                        reinterpret_cast<const void*>(convertKernel)})
    if (cudaFuncGetAttributes(&attr, k) != cudaSuccess) return "cudaFuncGetAttributes failed on a test kernel";
  return "";
}

// A driver API function, found through the runtime: the tests do not link libcuda (CI machines
// have no driver), and these are only called where a GPU is.
template <typename Fn>
Fn driverApi(const char* name) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(name, &p, CUDA_VERSION, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess)
    return nullptr;
  return reinterpret_cast<Fn>(p);
}

// The loading state of a kernel without loading it: the handles cuModuleEnumerateFunctions returns
// may be partially loaded, and cuFuncIsLoaded tells (cudaGetFuncBySymbol loads the kernel it returns).
std::string kernelLoaded(const void* kernel, bool* loaded) {
  static const auto getName = driverApi<decltype(&cuKernelGetName)>("cuKernelGetName");
  static const auto getLibrary = driverApi<decltype(&cuKernelGetLibrary)>("cuKernelGetLibrary");
  static const auto getModule = driverApi<decltype(&cuLibraryGetModule)>("cuLibraryGetModule");
  static const auto countFunctions = driverApi<decltype(&cuModuleGetFunctionCount)>("cuModuleGetFunctionCount");
  static const auto enumerate = driverApi<decltype(&cuModuleEnumerateFunctions)>("cuModuleEnumerateFunctions");
  static const auto funcName = driverApi<decltype(&cuFuncGetName)>("cuFuncGetName");
  static const auto isLoaded = driverApi<decltype(&cuFuncIsLoaded)>("cuFuncIsLoaded");
  if (!getName || !getLibrary || !getModule || !countFunctions || !enumerate || !funcName || !isLoaded)
    return "a driver API function is missing (driver older than CUDA " + std::to_string(CUDA_VERSION) + "?)";
  cudaKernel_t k = nullptr;
  if (cudaGetKernel(&k, kernel) != cudaSuccess) return "cudaGetKernel failed";
  const CUkernel ck = reinterpret_cast<CUkernel>(k);
  const char* name = nullptr;
  CUlibrary lib = nullptr;
  CUmodule mod = nullptr;
  unsigned count = 0;
  if (getName(&name, ck) != CUDA_SUCCESS || getLibrary(&lib, ck) != CUDA_SUCCESS || getModule(&mod, lib) != CUDA_SUCCESS ||
      countFunctions(&count, mod) != CUDA_SUCCESS)
    return "finding the kernel's module failed";
  std::vector<CUfunction> fns(count);
  if (enumerate(fns.data(), count, mod) != CUDA_SUCCESS) return "cuModuleEnumerateFunctions failed";
  for (CUfunction f : fns) {
    const char* fname = nullptr;
    if (funcName(&fname, f) != CUDA_SUCCESS || std::strcmp(fname, name) != 0) continue;
    CUfunctionLoadingState state = CU_FUNCTION_LOADING_STATE_UNLOADED;
    if (isLoaded(&state, f) != CUDA_SUCCESS) return "cuFuncIsLoaded failed";
    *loaded = state == CU_FUNCTION_LOADING_STATE_LOADED;
    return "";
  }
  return std::string("kernel ") + name + " not found in its module";
}

std::string loadingProbe(bool* before, bool* after) {
  const void* k = reinterpret_cast<const void*>(loadingProbeKernel);
  std::string e = kernelLoaded(k, before);
  if (!e.empty()) return e;
  loadingProbeKernel<<<1, 1>>>(nullptr);
  if (cudaDeviceSynchronize() != cudaSuccess) return "the probe kernel failed";
  return kernelLoaded(k, after);
}
}  // namespace arftest
