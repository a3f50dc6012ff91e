// The one-shot's extended-epilogue instantiations (RowArgs::ext: optional residual and outputs,
// Gemma weights, quantized outputs): the same kernels (oneshot.cuh) with kExt = true, compiled in
// their own translation unit so that they build in parallel with the plain ones (oneshot.cu).
#include "oneshot.cuh"

namespace arfusion::detail {

cudaError_t launchOneShotExtended(const DeviceComm& comm, const RowArgs& args, const FusedLaunch& launch,
                                  cudaStream_t stream) {
  // NVFP4 swizzled scales: the padding lines by the grid's last blocks, or by added ones (planPaddingLines).
  RowArgs a = args;
  FusedLaunch l = launch;
  l.blocks += planPaddingLines(a, launch.blocks);
  return launchFamily<OneShot, Epilogues::kExtended>(comm, a, l, stream);
}

cudaError_t forEachOneShotExtendedKernel(const KernelVisitor& visit) {
  return forEachFamilyKernel<OneShot, Epilogues::kExtended>(visit);
}

}  // namespace arfusion::detail
