#include "check_faults.h"

namespace arfusion::detail {

CheckFaults& checkFaults() {
  static CheckFaults faults{};
  return faults;
}

void storeFault(std::atomic<int> (&faults)[kMaxRanks], int rank, int value) {
  if (rank < 0) {
    for (auto& f : faults) f.store(value);
  } else if (rank < kMaxRanks) {
    faults[rank].store(value);
  }
}

bool speedCheckForced(int rank) {
  return rank >= 0 && rank < kMaxRanks && checkFaults().speed_check[rank].load() != kSpeedCheckNoFault;
}

}  // namespace arfusion::detail
