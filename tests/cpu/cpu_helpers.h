// Helpers of the CPU tests: an environment from a map, the measured topology, a plan of it.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "arfusion/arfusion.h"
#include "host/auto_table.h"
#include "host/communicator.h"
#include "host/env.h"
#include "host/plan.h"
#include "host/workspace.h"

namespace cputest {

using namespace arfusion;
using namespace arfusion::detail;

inline EnvLookup mapEnv(std::map<std::string, std::string> m) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(m));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

inline Topology h200Pair() {
  Topology t;
  t.world = 2;
  t.has_nccl = true;
  t.fusion_ok = true;
  t.cc_major = 9;
  t.cc_minor = 0;
  t.link = LinkType::kNVLink;
  t.max_blocks = 132;
  const WorkspaceLayout layout(size_t(256) << 20, 2);  // the default workspace: regions of two sizes
  t.region_bytes = layout.regionBytes(132);
  t.lamport_region_bytes = layout.lamportRegionBytes(132);
  return t;
}

inline Plan planFor(const Topology& t, Shape s, Strategy strat = Strategy::kAuto, SyncMode sync = SyncMode::kAuto,
             Status* st_out = nullptr) {
  AutoTable table = builtinTable(t);
  PlanInputs in;
  in.topo = t;
  in.strategy = strat;
  in.sync = sync;
  in.sync_auto = SyncMode::kGridDependency;
  in.sync_auto_reason = "test";
  in.table = &table;
  Plan p;
  const Status st = makePlan(in, s, &p);
  if (st_out) *st_out = st;
  return p;
}

}  // namespace cputest
