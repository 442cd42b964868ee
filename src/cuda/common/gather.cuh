// Random-row gathers from a paged cache: 16-byte non-coherent loads that bypass L1 (each row is
// read once), L2 line prefetches that put rows in flight without registers or shared memory,
// and 16-byte cp.async (zero-filling for skipped rows).
#pragma once

#include <cstdint>

namespace smla::cuda {

__device__ __forceinline__ uint4 ldg_nc_v4(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// The same with a 256-byte L2 prefetch hint (the rest of the row's sector group comes along).
__device__ __forceinline__ uint4 ldg_nc_v4_l2_256(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

__device__ __forceinline__ uint2 ldg_nc_v2(const void* p) {
  uint2 v;
  asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "l"(p));
  return v;
}

// The 128-byte line holding `p` into L2.
__device__ __forceinline__ void prefetch_l2_line(const void* p) {
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
}

// The lines holding `p` and `p + 512` into L2, the second only where `second`: the second
// address is the first's register plus an immediate, so no instruction rebuilds an address
// in registers that a prefetch still waits to read (a long scoreboard stall behind a busy
// load/store unit).
__device__ __forceinline__ void prefetch_l2_line_and_512(const void* p, bool second) {
  asm volatile(
      "{\n\t.reg .pred s;\n\tsetp.ne.b32 s, %1, 0;\n\tprefetch.global.L2 [%0];\n\t@s prefetch.global.L2 [%0+512];\n\t}\n" ::"l"(p),
      "r"(static_cast<int>(second)));
}

// The same at `row + off`, the sum formed inside: a loop-invariant `off` then stays one 32-bit
// register instead of a 64-bit pair that the register allocator may spill.
__device__ __forceinline__ void prefetch_l2_line_and_512(const void* row, uint32_t off, bool second) {
  asm volatile(
      "{\n\t.reg .pred s;\n\t.reg .u64 a;\n\tcvt.u64.u32 a, %1;\n\tadd.u64 a, a, %0;\n\tsetp.ne.b32 s, %2, 0;\n\t"
      "prefetch.global.L2 [a];\n\t@s prefetch.global.L2 [a+512];\n\t}\n" ::"l"(row),
      "r"(off), "r"(static_cast<int>(second)));
}

// `bytes` (a multiple of 16; both addresses 16-byte aligned) global -> shared by the TMA unit,
// completing as transaction bytes on the mbarrier at shared address `bar`.
__device__ __forceinline__ void bulk_copy_g2s(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}

// The device's SM count as %nsmid gives it (it may exceed the SMs present where their ids have
// gaps). Not volatile: the compiler may compute it once.
__device__ __forceinline__ uint32_t sm_count_bound() {
  uint32_t sms;
  asm("mov.u32 %0, %%nsmid;\n" : "=r"(sms));
  return sms;
}

// Whether the grid is one wave of CTAs, for kernels that run one CTA an SM.
__device__ __forceinline__ bool grid_in_one_wave() {
  const uint32_t sms = sm_count_bound();
  return gridDim.x * gridDim.y * gridDim.z <= sms;
}

// Whether the grid's CTAs fill half the SMs or more: enough of them that their gathers contend
// for the memory (sparse_decode config.h kRawFirstFill).
__device__ __forceinline__ bool grid_fills_half_the_sms() {
  const uint32_t sms = sm_count_bound();
  return 2 * gridDim.x * gridDim.y * gridDim.z >= sms;
}

// An L2 policy that makes the lines it brings in the first to be evicted from their set: rows
// read once then replace each other, not the lines (dirty ones included) other work left in L2.
// (Giving it to a fraction of the lines only, 0.5 or 0.25, gained nothing: l2_dirty_lines.cu.)
__device__ __forceinline__ uint64_t l2_evict_first_policy() {
  uint64_t pol;  // not volatile: one per loop, hoisted
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
  return pol;
}

// bulk_copy_g2s with an L2 policy (l2_evict_first_policy).
__device__ __forceinline__ void bulk_copy_g2s(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar, uint64_t pol) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;\n" ::"r"(dst),
      "l"(src), "r"(bytes), "r"(bar), "l"(pol)
      : "memory");
}

// A box of a tensor map (3-D: coordinates c0 innermost) global -> shared by the TMA unit, laid
// out (and swizzled) as the map says, completing as transaction bytes on the mbarrier at `bar`.
// `map`: the address of a CUtensorMap in kernel parameter (grid-constant) or global memory.
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const void* map, int c0, int c1, int c2, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(
          dst),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}

// tma_load_3d with an L2 policy (l2_evict_first_policy).
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const void* map, int c0, int c1, int c2, uint32_t bar, uint64_t pol) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {%2, %3, %4}], [%5], "
      "%6;\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(bar), "l"(pol)
      : "memory");
}

// The same for a 4-D tensor map.
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const void* map, int c0, int c1, int c2, int c3, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(
          dst),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
}

// 16 bytes global -> shared; src_bytes = 0 writes zeros without reading `src`.
__device__ __forceinline__ void cp_async_16_zfill(uint32_t dst, const void* src, uint32_t src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
// cp_async_16_zfill with an L2 policy (l2_evict_first_policy).
__device__ __forceinline__ void cp_async_16_zfill(uint32_t dst, const void* src, uint32_t src_bytes, uint64_t pol) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(dst), "l"(src), "r"(src_bytes), "l"(pol)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit_group() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

}  // namespace smla::cuda
