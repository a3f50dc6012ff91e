// What both creation-time checks share: device buffers, captured graphs, graph timing, and the
// checks' entry points (selfcheck.cpp, speedcheck.cpp). docs/design.md, "Creation-time checks".
#pragma once

#include <string>
#include <vector>

#include "arch.h"
#include "communicator.h"
#include "errors.h"

namespace arfusion::detail {

// The GridDependency self-check: *check and a one-line *outcome, the same on every rank. Fails
// creation (every rank alike) only if the check itself could not run.
Status selfCheck(Communicator* c, GridDepCheck* check, std::string* outcome);
// The speed check of the fused one-shot against the NCCL path: replaces c->table.
Status speedCheck(Communicator* c);

// Device allocations freed on every path.
struct DeviceBuffers {
  std::vector<void*> ptrs;
  ~DeviceBuffers();
  Status alloc(void** p, size_t bytes);
};

// Captured graphs, destroyed on every path (before the buffers they use: declare it after them).
struct GraphExecs {
  std::vector<cudaGraphExec_t> v;
  ~GraphExecs();
};

// A stream and two events, released on every path. capture() records `calls` back-to-back calls
// of `plan` as a CUDA graph; time() replays one 4 times: the best of the last 3, in us per call.
// Every rank must capture and time the same plans in the same order (fused calls wait on their
// peers, NCCL calls pair with theirs).
struct GraphTimer {
  cudaStream_t stream = nullptr;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  ~GraphTimer();
  Status init();
  // Once capturing, issues every call even after one failed (the first failure is returned), so
  // that this rank's captured NCCL calls stay in step with its peers'. (A failure to begin the
  // capture returns at once: issuing the calls uncaptured would run them.)
  Status capture(Communicator* c, const RowArgs& args, const Plan& plan, int calls, GraphExecs* into);
  // Runs all 4 replays even after one failed (the first failure is returned): a replay this rank
  // skipped would leave its peers' NCCL calls in that replay unpaired.
  Status time(cudaGraphExec_t exec, int calls, float* us);
};

// The first of several failures, with its message: for sequences that must run to their end on
// every rank whatever fails along the way.
struct FirstFailure {
  Status st = Status::kSuccess;
  std::string message;
  void keep(Status one) {
    if (one != Status::kSuccess && st == Status::kSuccess) {
      st = one;
      message = lastError();
    }
  }
  Status result() const { return st == Status::kSuccess ? st : fail(st, message); }
};

// The helper kernel of the self-check (kernels/selfcheck.cu): triggers its dependents at once, then
// spins delay_ns and fills buf with a pattern of (rank, generation).
cudaError_t launchDelayedFill(void* buf, int64_t n, int rank, uint32_t gen, unsigned long long delay_ns, cudaStream_t stream);

}  // namespace arfusion::detail
