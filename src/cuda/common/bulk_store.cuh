// Shared -> global copies by the TMA unit (cp.async.bulk, bulk-group completion): one request
// writes a whole row where a warp's register stores would write it in 8-byte pieces.
#pragma once

#include <cstdint>

namespace smla::cuda {

// `bytes` (a multiple of 16; both addresses 16-byte aligned) from shared address `src` to
// global `dst`. The writing threads fence their stores to `src` (fence.proxy.async) first.
__device__ __forceinline__ void bulk_copy_s2g(void* dst, uint32_t src, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(dst), "r"(src), "r"(bytes)
               : "memory");
}

// Closes this thread's bulk copies into a group and waits until they have read their source:
// the shared memory may be reused and the CTA may exit (the writes complete with the grid, which
// is what a dependent grid's griddepcontrol.wait waits for).
__device__ __forceinline__ void bulk_commit_and_wait_read() {
  asm volatile("cp.async.bulk.commit_group;\ncp.async.bulk.wait_group.read 0;\n" ::: "memory");
}

// A box of a 4-D tensor map (coordinates c0 innermost) from shared address `src`, laid out (and
// swizzled) as the map says, into global memory by the TMA unit, in this thread's bulk group;
// elements past the tensor's bounds are not written. The writing threads fence their stores to
// `src` (fence.proxy.async) first.
__device__ __forceinline__ void tma_store_4d(const void* map, uint32_t src, int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(map), "r"(src),
               "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
}

}  // namespace smla::cuda
