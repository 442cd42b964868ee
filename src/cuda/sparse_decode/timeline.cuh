// Diagnostic build (SMLA_SD_TIMELINE=1): %globaltimer marks of a few CTAs per launch (the first
// two, the middle one and the last of grid.x, head tile 0, token 0), printed by each at its
// exit: where a CTA's time goes outside its per-block loop. SMLA_SD_TIMELINE=2 adds per-block
// events of the 16/32-row bulk-copy CTAs (where each block waits). SMLA_SD_TIMELINE=3 also keeps
// per-unit marks of four persistent bf16-row CTAs in global memory, printed by a kernel of their
// own after each launch (unit_mark): no printf in the measured kernel. SMLA_SD_TIMELINE=4 keeps
// only per-block marks of four 32-row roles CTAs (consumer_narrow_raw_ds32_roles.cuh and its
// producer) in global memory, printed the same way (role_mark; bench/roles_timeline.py
// summarizes them): no other mark, no printf anywhere. Off (no code) in every other build.
// (ptxas serializes the wgmmas of the 32- and 64-row fp8_ds_mla kernels in the builds 1-3, C7510,
// for the printf call: time those from the marks' differences only with care.)
#pragma once

#include <cstdint>
#include <cstdio>

#include <cuda_runtime.h>

#include "cuda/common/globaltimer.cuh"

