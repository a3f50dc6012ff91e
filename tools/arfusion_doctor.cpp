// arfusion-doctor: what arfusion sees on this machine and what it will do. GPUs and arches, the
// peer-access matrix and link type, NCCL version, the multicast setting, then (2+ GPUs) a
// communicator over all GPUs: the self-check and speed-check outcomes, the sync mode and Auto table in force, and the
// plan for typical decode and prefill shapes. Findings a user must act on are marked "WARN".
// Exit status: 0 healthy, 1 a failure or a WARN finding, 77 no GPU to diagnose, 2 usage.
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_harness.h"

int main(int argc, char** argv) {
  if (argc > 1) {
    std::printf("usage: arfusion-doctor\n  Reports GPUs, peer access, link types, NCCL, and the strategy and sync mode arfusion\n"
                "  would use here, with the reason for each. Exit 0 healthy, 1 a failure or a WARN finding,\n"
                "  77 no GPU.\n");
    return std::strcmp(argv[1], "--help") ? arfbench::kExitUsage : arfbench::kExitOk;
  }
  int warnings = 0;
  auto warn = [&](const std::string& m) {
    ++warnings;
    std::printf("WARN  %s\n", m.c_str());
  };
  int rt = 0, drv = 0, nv = 0, n = 0;
  cudaRuntimeGetVersion(&rt);
  cudaDriverGetVersion(&drv);
  ncclGetVersion(&nv);
  std::printf("arfusion %d.%d.%d, CUDA runtime %s, driver %s, NCCL %s\n", ARFUSION_VERSION_MAJOR, ARFUSION_VERSION_MINOR,
              ARFUSION_VERSION_PATCH, arfbench::cudaVersionString(rt).c_str(),
              drv ? arfbench::cudaVersionString(drv).c_str() : "none (no NVIDIA driver is loaded)",
              arfbench::ncclVersionString(nv).c_str());
  if (const std::string why = arfbench::gpuShortfall(1, &n); !why.empty()) {
    std::printf("%s: nothing to diagnose.\n", why.c_str());
    return arfbench::kExitSkip;
  }
  int major0 = -1, minor0 = -1;
  for (int d = 0; d < n; ++d) {
    cudaDeviceProp p{};
    cudaGetDeviceProperties(&p, d);
    char bus[32] = {};
    cudaDeviceGetPCIBusId(bus, sizeof bus, d);
    std::printf("GPU %d  %s  sm_%d%d  %d SMs  %.0f GiB  %s\n", d, p.name, p.major, p.minor, p.multiProcessorCount,
                p.totalGlobalMem / 1073741824.0, bus);
    if (major0 < 0) major0 = p.major, minor0 = p.minor;
    else if (p.major != major0 || p.minor != minor0) warn("mixed GPU architectures: arfusion takes the NCCL path");
    if (p.major == 12) std::printf("      SM12x: flag-barrier sync; Auto's one-shot sizes come from the speed check at creation (not measured here)\n");
  }
  if (n > 1) {
    std::printf("peer access (link):\n     ");
    for (int j = 0; j < n; ++j) std::printf("  GPU%-6d", j);
    std::printf("\n");
    for (int i = 0; i < n; ++i) {
      std::printf("GPU%-2d", i);
      for (int j = 0; j < n; ++j) {
        if (i == j) { std::printf("  %-9s", "-"); continue; }
        int can = 0, atomics = 0;
        cudaDeviceCanAccessPeer(&can, i, j);
        if (can) cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, i, j);
        std::printf("  %-9s", !can ? "NO" : atomics ? "nvlink" : "pcie");
        if (!can) warn("GPU " + std::to_string(i) + " cannot access GPU " + std::to_string(j) + ": fusion off, NCCL path only");
      }
      std::printf("\n");
    }
  }
  const char* nvls = std::getenv("NCCL_NVLS_ENABLE");
  std::printf("NCCL_NVLS_ENABLE=%s (arfusion never uses NVLink multicast)\n", nvls ? nvls : "(unset)");
  if (n < 2) {
    std::printf("one GPU: arfusion runs the local add-RMSNorm only\n");
    return warnings ? arfbench::kExitFailed : arfbench::kExitOk;
  }
  arfbench::Group g(n);
  if (!g.error().empty()) {
    std::printf("FAIL  creating a %d-rank communicator: %s\n", n, g.error().c_str());
    return arfbench::kExitFailed;
  }
  std::printf("communicator over %d GPUs (threads, one GPU each):\n", n);
  struct Sh {
    const char* what;
    int64_t tokens, hidden;
  } shapes[] = {{"decode 1 token", 1, 8192}, {"decode 64 tokens", 64, 8192}, {"decode 256 tokens", 256, 8192},
                {"prefill 2048 tokens", 2048, 8192}, {"prefill 8192 tokens", 8192, 8192}};
  for (const Sh& s : shapes) {
    arfusion::Plan p;
    const arfusion::Status st = arfusion::plan(g.comm(0), arfusion::Shape{s.tokens, s.hidden, arfusion::DType::kBFloat16}, &p);
    if (st != arfusion::Status::kSuccess) {
      std::printf("FAIL  plan: %s\n", arfusion::lastError());
      return arfbench::kExitFailed;
    }
    std::printf("  %-20s %5lld x %-5lld -> %-8s grid %3d  %s\n", s.what, (long long)s.tokens, (long long)s.hidden,
                arfusion::toString(p.strategy), p.blocks, p.reason);
    if (std::strstr(p.reason, "self-check: GridDependency")) warn(std::string("the PDL self-check failed: ") + p.reason);
    if (s.tokens == 1 && p.strategy == arfusion::Strategy::kNccl && std::strstr(p.reason, "speed check"))
      warn(std::string("the speed check found the fused one-shot slower than the NCCL path even for one token: ") + p.reason);
  }
  return warnings ? arfbench::kExitFailed : arfbench::kExitOk;
}
