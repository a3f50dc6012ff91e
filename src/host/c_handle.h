// The C ABI's handle and config conversion (src/host/c_api.cpp), shared with the test-only C entry
// points (src/testing/c_testing.cpp) that make handles of their own.
#pragma once

#include <nccl.h>

#include "arfusion/arfusion.h"
#include "arfusion/arfusion_c.h"

// The C handle: the communicator, and the NCCL communicator it owns when arfusion_comm_create made
// it from a unique id (null when the caller passed its own, or the group has no NCCL).
struct arfusion_comm {
  arfusion::Communicator* comm = nullptr;
  ncclComm_t owned_nccl = nullptr;
};

namespace arfusion::detail {

// kInvalidArgument with a sentence for a config not made by arfusion_config_init or with an enum out
// of range; success for null (the defaults).
arfusion_status_t checkConfigC(const arfusion_config_t* c);
// The C++ Config of a checked C one (the defaults for null).
Config configFromC(const arfusion_config_t* c);

}  // namespace arfusion::detail
