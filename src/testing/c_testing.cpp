// The test-only C entry points (testing_c.h) over the test hooks (testing.h).
#include "testing/testing_c.h"

#include <new>
#include <vector>

#include "host/c_handle.h"
#include "host/errors.h"
#include "kernels/kernels.h"
#include "testing/testing.h"

extern "C" arfusion_status_t arfusion_testing_create_group(int world, const int* devices, const arfusion_config_t* config,
                                                           int max_blocks, arfusion_comm_t* comms) {
  using arfusion::Status;
  arfusion::detail::clearError();
  if (!comms || !devices || world < 1 || world > arfusion::detail::kMaxRanks)
    return static_cast<arfusion_status_t>(
        arfusion::detail::fail(Status::kInvalidArgument, "arfusion_testing_create_group: world must be 1..8, devices and comms non-null"));
  for (int r = 0; r < world; ++r) comms[r] = nullptr;
  if (arfusion_status_t s = arfusion::detail::checkConfigC(config); s != ARFUSION_SUCCESS) return s;
  std::vector<arfusion::Communicator*> group;
  const Status s = arfusion::testing::createGroup(world, devices, arfusion::detail::configFromC(config), &group, max_blocks);
  if (s != Status::kSuccess) return static_cast<arfusion_status_t>(s);
  for (int r = 0; r < world; ++r) comms[r] = new arfusion_comm{group[r], nullptr};
  return ARFUSION_SUCCESS;
}