namespace smla::cuda::sparse_decode_family {

#ifndef SMLA_SD_TIMELINE
#define SMLA_SD_TIMELINE 0
#endif
inline constexpr bool kTimeline = SMLA_SD_TIMELINE >= 1 && SMLA_SD_TIMELINE <= 3;
inline constexpr bool kBlockTimeline = SMLA_SD_TIMELINE == 2;
inline constexpr bool kUnitTimeline = SMLA_SD_TIMELINE == 3;
inline constexpr bool kRolesTimeline = SMLA_SD_TIMELINE == 4;
// Whether a kernel takes the roles' per-block marks (role_mark): the run-time roles kernel's.
template <bool kDs32Roles>
inline constexpr bool kRoleMarks = kRolesTimeline && kDs32Roles;

// Marks: 0 entry, 1 after the grid-dependency wait, 2 barriers initialized, 3 Q in shared
// memory (consumer), 4 first K tile full (consumer), 5 last block done (consumer), 6 consumer
// warpgroup 0's epilogue issued, 7 first block stored (producer), 8 producer done, 9 exit;
// narrow_epilogue of the raw-ring tiles (thread 128, the second consumer warpgroup's first):
// 10 entered, 11 both warpgroups' row states exchanged, 12 O^T in shared memory, 13 stored.
inline constexpr int kMarks = 14;

// The index (0..3) of a CTA whose marks the timelines keep (the printed ones, and those of
// SMLA_SD_TIMELINE 3 and 4 in global memory): CTAs 0, 1, grid / 2 and grid - 1 of grid.x at
// y = z = 0; -1 for the others.
__device__ __forceinline__ int marked_cta() {
  const unsigned g = gridDim.x, b = blockIdx.x;
  return blockIdx.y != 0 || blockIdx.z != 0 ? -1 : b == 0 ? 0 : b == 1 ? 1 : b == g / 2 ? 2 : b == g - 1 ? 3 : -1;
}

__device__ __forceinline__ uint64_t* timeline_slots() {
  __shared__ uint64_t slots[kMarks];
  return slots;
}

__device__ __forceinline__ void timeline_mark(int id) {
  if constexpr (kTimeline) {
    const uint64_t t = globaltimer_ns();
    if (id == 0)  // marks a kernel never reaches print as +0
      for (int k = 1; k < kMarks; ++k) timeline_slots()[k] = t;
    timeline_slots()[id] = t;
  }
}

// Per-block events (kBlockTimeline), ns after the CTA's entry, of its first kEventBlocks blocks.
// Producer (its first thread): 0 the raw rows are in, 1 the K tile is free, 2 the block is
// handed over ("full"), 3 the raw block is reissued. Consumer (thread 0): 4 the tile is full,
// 5 S^T is done, 6 P V is done (the tile released).
inline constexpr int kEvents = 7, kEventBlocks = 64;

__device__ __forceinline__ uint32_t* block_events() {
  __shared__ uint32_t events[kEvents * kEventBlocks];
  return events;
}

__device__ __forceinline__ void block_event(int e, int i) {
  if constexpr (kBlockTimeline) {
    if (i >= kEventBlocks) return;
    block_events()[e * kEventBlocks + i] = static_cast<uint32_t>(globaltimer_ns() - timeline_slots()[0]);
  }
}

// blocks: the CTA's block count (kBlockTimeline prints one line per block).
__device__ __forceinline__ void timeline_print(int blocks = 0) {
  if constexpr (kTimeline) {
    if (marked_cta() < 0) return;
    if constexpr (kBlockTimeline) {
      const uint32_t* ev = block_events();
      for (int i = 0; i < blocks && i < kEventBlocks; ++i)
        printf("timeline cta %u block %d ns raw_in %u tile_free %u handed %u reissued %u | full %u s_done %u pv_done %u\n",
               blockIdx.x, i, ev[i], ev[kEventBlocks + i], ev[2 * kEventBlocks + i], ev[3 * kEventBlocks + i],
               ev[4 * kEventBlocks + i], ev[5 * kEventBlocks + i], ev[6 * kEventBlocks + i]);
    }
    uint32_t sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    const uint64_t* s = timeline_slots();
    printf("timeline cta %u sm %u entry %llu | +ns wait %lld init %lld q %lld first_full %lld loop_end %lld epilogue %lld "
           "first_stored %lld producer_done %lld exit %lld | wg1 epilogue in %lld states %lld o_smem %lld stored %lld\n",
           blockIdx.x, sm, static_cast<unsigned long long>(s[0]), static_cast<long long>(s[1] - s[0]),
           static_cast<long long>(s[2] - s[0]), static_cast<long long>(s[3] - s[0]), static_cast<long long>(s[4] - s[0]),
           static_cast<long long>(s[5] - s[0]), static_cast<long long>(s[6] - s[0]), static_cast<long long>(s[7] - s[0]),
           static_cast<long long>(s[8] - s[0]), static_cast<long long>(s[9] - s[0]), static_cast<long long>(s[10] - s[0]),
           static_cast<long long>(s[11] - s[0]), static_cast<long long>(s[12] - s[0]), static_cast<long long>(s[13] - s[0]));
  }
}

// Per-unit marks (kUnitTimeline) of the persistent CTAs 0, 1, grid / 2 and grid - 1, their first
// kTlUnits units, %globaltimer ns. Events: 0 WG0 at the unit's start, 1 its Q landed, 2 its first
// K tile full, 3 its last QK^T done, 4 its last block done, 5 its epilogue done, 6 WG1's
// epilogue done, 7 the producer at the unit's start, 8 the unit's Q issued, 9 the producer's
// last block handed over, 10 the CTA's entry (unit 0 only); WG0's epilogue: 11 WG1 past its
// last P, 12 final factors out, 13 its O rows stored (or handed to WG1); the producer's first
// thread at block 0: 14 before its tile's wait, 15 the tile free, 16 its copies issued, 17 its
// rows landed and handed over. One copy per translation unit: the kernels of an instantiation
// file and their print kernel share it.
inline constexpr int kTlCtas = 4, kTlUnits = 40, kTlEvents = 18;
#if SMLA_SD_TIMELINE == 3
static __device__ uint64_t g_unit_marks[kTlCtas][kTlUnits][kTlEvents];

// Event e of the CTA's unit k at time t (default: now).
__device__ __forceinline__ void unit_mark(int e, int k, uint64_t t = 0) {
  const int c = marked_cta();
  if (c < 0 || k >= kTlUnits) return;
  g_unit_marks[c][k][e] = t == 0 ? globaltimer_ns() : t;
}

// One thread prints the marks, ns after CTA 0's entry, one line per CTA and unit, and clears them.
static __global__ void unit_timeline_print() {
  const uint64_t t0 = g_unit_marks[0][0][10];
  for (int c = 0; c < kTlCtas; ++c)
    for (int k = 0; k < kTlUnits; ++k) {
      uint64_t* m = g_unit_marks[c][k];
      if (m[0] == 0) continue;
      long long d[kTlEvents];
      for (int e = 0; e < kTlEvents; ++e) d[e] = m[e] == 0 ? -1 : static_cast<long long>(m[e] - t0);
      printf("unit_timeline cta %d k %d | wg0 start %lld q %lld full %lld last_qk %lld loop_end %lld epilogue %lld | wg1 epilogue %lld"
             " | producer start %lld q_issued %lld last_handed %lld | entry %lld | wg0 p_free %lld factors %lld o_stored %lld"
             " | block0 tile_wait %lld tile_free %lld issued %lld handed %lld\n",
             c, k, d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8], d[9], d[10], d[11], d[12], d[13], d[14], d[15],
             d[16], d[17]);
      for (int e = 0; e < kTlEvents; ++e) m[e] = 0;
    }
}

