// Timing one call the way docs/BENCHMARKS.md measures (FlashMLA was timed so too): warm-ups,
// then the median of repeated calls; on CUDA, events around each call with a 512 MB memset
// before it so every call starts from a cold L2.
#pragma once

#include <functional>

namespace smla::cli {

struct Timing {
  double median_ms = 0;
  double min_ms = 0;
  int iters = 0;
  // Medians of the first and the last third of the calls in the order they ran (0 below 9
  // calls): a long run that slows down as it goes (the GPU's power cap lowering its clocks)
  // shows here, where the median alone hides it.
  double first_third_ms = 0, last_third_ms = 0;
};

// Told after calls: phase "warm-up" or "timed", calls done of that phase, its total (for
// progress lines; it must not print to stdout).
using CallHook = std::function<void(const char* phase, int done, int total)>;

// Wall clock (std::chrono::steady_clock) around each call; `hook` after every call.
Timing time_cpu(const std::function<void()>& call, int warmup, int iters, const CallHook& hook = {});

// CUDA events on cuda_stream() around each call; the call gets that stream. With `graph`, the
// call is captured once into a CUDA graph and its replays are timed (launch gaps excluded, as
// docs/BENCHMARKS.md times FlashMLA); the memset stays outside the graph. `hook` only after the warm-up
// and after the timed calls: a host wait between calls would change what is timed. Throws
// smla::RuntimeError in a build without CUDA.
Timing time_cuda(const std::function<void(void* stream)>& call, int warmup, int iters, bool graph = false,
                 const CallHook& hook = {});

// The device-to-device copy ceiling (GB/s, read + write counted) from a 1 GiB cudaMemcpy,
// measured like the calls; 0 in a build without CUDA.
double cuda_copy_ceiling_gbps();

}  // namespace smla::cli
