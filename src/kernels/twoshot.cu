// The two-shot's launch and kernel enumeration, plain epilogue (the kernels: twoshot.cuh; the
// extended epilogue's instantiations: twoshot_ext.cu and twoshot_ext_formats.cu, built in parallel
// with this file).
#include "twoshot.cuh"

namespace arfusion::detail {

// Per vectors per thread, as the one-shot (dispatchVariant).
cudaError_t launchTwoShot(const DeviceComm& comm, const RowArgs& args, const FusedLaunch& launch,
                          cudaStream_t stream) {
  if (args.ext) return launchTwoShotExtended(comm, args, launch, stream);
  return launchTwoShotSet<TwoShotSet::kAll, Epilogues::kPlain>(comm, args, launch, stream);
}

cudaError_t forEachTwoShotKernel(const KernelVisitor& visit) {
  const cudaError_t e = forEachTwoShotSetKernel<TwoShotSet::kAll, Epilogues::kPlain>(visit);
  return e != cudaSuccess ? e : forEachTwoShotExtendedKernel(visit);
}

}  // namespace arfusion::detail
