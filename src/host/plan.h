// Strategy selection: the pure function that turns a shape into a Plan (plan.cpp), over the agreed
// topology and the Auto table (auto_table.h).
#pragma once

#include <string>

#include "arfusion/arfusion.h"
#include "auto_table.h"
#include "topology.h"

namespace arfusion::detail {

size_t elemSize(DType dtype);

struct PlanInputs {
  Topology topo;
  Strategy strategy = Strategy::kAuto;          // Config or commSetStrategy
  SyncMode sync = SyncMode::kAuto;              // Config or commSetStrategy
  SyncMode sync_auto = SyncMode::kFlagBarrier;  // the arch policy, after the self-check
  std::string sync_auto_reason;
  bool griddep_allowed = true;                  // a forced GridDependency may be used (arch.h)
  std::string griddep_refusal;
  const AutoTable* table = nullptr;
  int test_row_blocks = 0;                      // test only: the one-shot's cluster size where it fits
};

// Grid of a fused strategy for this shape: false (with a reason) if a row does not fit a region.
// The same for both sync modes.
bool fusedGeometry(const Topology& topo, Strategy strategy, const Shape& shape, int* blocks, int* rows_per_step,
                   std::string* why);

// Whether a fused call runs a Lamport kernel (the data is its own ready flag, sync.cuh): every
// GridDependency one-shot, and a GridDependency two-shot whose blocks take one unit each and whose
// unit (the RS and AG parts, 2 (n-1) R rows, and the headers) fits a Lamport region. A function of
// the plan and creation constants only, so every rank picks the same kernel.
bool usesLamport(const Topology& topo, const Shape& shape, Strategy strategy, SyncMode sync, int blocks,
                 int rows_per_step);

// The decision. A forced fused strategy that cannot run, or a forced GridDependency that is refused,
// returns kNotSupported with the reason in lastError(); Auto never fails: it falls back to the NCCL path (or, in a group without NCCL, to a
// fused strategy that fits).
Status makePlan(const PlanInputs& in, const Shape& shape, Plan* out);

}  // namespace arfusion::detail
