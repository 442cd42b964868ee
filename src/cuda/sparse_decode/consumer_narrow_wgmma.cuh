// The consumer warpgroup of a 16- or 32-row CTA (h_q <= 32) on wgmma, transposed so that the 64
// keys of a block fill the M dimension and the N = kRows heads are the narrow side: no
// tensor-core work or shared-memory traffic on padded heads, and every key row is read from
// shared memory once per product.
//   S^T = K Q^T      (64 keys x N; 36 or 32 x m64nNk16, K and Q from shared memory)
//   mask, online softmax per head (a column: max over the 8 lanes and 4 warps of the keys)
//   P^T -> shared memory (N x 64, K-major, the B operand)
//   O^T += V^T P^T   (512 value rows x N; 8 x 4 x m64nNk16, V^T = the K tile read MN-major)
// At the end each head's row sum is reduced over the warps and O^T is written out through
// shared memory (the K tiles are free then) as coalesced rows.
#pragma once

#include <cstdint>

#include "cuda/common/barriers.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/common/wgmma.cuh"
#include "cuda/sparse_decode/epilogue.cuh"
#include "cuda/sparse_decode/k_tile.cuh"
#include "cuda/sparse_decode/narrow_softmax.cuh"
#include "cuda/sparse_decode/producer.cuh"
#include "cuda/sparse_decode/timeline.cuh"

