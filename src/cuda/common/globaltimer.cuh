// The GPU's global nanosecond timer (%globaltimer), for the timeline builds' marks and the
// microbenchmarks: one clock for every SM, so marks of different CTAs compare.
#pragma once

#include <cstdint>

namespace smla::cuda {

__device__ __forceinline__ uint64_t globaltimer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

}  // namespace smla::cuda
