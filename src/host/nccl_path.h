// The NCCL path: ncclAllReduce, then arfusion's single-GPU add-RMSNorm kernel.
#pragma once

#include "arfusion/arfusion.h"
#include "kernels/kernels.h"

namespace arfusion::detail {

// Runs `args` through NCCL on communicator c (a one-rank communicator runs the epilogue alone).
Status ncclPath(Communicator* c, const RowArgs& args, DType dtype, bool vector, cudaStream_t stream);

}  // namespace arfusion::detail
