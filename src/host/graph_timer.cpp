// The creation-time checks' shared machinery (creation_checks.h).
#include "creation_checks.h"
#include "errors.h"

namespace arfusion::detail {

DeviceBuffers::~DeviceBuffers() {
  for (void* p : ptrs) cudaFree(p);
}

Status DeviceBuffers::alloc(void** p, size_t bytes) {
  ARF_CUDA(cudaMalloc(p, bytes));
  ptrs.push_back(*p);
  return Status::kSuccess;
}

GraphExecs::~GraphExecs() {
  for (cudaGraphExec_t e : v)
    if (e) cudaGraphExecDestroy(e);
}

GraphTimer::~GraphTimer() {
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
  if (stream) cudaStreamDestroy(stream);
}

Status GraphTimer::init() {
  ARF_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  ARF_CUDA(cudaEventCreate(&e0));
  ARF_CUDA(cudaEventCreate(&e1));
  return Status::kSuccess;
}

Status GraphTimer::capture(Communicator* c, const RowArgs& args, const Plan& plan, int calls, GraphExecs* into) {
  ARF_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  Status st = Status::kSuccess;
  for (int i = 0; i < calls; ++i) {
    const Status one = c->runPlanned(args, DType::kBFloat16, true, plan, stream);
    if (st == Status::kSuccess) st = one;
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream, &graph);
  cudaGraphExec_t exec = nullptr;
  const cudaError_t inst = st == Status::kSuccess && end == cudaSuccess ? cudaGraphInstantiate(&exec, graph, 0) : cudaSuccess;
  if (graph) cudaGraphDestroy(graph);
  (void)cudaGetLastError();  // the errors are returned below, none is left behind
  ARF_TRY(st);
  if (end != cudaSuccess) return failf(Status::kCudaError, "cudaStreamEndCapture failed: %s", cudaGetErrorString(end));
  if (inst != cudaSuccess) return failf(Status::kCudaError, "cudaGraphInstantiate failed: %s", cudaGetErrorString(inst));
  into->v.push_back(exec);
  return Status::kSuccess;
}

Status GraphTimer::time(cudaGraphExec_t exec, int calls, float* us) {
  float best = 1e30f;
  cudaError_t first = cudaSuccess;
  for (int rep = 0; rep < 4; ++rep) {
    float ms = 0;
    cudaError_t e = cudaEventRecord(e0, stream);
    if (e == cudaSuccess) e = cudaGraphLaunch(exec, stream);
    if (e == cudaSuccess) e = cudaEventRecord(e1, stream);
    if (e == cudaSuccess) e = cudaEventSynchronize(e1);
    if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, e0, e1);
    if (e != cudaSuccess && first == cudaSuccess) first = e;
    if (e == cudaSuccess && rep > 0 && ms < best) best = ms;
  }
  if (first != cudaSuccess) return failf(Status::kCudaError, "timing a CUDA graph failed: %s", cudaGetErrorString(first));
  *us = best * 1000.f / calls;
  return Status::kSuccess;
}

}  // namespace arfusion::detail
