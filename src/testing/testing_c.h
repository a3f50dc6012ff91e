/* Test-only C entry points, exported by libarfusion_testkit.so (the library and the test hooks in one
 * shared object, built with the tests; never installed). The Python package reaches them through
 * arfusion.testing when ARFUSION_LIBRARY names that library: local groups of several ranks on one
 * GPU, so that the Python tests run multi-rank calls on a single GPU. */
#ifndef ARFUSION_TESTING_C_H
#define ARFUSION_TESTING_C_H

#include "arfusion/arfusion_c.h"

#ifdef __cplusplus
extern "C" {
#endif

/* testing::createGroup (testing.h): `world` communicators in this process without NCCL, rank r on
 * CUDA device devices[r] (several ranks may share a GPU), each grid capped at max_blocks (0: none),
 * written to comms[0..world-1]. Destroy each with arfusion_comm_destroy. Such a group has no NCCL
 * path. On failure nothing is created and every comms[r] is null. */
ARFUSION_C_API arfusion_status_t arfusion_testing_create_group(int world, const int* devices, const arfusion_config_t* config,
                                                               int max_blocks, arfusion_comm_t* comms);

#ifdef __cplusplus
}
#endif

#endif /* ARFUSION_TESTING_C_H */
