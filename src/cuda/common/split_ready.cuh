// A split's partial lse slot as its readiness flag (sparse_decode config.h SMLA_COMBINE_EARLY):
// each attention CTA of a split writes kLseUnwritten into its heads' slots before it lets the
// combine launch, and its real lse last, with release semantics, after its partial rows; the
// combine reads a head's rows once none of its splits' slots holds kLseUnwritten (acquire).
#pragma once

#include <cstdint>

#include "cuda/common/pdl.cuh"

namespace smla::cuda {

// A signalling NaN: arithmetic never produces one (a computed NaN is quiet), so no lse is it.
inline constexpr uint32_t kLseUnwritten = 0x7f800badu;

__device__ __forceinline__ void mark_lse_unwritten(float* slot) { *reinterpret_cast<uint32_t*>(slot) = kLseUnwritten; }

// A release fence, then strong stores: each store releases everything before the fence (PTX's
// release pattern), with one fence for all of a thread's heads instead of one a store.
__device__ __forceinline__ void fence_release_gpu() { asm volatile("fence.acq_rel.gpu;\n" ::: "memory"); }
__device__ __forceinline__ void store_lse_relaxed(float* slot, float lse) {
  asm volatile("st.relaxed.gpu.global.f32 [%0], %1;\n" ::"l"(slot), "f"(lse) : "memory");
}

__device__ __forceinline__ bool lse_written(const float* slot) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(slot) : "memory");
  return v != kLseUnwritten;
}

// The warp waits until every split j < n of its head has stored its lse (slot(j): its address);
// `real` is warp-uniform. After ~10^4 polls (milliseconds) it waits for the whole attention grid
// instead (griddepcontrol.wait), which is always correct. The warp's later reads of the splits'
// rows are ordered after the polls by the __syncwarp.
template <class Slot>
__device__ __forceinline__ void await_splits(Slot slot, int n, bool real, int lane) {
  if (real) {
    for (int polls = 0;; ++polls) {
      bool in = true;
      for (int j = lane; j < n; j += 32) in &= lse_written(slot(j));
      if (__all_sync(0xffffffffu, in)) break;
      if (polls == 10000) {
        pdl_wait();
        break;
      }
      __nanosleep(64);
    }
  }
  __syncwarp();
}

}  // namespace smla::cuda