// After each launch of a persistent kernel (instantiate.cuh launch_kernel).
inline void print_unit_timeline(cudaStream_t stream) { unit_timeline_print<<<1, 1, 0, stream>>>(); }
#else
__device__ __forceinline__ void unit_mark(int, int, uint64_t = 0) {}
inline void print_unit_timeline(cudaStream_t) {}
#endif

// Per-block marks (kRolesTimeline) of the 32-row roles CTAs 0, 1, grid / 2 and grid - 1 (head tile
// 0), their first kRlBlocks blocks, %globaltimer ns. Events of block i: 0 the producer's first
// lane past the slot's empty wait, 1 its copy issued; WG0 (thread 0): 2 past the full wait, 3 S^T
// in registers, 4 the softmax done, 5 past the wait for block i - 1's P V (kBarRolesPFree), 6 P^T
// and the factors handed over; WG1 (thread 128): 7 past the hand-over, 8 its P V drained. Block
// 0 also holds the CTA's 9 entry, 10 WG0's Q in shared memory, 11 WG1's epilogue done, 12 past
// the wait for the grid before it (pdl_wait), and the start's steps on thread 0: 13 the barriers
// initialized (past __syncthreads), 14 past WG0's setmaxnreg, 15 Q's loads returned (the first row's
// maximum taken), 16 Q converted into shared memory (before load_q_f16's last barrier). 17 (block
// i): WG1 past its split S^T of block i + 1 (SMLA_SD_DS32_ROLES_SPLIT_ST), before the hand-over's wait.
// WG1's epilogue (block 0, narrow_epilogue): 18 entered, 19 the heads' sums through shared memory,
// 20 O^T in shared memory and past the barrier with WG0's helpers, 21 its stores issued.
inline constexpr int kRlBlocks = 40, kRlEvents = 22;
#if SMLA_SD_TIMELINE == 4
static __device__ uint64_t g_role_marks[kTlCtas][kRlBlocks][kRlEvents];

// Event e of the chosen CTA's block i, now.
__device__ __forceinline__ void role_mark(int e, int i) {
  const int c = marked_cta();
  if (c < 0 || i >= kRlBlocks) return;
  g_role_marks[c][i][e] = globaltimer_ns();
}

// One thread prints the marks, ns after the CTA's entry, one line per CTA and block, and clears them.
static __global__ void role_timeline_print() {
  for (int c = 0; c < kTlCtas; ++c) {
    const uint64_t t0 = g_role_marks[c][0][9];
    if (t0 == 0) continue;
    for (int i = 0; i < kRlBlocks; ++i) {
      uint64_t* m = g_role_marks[c][i];
      if (i > 0 && m[2] == 0) continue;
      long long d[kRlEvents];
      for (int e = 0; e < kRlEvents; ++e) d[e] = m[e] == 0 ? -1 : static_cast<long long>(m[e] - t0);
      printf("role_timeline cta %d block %d | producer free %lld issued %lld | wg0 full %lld st %lld softmax %lld p_free %lld"
             " handed %lld | wg1 taken %lld pv_done %lld | q %lld epilogue_done %lld pdl %lld"
             " | start bars %lld regs %lld q_loaded %lld q_stored %lld | wg1 split %lld"
             " | end in %lld sums %lld obuf %lld stored %lld\n",
             c, i, d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8], d[10], d[11], d[12], d[13], d[14], d[15], d[16], d[17],
             d[18], d[19], d[20], d[21]);
      for (int e = 0; e < kRlEvents; ++e) m[e] = 0;
    }
  }
}

// After each launch of the run-time roles kernel (instantiate.cuh launch_kernel).
inline void print_role_timeline(cudaStream_t stream) { role_timeline_print<<<1, 1, 0, stream>>>(); }
#else
__device__ __forceinline__ void role_mark(int, int) {}
inline void print_role_timeline(cudaStream_t) {}
#endif

}  // namespace smla::cuda::sparse_decode_family
