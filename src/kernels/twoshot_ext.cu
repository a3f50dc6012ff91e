// The two-shot's extended-epilogue instantiations (RowArgs::ext): the same kernels (twoshot.cuh)
// with kExt = true, compiled in their own translation unit so that they build in parallel with
// the plain ones (twoshot.cu).
#include "twoshot.cuh"

namespace arfusion::detail {

cudaError_t launchTwoShotExtended(const DeviceComm& comm, const RowArgs& args, const FusedLaunch& launch,
                                  cudaStream_t stream) {
  if (launch.lamport) return launchFamily<TwoShotLamport, Epilogues::kExtended>(comm, args, launch, stream);
  return launchFamily<TwoShot, Epilogues::kExtended>(comm, args, launch, stream);
}

cudaError_t forEachTwoShotExtendedKernel(const KernelVisitor& visit) {
  const cudaError_t e = forEachFamilyKernel<TwoShot, Epilogues::kExtended>(visit);
  return e != cudaSuccess ? e : forEachFamilyKernel<TwoShotLamport, Epilogues::kExtended>(visit);
}

}  // namespace arfusion::detail
