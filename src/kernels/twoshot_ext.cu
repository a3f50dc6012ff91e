// The two-shot's extended-epilogue instantiations (RowArgs::ext) shared by several formats or none:
// the same kernels (twoshot.cuh) with kExt = true, the kernel without a quantized output and the
// one for every format (TwoShotSet::kShared); the kernels per format are twoshot_ext_formats.cu's.
// Each file builds in parallel with the others.
#include "twoshot.cuh"

namespace arfusion::detail {

cudaError_t launchTwoShotExtended(const DeviceComm& comm, const RowArgs& args, const FusedLaunch& launch,
                                  cudaStream_t stream) {
  const int vpt = fewestVectorsPerThread(args.hidden / elementsPerVector(launch.dtype));
  if (perFormatTwoShot(args.quant, comm.world, launch.dtype == DType::kFloat32, vpt))
    return launchTwoShotPerFormat(comm, args, launch, stream);
  return launchTwoShotSet<TwoShotSet::kShared, Epilogues::kExtended>(comm, args, launch, stream);
}

cudaError_t forEachTwoShotExtendedKernel(const KernelVisitor& visit) {
  const cudaError_t e = forEachTwoShotSetKernel<TwoShotSet::kShared, Epilogues::kExtended>(visit);
  return e != cudaSuccess ? e : forEachTwoShotPerFormatKernel(visit);
}

}  // namespace arfusion::detail
