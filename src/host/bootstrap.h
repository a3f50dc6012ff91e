// How ranks exchange small host records at creation: through the engine's NCCL communicator, or
// (test groups) through shared memory of one process. Nothing else in arfusion talks between ranks
// on the host.
#pragma once

#include <memory>

#include "arfusion/arfusion.h"

namespace arfusion::detail {

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  // Every rank contributes `bytes` bytes; `all` receives world * bytes, in rank order. Collective.
  virtual Status allGather(const void* mine, void* all, size_t bytes) = 0;
};

// Through ncclAllGather on a private stream of `device` (the caller's current device).
Status makeNcclBootstrap(ncclComm_t nccl, std::unique_ptr<Bootstrap>* out);

// In-process exchange for `world` threads; one shared object, one Bootstrap per rank.
class LocalExchange;
std::shared_ptr<LocalExchange> makeLocalExchange(int world);
std::unique_ptr<Bootstrap> makeLocalBootstrap(std::shared_ptr<LocalExchange> shared, int rank);

}  // namespace arfusion::detail
