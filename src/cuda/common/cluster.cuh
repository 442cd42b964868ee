// Thread-block clusters (sm_90): a CTA's rank, cluster-wide barriers, and writes into a peer
// CTA's shared memory that complete on the peer's mbarrier (st.async), so two CTAs can share
// the rows one of them gathered.
#pragma once

#include <cstdint>

namespace smla::cuda {

__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}

// Every thread of every CTA of the cluster (not .aligned: callers may be in diverged warps).
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}

// The shared::cluster address of `smem_addr` (a shared::cta address) in CTA `rank`.
__device__ __forceinline__ uint32_t map_to_cta(uint32_t smem_addr, uint32_t rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(smem_addr), "r"(rank));
  return r;
}

// 16 / 4 bytes into another CTA's shared memory; the bytes complete the transaction count of
// the mbarrier `bar` (a shared::cluster address in the same CTA as `dst`).
__device__ __forceinline__ void st_async_v4(uint32_t dst, const uint4& v, uint32_t bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];\n" ::"r"(dst),
               "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "r"(bar)
               : "memory");
}
__device__ __forceinline__ void st_async_b32(uint32_t dst, uint32_t v, uint32_t bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];\n" ::"r"(dst), "r"(v), "r"(bar)
               : "memory");
}

// 16 bytes into another CTA's shared memory, a plain (weak) store: nothing completes on it.
__device__ __forceinline__ void st_cluster_v4(uint32_t dst, const uint4& v) {
  asm volatile("st.shared::cluster.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

// `bytes` (a multiple of 16) from this CTA's shared memory to a shared::cluster address of a
// peer CTA by the TMA unit, completing as transaction bytes on the peer's mbarrier `bar`. The
// source must be written before (a generic-proxy write needs fence.proxy.async first).
__device__ __forceinline__ void bulk_copy_s2peer(uint32_t dst, uint32_t src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
               "r"(src), "r"(bytes), "r"(bar)
               : "memory");
}

// Arrive once on an mbarrier of any CTA of the cluster. The default (CTA-scope) semantics: a
// consumer that releases a tile it read with wgmma has nothing of its own to publish, and a
// cluster-scope release costs a fence per arrive (measured: a sixth of the consumers' stalls).
__device__ __forceinline__ void mbar_arrive_cluster(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

}  // namespace smla::cuda
