// The two-shot's extended kernels of one quantized format each (TwoShotSet::kPerFormat: 16-bit rows
// up to 8192 on two ranks, perFormatTwoShot), in a file of their own so that they build in parallel with
// twoshot_ext.cu, which routes those calls here.
#include "twoshot.cuh"

namespace arfusion::detail {

cudaError_t launchTwoShotPerFormat(const DeviceComm& comm, const RowArgs& args, const FusedLaunch& launch,
                                   cudaStream_t stream) {
  return launchTwoShotSet<TwoShotSet::kPerFormat, Epilogues::kExtended>(comm, args, launch, stream);
}

cudaError_t forEachTwoShotPerFormatKernel(const KernelVisitor& visit) {
  return forEachTwoShotSetKernel<TwoShotSet::kPerFormat, Epilogues::kExtended>(visit);
}

}  // namespace arfusion::detail
