// arfusion-decode-bench: a tensor-parallel transformer decode step in miniature, the number an
// engine owner cares about. Per layer and rank: the attention-output GEMM [B x H/TP] x [H/TP x H],
// allreduce + residual + RMSNorm, the MLP up/gate GEMM [B x H] x [H x 2I/TP], the down GEMM
// [B x I/TP] x [I/TP x H], allreduce + residual + RMSNorm. GEMMs through cuBLAS (bf16, fp32
// compute); attention itself is left out. One whole step (all layers) is captured in a CUDA graph
// per path; step latency is the median of 5 replays, max over ranks; tokens/s = B / step.
// Weights are one random set shared by all layers (far larger than L2, so every GEMM still streams
// them from HBM). --quant F makes every norm also write a quantized copy of its output (values and
// scales in the GEMMs' layouts); the GEMMs still read bf16, so the step shows what the quantized
// output costs, not an FP8 model's speed.
#include <cublas_v2.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_harness.h"

int main(int argc, char** argv) {
  int64_t H = 8192, I = 28672;
  int layers = 80;
  std::vector<int64_t> batches = {1, 8, 32, 64, 128, 256};
  arfusion::QuantFormat quant = arfusion::QuantFormat::kNone;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quant" && i + 1 < argc) {
      if (!arfbench::parseQuantFormat(argv[++i], &quant)) {
        std::fprintf(stderr, "arfusion-decode-bench: unknown format %s (none, fp8, fp8-token, fp8-group, nvfp4)\n", argv[i]);
        return arfbench::kExitUsage;
      }
    } else if (a == "--hidden" && i + 1 < argc) H = std::atoll(argv[++i]);
    else if (a == "--intermediate" && i + 1 < argc) I = std::atoll(argv[++i]);
    else if (a == "--layers" && i + 1 < argc) layers = std::atoi(argv[++i]);
    else {
      std::printf("usage: arfusion-decode-bench [--hidden 8192] [--intermediate 28672] [--layers 80] [--quant FORMAT]\n"
                  "  Decode-step latency and tokens/s per path (NCCL path, Auto) for batch 1..256, TP = all GPUs.\n"
                  "  --quant fp8|fp8-token|fp8-group|nvfp4: every norm also writes that quantized output.\n");
      return a == "--help" ? 0 : 2;
    }
  }
  int exit_code = arfbench::kExitOk;
  const std::unique_ptr<arfbench::Group> group = arfbench::openAllGpus("arfusion-decode-bench", &exit_code);
  if (!group) return exit_code;
  arfbench::Group& g = *group;
  const int n = g.world();
  const int tp = n;
  if (H % tp || I % tp) {
    std::fprintf(stderr, "arfusion-decode-bench: hidden and intermediate must divide by TP = %d\n", tp);
    return arfbench::kExitUsage;
  }
  const int64_t Bmax = *std::max_element(batches.begin(), batches.end());
  const int64_t Hs = H / tp, Is = I / tp;
  struct Rank {
    cublasHandle_t blas = nullptr;
    void* ws = nullptr;
    void *wo = nullptr, *wup = nullptr, *wdown = nullptr, *gamma = nullptr;
    void *attn = nullptr, *partial = nullptr, *residual = nullptr, *xnorm = nullptr, *up = nullptr;
    void *q_values = nullptr, *q_scales = nullptr, *q_scale = nullptr;
  };
  size_t q_values = 0, q_scales = 0;
  if (quant != arfusion::QuantFormat::kNone &&
      arfusion::quantBufferBytes(quant, arfbench::benchLayout(quant), Bmax, H, &q_values, &q_scales) != arfusion::Status::kSuccess) {
    std::fprintf(stderr, "arfusion-decode-bench: %s\n", arfusion::lastError());
    return arfbench::kExitUsage;
  }
  std::vector<Rank> ranks(n);
  std::vector<std::string> errs(n);
  g.onEach([&](int r, arfusion::Communicator*, cudaStream_t s) {
    Rank& k = ranks[r];
    auto alloc = [&](void** p, int64_t elems) {
      if (cudaMalloc(p, elems * 2) != cudaSuccess) errs[r] = "out of device memory";
      else arfbench::fillRandom(*p, elems, arfusion::DType::kBFloat16, 77 * r + elems, s);
    };
    alloc(&k.wo, Hs * H);
    alloc(&k.wup, H * 2 * Is);
    alloc(&k.wdown, Is * H);
    alloc(&k.gamma, H);
    alloc(&k.attn, Bmax * Hs);
    alloc(&k.partial, Bmax * H);
    alloc(&k.residual, Bmax * H);
    alloc(&k.xnorm, Bmax * H);
    alloc(&k.up, Bmax * 2 * Is);
    if (quant != arfusion::QuantFormat::kNone) {
      // The scale the static formats read (FP8's, NVFP4's global one), a plausible constant.
      const float scale = quant == arfusion::QuantFormat::kNvfp4 ? 224.f : 0.05f;
      if (cudaMalloc(&k.q_values, q_values) != cudaSuccess || cudaMalloc(&k.q_scales, std::max<size_t>(q_scales, 16)) != cudaSuccess ||
          cudaMalloc(&k.q_scale, sizeof scale) != cudaSuccess)
        errs[r] = "out of device memory";
      else
        cudaMemcpyAsync(k.q_scale, &scale, sizeof scale, cudaMemcpyHostToDevice, s);
    }
    cudaMalloc(&k.ws, size_t(32) << 20);
    cublasCreate(&k.blas);
    cublasSetStream(k.blas, s);
    cublasSetWorkspace(k.blas, k.ws, size_t(32) << 20);
    cudaStreamSynchronize(s);
  });
  for (auto& e : errs)
    if (!e.empty()) {
      std::fprintf(stderr, "arfusion-decode-bench: %s\n", e.c_str());
      return arfbench::kExitFailed;
    }
  const float alpha = 1.f, beta = 0.f;
  // Row-major C[B x N] = A[B x K] * W[K x N] is column-major C^T = W^T * A^T.
  auto gemm = [&](cublasHandle_t h, const void* A, int64_t lda, const void* W, void* C, int64_t B, int64_t K, int64_t N) {
    return cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, int(N), int(B), int(K), &alpha, W, CUDA_R_16BF, int(N), A, CUDA_R_16BF,
                        int(lda), &beta, C, CUDA_R_16BF, int(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  };
  struct PathDef {
    const char* name;
    arfusion::Strategy s;
  } paths[] = {{"nccl_path", arfusion::Strategy::kNccl}, {"auto", arfusion::Strategy::kAuto}};
  std::printf("arfusion-decode-bench: %s x %d (TP %d), hidden %lld, intermediate %lld, %d layers, bf16%s%s, CUDA graph per step\n",
              g.deviceName().c_str(), n, tp, (long long)H, (long long)I, layers,
              quant != arfusion::QuantFormat::kNone ? ", norms also write " : "",
              quant != arfusion::QuantFormat::kNone ? arfusion::toString(quant) : "");
  std::printf("%6s  %12s %12s  %12s %12s  %8s  %s\n", "batch", "nccl_path_us", "tok/s", "auto_us", "tok/s", "speedup", "auto_pick");
  for (int64_t B : batches) {
    double step_us[2] = {0, 0};
    for (int p = 0; p < 2; ++p) {
      std::vector<double> per_rank(n, 0);
      g.onEach([&](int r, arfusion::Communicator* comm, cudaStream_t s) {
        Rank& k = ranks[r];
        arfusion::commSetStrategy(comm, paths[p].s, arfusion::SyncMode::kAuto);
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
        bool ok = true;
        arfusion::NormArgs na;
        na.input = k.partial, na.residual_in = k.residual, na.residual_out = k.residual, na.gamma = k.gamma, na.norm_out = k.xnorm;
        na.tokens = B, na.hidden = H, na.dtype = arfusion::DType::kBFloat16, na.eps = 1e-6f;
        na.quant.format = quant, na.quant.layout = arfbench::benchLayout(quant);
        na.quant.values = k.q_values, na.quant.scales = q_scales ? k.q_scales : nullptr;
        na.quant.scale = static_cast<const float*>(k.q_scale);
        for (int l = 0; l < layers && ok; ++l) {
          ok &= gemm(k.blas, k.attn, Hs, k.wo, k.partial, B, Hs, H) == CUBLAS_STATUS_SUCCESS;
          ok &= arfusion::allReduceAddRMSNorm(comm, na, s) == arfusion::Status::kSuccess;
          ok &= gemm(k.blas, k.xnorm, H, k.wup, k.up, B, H, 2 * Is) == CUBLAS_STATUS_SUCCESS;
          ok &= gemm(k.blas, k.up, 2 * Is, k.wdown, k.partial, B, Is, H) == CUBLAS_STATUS_SUCCESS;
          ok &= arfusion::allReduceAddRMSNorm(comm, na, s) == arfusion::Status::kSuccess;
        }
        cudaStreamEndCapture(s, &graph);
        if (!ok || cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
          errs[r] = std::string("capture failed: ") + arfusion::lastError();
          return;
        }
        cudaEvent_t e0, e1;
        cudaEventCreate(&e0);
        cudaEventCreate(&e1);
        // Every step checked (timeOnce), and the communicator's device error read after the
        // replays: a call that timed out makes the calls queued behind it give up at once, a fast
        // step that is wrong.
        auto launch = [&]() -> std::string {
          const cudaError_t e = cudaGraphLaunch(exec, s);
          return e == cudaSuccess ? "" : cudaGetErrorString(e);
        };
        std::vector<float> t;
        for (int rep = -1; rep < 5 && errs[r].empty(); ++rep) {
          float ms = 0;
          if (std::string e = arfbench::timeOnce(s, e0, e1, launch, &ms); !e.empty()) errs[r] = "step replay: " + e;
          else if (rep >= 0) t.push_back(ms * 1000.f);
        }
        const char* detail = nullptr;
        if (errs[r].empty() && arfusion::commGetAsyncError(comm, &detail) != arfusion::Status::kSuccess)
          errs[r] = std::string("device error: ") + detail;
        if (errs[r].empty()) {
          std::sort(t.begin(), t.end());
          per_rank[r] = t[t.size() / 2];
        }
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(graph);
        arfusion::commSetStrategy(comm, arfusion::Strategy::kAuto, arfusion::SyncMode::kAuto);
      });
      for (auto& e : errs)
        if (!e.empty()) {
          std::fprintf(stderr, "arfusion-decode-bench: %s\n", e.c_str());
          return arfbench::kExitFailed;
        }
      step_us[p] = *std::max_element(per_rank.begin(), per_rank.end());
    }
    const std::string pick = g.planOf(arfusion::Op::kAllReduceAddRMSNorm, arfusion::DType::kBFloat16, B, H, arfusion::Strategy::kAuto,
                                      arfusion::SyncMode::kAuto, quant != arfusion::QuantFormat::kNone);
    std::printf("%6lld  %12.1f %12.0f  %12.1f %12.0f  %7.3fx  %s\n", (long long)B, step_us[0], B / (step_us[0] * 1e-6), step_us[1],
                B / (step_us[1] * 1e-6), step_us[0] / step_us[1], pick.c_str());
  }
  g.onEach([&](int r, arfusion::Communicator*, cudaStream_t) {
    Rank& k = ranks[r];
    cublasDestroy(k.blas);
    for (void* p : {k.ws, k.wo, k.wup, k.wdown, k.gamma, k.attn, k.partial, k.residual, k.xnorm, k.up, k.q_values, k.q_scales, k.q_scale})
      cudaFree(p);
  });
  return 0;
}
