// Shared-memory barriers of the warp-specialized kernels: mbarriers (producer -> consumer
// "full" and consumer -> producer "empty" handshakes, phase-tracked) and named CTA barriers
// between consumer warpgroups (ids 1..15; 0 is __syncthreads).
#pragma once

#include <cstdint>

namespace smla::cuda {

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(bar))),
               "r"(count)
               : "memory");
}

// Makes this thread's mbarrier.init visible to the async proxy (bulk copies completing on it).
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// Arrive once (release at CTA scope: this thread's earlier writes are visible to the waiters).
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(bar)))
               : "memory");
}

// Arrive once if `pred`, as one predicated instruction (no branch: code that runs while wgmmas
// are in flight must not diverge, or ptxas serializes them).
__device__ __forceinline__ void mbar_arrive_if(uint64_t* bar, bool pred) {
  asm volatile(
      "{\n.reg .pred p;\n"
      "setp.ne.u32 p, %1, 0;\n"
      "@p mbarrier.arrive.shared::cta.b64 _, [%0];\n}\n" ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(bar))),
      "r"(static_cast<uint32_t>(pred))
      : "memory");
}

// An arrival that completes once every cp.async this thread issued before it has landed (the
// barrier's count includes it: .noinc); the thread goes on without waiting. The data are
// generic-proxy writes: a waiter that reads them with wgmma fences after its wait.
__device__ __forceinline__ void mbar_arrive_on_cp_async(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(
                   static_cast<uint32_t>(__cvta_generic_to_shared(bar)))
               : "memory");
}

// Arrive once and expect `bytes` more of asynchronous writes (st.async, bulk copies) in this phase.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(
                   static_cast<uint32_t>(__cvta_generic_to_shared(bar))),
               "r"(bytes)
               : "memory");
}

// Blocks until the phase of parity `parity` has completed (acquire at CTA scope).
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(bar));
  asm volatile(
      "{\n.reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n}\n" ::"r"(addr),
      "r"(parity)
      : "memory");
}

// Named barrier `id` over `threads` threads: sync waits for all; arrive only signals.
// The sync is the unaligned barrier.sync, not bar.sync (= barrier.sync.aligned, which asks every
// participating thread to execute the same instruction): warp-specialized roles meet at one
// barrier from different code (both consumer warpgroups' Q loads, kernel.cuh load_q), which
// compute-sanitizer's synccheck reports as divergent under bar.sync. Same BAR.SYNC instructions;
// times level in a same-call A/B (docs/PERF.md, thirty-eighth pass).
__device__ __forceinline__ void named_bar_sync(int id, int threads) {
  asm volatile("barrier.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_bar_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Register budget of a warpgroup (sm_90a; the kernel needs a register cap at entry).
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
// From the kernel's entry budget kEntry to kRegs (inc below it is an illegal instruction).
template <int kRegs, int kEntry>
__device__ __forceinline__ void setmaxnreg_to() {
  if constexpr (kRegs > kEntry) setmaxnreg_inc<kRegs>();
  else if constexpr (kRegs < kEntry) setmaxnreg_dec<kRegs>();
}

}  // namespace smla::cuda