namespace smla::cuda::sparse_decode_family {

// kRaw: the kNarrowBulk shared-memory plan (config.h raw_slots; two: one K tile for both
// stages), whose producers leave the K tile's proxy fence to the consumers.
// kSw: the K tiles are TMA boxes of 64 columns with the 128-byte swizzle (config.h kSwizzled).
// kMaxLogits: also write each head's largest logit (sparse prefill; m_run is exact here).
template <int kRows, int kD, int kRaw = 0, bool kSw = false, bool kMaxLogits = false>
__device__ void consume_narrow_wgmma(const AttnParams& p, const Work& w, uint8_t* smem) {
  using S = Smem<kRows, kD, kRaw>;
  using KT = KTileDesc<kD, kSw>;
  constexpr int N = kRows;        // heads: the wgmma N dimension
  constexpr int kNJ = N / 8;      // 8-head column tiles of S^T and O^T
  constexpr int kMT = kDv / 64;   // 64-row tiles of O^T (value columns)
  constexpr int kThreads = consumer_threads(kRows);  // the one consumer warpgroup
  constexpr int kRowGroup = 16 * kD;
  const int lane = threadIdx.x & 31, wq = threadIdx.x >> 5;
  const int g = lane >> 2, c = lane & 3;
  const int key0 = 16 * wq + g;   // this thread's S^T rows: keys key0 and key0 + 8
  // Head of fragment column (j, e): 8 j + 2 c + e.
  auto head_of = [&](int j, int e) { return 8 * j + 2 * c + e; };
  float* s_max = reinterpret_cast<float*>(smem + S::merge);  // [2 (block parity)][4 warps][32 heads]
  uint8_t* s_p = smem + S::p;
  // P^T tile (N x 64 keys, K-major core matrices): element (head n, key k) at
  // (n / 8) * 1024 + (k / 8) * 128 + (n % 8) * 16 + (k % 8) * 2.
  uint16_t* p_key0 = reinterpret_cast<uint16_t*>(s_p + (key0 >> 3) * 128) + (key0 & 7);
  const uint64_t dq = gmma_desc(smem_addr(smem + S::q), 128, kRowGroup);
  const uint64_t dp = gmma_desc(smem_addr(s_p), 128, 8 * 128);

  float o[kMT][kNJ][4], m_run[kNJ][2], l_run[kNJ][2];
  narrow_state_init(o, m_run, l_run);

  for (int kb = w.kb_begin; kb < w.kb_end; ++kb) {
    const int i = kb - w.kb_begin;
    const Stage<kRows, kD, kRaw> stage(smem, i & 1);
    stage.wait_full(i, kRaw > 0 && kNarrowConsumerFence);
    if (kTimeline && i == 0 && threadIdx.x == 0) timeline_mark(4);
    if (kBlockTimeline && threadIdx.x == 0) block_event(4, i);
    if constexpr (kConsumersIdle) {
      stage.release(w, lane);
      continue;
    }
    const uint32_t k_addr = smem_addr(stage.tile);

    // ---- S^T = K Q^T: 64 keys x N heads
    float s[kNJ][4];
    const uint64_t dk = KT::k(k_addr);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) wgmma_m64nNk16_ss<N, 0>(s, desc_add(dk, KT::k_step(ks)), desc_add(dq, ks * 16), ks > 0);
    wgmma_commit();
    wgmma_wait<0>();
    reg_fence(s);
    if (kBlockTimeline && threadIdx.x == 0) block_event(5, i);

    // ---- mask, scale; each head's maximum over this thread's keys, the 8 lanes g, the 4 warps
    const uint64_t valid = stage.valid_mask();
    const bool ok0 = (valid >> key0) & 1u, ok1 = (valid >> (key0 + 8)) & 1u;
    // Two buffers by block parity (narrow_softmax.cuh).
    narrow_block_softmax<kNJ, kMT, kThreads>(s, ok0, ok1, [&](int, int) { return p.scale_log2; },
                                             s_max + (i & 1) * 128, wq, g, c, m_run, l_run, o);

    // ---- P^T into shared memory (the previous block's P V completed in every warp before
    // that warp reached this block's barrier above)
#pragma unroll
    for (int j = 0; j < kNJ; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        uint16_t* col = p_key0 + j * 512 + (2 * c + e) * 8;  // (head 8j + 2c + e, key0): 1024 B per 8 heads
        col[0] = __bfloat16_as_ushort(__float2bfloat16_rn(s[j][e]));
        col[64] = __bfloat16_as_ushort(__float2bfloat16_rn(s[j][2 + e]));  // key0 + 8: the next 128-byte core matrix
      }
    fence_proxy_async();  // read next by wgmma
    named_bar_sync(kBarPReady, kThreads);

    // ---- O^T += V^T P^T: value rows 64 mi .. 64 mi + 63, keys 16 kk .. 16 kk + 15
    wgmma_fence();
#pragma unroll
    for (int mi = 0; mi < kMT; ++mi) {
      const uint64_t dv = KT::v(k_addr, 64 * mi);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
        wgmma_m64nNk16_ss<N, 1>(o[mi], desc_add(dv, kk * KT::kVKStep), desc_add(dp, kk * 16), 1);
    }
    wgmma_commit();
    wgmma_wait<0>();
#pragma unroll
    for (int mi = 0; mi < kMT; ++mi) reg_fence(o[mi]);
    if (kBlockTimeline && threadIdx.x == 0) block_event(6, i);
    stage.release(w, lane);
  }

  if (kTimeline && threadIdx.x == 0) timeline_mark(5);
  // ---- row sums, lse, O^T out through shared memory: s_l over P^T, O^T over the K tiles (every
  // warp is past its last P^T and K tile at the epilogue's first barrier)
  // the unrolled store loop (no kNarrowRolledStores): with the rolled one ptxas spilled 28 bytes in
  // the packed producer's loop of the 32-row fp8_model1 kernel
  auto col = [&](int mi, int half) { return 64 * mi + key0 + 8 * half; };
  narrow_epilogue<kNJ, kMT, kThreads, kMaxLogits, decltype(col), 1, 1, 0, false, false>(
      p, w, reinterpret_cast<float*>(s_p), reinterpret_cast<float*>(smem + S::k), o, m_run, l_run, wq, g, c, col);
  if (kTimeline && threadIdx.x == 0) timeline_mark(6);
}

}  // namespace smla::cuda::sparse_decode_family
