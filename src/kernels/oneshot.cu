// The one-shot's launch and kernel enumeration, plain epilogue (the kernels: oneshot.cuh; the
// extended epilogue's instantiations: oneshot_ext.cu, built in parallel with this file).
#include "oneshot.cuh"

namespace arfusion::detail {

// Vectors per thread of the in-register epilogue: the fewest the row needs (dispatchVariant). Code
// size is latency here: a decode call runs each instruction about once, on an SM whose caches have
// not seen the kernel, so a kernel should not jump over unrolled bodies its row does not need.
cudaError_t launchOneShot(const DeviceComm& comm, const RowArgs& args, const FusedLaunch& launch,
                          cudaStream_t stream) {
  // A row over a cluster: the Lamport kernel, a power of two of blocks up to kMaxRowBlocks, one
  // row per cluster and launch (the norm's mbarrier serves one row).
  const int rb = launch.row_blocks;
  if (rb > 1 && (!launch.lamport || rb > kMaxRowBlocks || (rb & (rb - 1)) != 0 || launch.rows_per_step != 1 ||
                 launch.blocks % rb != 0 || args.tokens > launch.blocks / rb))
    return cudaErrorInvalidConfiguration;
  if (args.ext) return launchOneShotExtended(comm, args, launch, stream);
  return launchFamily<OneShot, Epilogues::kPlain>(comm, args, launch, stream);
}

cudaError_t forEachOneShotKernel(const KernelVisitor& visit) {
  const cudaError_t e = forEachFamilyKernel<OneShot, Epilogues::kPlain>(visit);
  return e != cudaSuccess ? e : forEachOneShotExtendedKernel(visit);
}

cudaError_t oneShotMaxClusters(int row_blocks, int* clusters) {
  *clusters = 0;
  int device = 0, cluster_launch = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&cluster_launch, cudaDevAttrClusterLaunch, device);
  if (e != cudaSuccess || !cluster_launch) return e;  // no cluster launch on this device: none fit
  int fewest = INT_MAX;
  // The plain epilogue only: the extended one has no cluster kernels.
  e = forEachVariant<Epilogues::kPlain>([&](auto v) {
    using V = decltype(v);
    const FusedConfig c(true, row_blocks, row_blocks, nullptr);  // one cluster, as launchOneShot launches it
    for (int world : kKernelWorlds) {  // the two-rank kernels and the others
      int n = 0;
      const cudaError_t err = cudaOccupancyMaxActiveClusters(
          &n, OneShot::kernel<typename V::type, V::vec, V::vpt>(SyncMode::kGridDependency, true, false, world), &c.cfg);
      if (err != cudaSuccess) return err;
      fewest = n < fewest ? n : fewest;
    }
    return cudaSuccess;
  });
  *clusters = e == cudaSuccess ? fewest : 0;
  return e;
}

}  // namespace arfusion::detail
