// Running a workload on one backend: timing (timing.h), FLOP/byte counting (perf_count.h)
// and judging sampled rows (check.h). Shared by `smla run` and `smla bench`.
#pragma once

#include <cstdint>
#include <string>

#include "cli/check.h"
#include "cli/timing.h"
#include "cli/workloads.h"

namespace smla::cli {

struct MeasureOptions {
  int warmup = 1;
  int iters = 3;
  bool graph = true;  // CUDA: capture the call once and time graph replays (as engines run decode)
  CallHook hook = nullptr;  // told after calls (progress lines)
};

struct Measurement {
  Backend backend = Backend::cpu;
  int64_t units = 0;
  Timing timing;
  PerfCount perf;
  std::string error;  // the library's message when the call was rejected or failed
  bool ok() const { return error.empty(); }
};

// Poisons backend b's outputs, times b on the first `units` units (CUDA: the workload must be
// uploaded) and fetches the result. Library errors are caught into Measurement::error.
Measurement measure(Workload& w, Backend b, int64_t units, const MeasureOptions& o);

// `count` sampled rows among the first `units` units of backend b's result, judged against
// the float64 recomputation.
Comparison check_against_f64(const Workload& w, Backend b, int64_t units, int count, Rng& rng);
// The same rows judged against another backend's result (which must cover those units).
Comparison check_against_backend(const Workload& w, Backend b, Backend ref, int64_t units, int count, Rng& rng);

}  // namespace smla::cli
