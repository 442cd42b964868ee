// A consumer warpgroup of a 16-row kRawConsumer tile of fp8_ds_mla (config.h; two of them take
// alternate blocks, RawWg): consumer_narrow_raw.cuh's products from the raw ring, with the format's
// 128-column float32 scales kept out of the tensor cores' operands:
//   S^T = sum_t scale_t . (K_t Q_t^T) + K_rope Q_rope^T: four partial sums over the latent
//     columns of scale tile t (e4m3 -> f16 exact, Q's latent part in f16 scaled per head) and
//     one over the 64 RoPE columns (bf16 as stored, against Q's RoPE part in bf16), folded per
//     key with its scales and per head with Q's factor;
//   O^T = V^T P^T per scale tile: P^T_t = P . scale_t (bf16, one tile each), V in bf16
//     (e4m3 -> f16 -> bf16 exact); each 64-row tile of O^T lies inside one scale tile: lane
//     (w, g) owns value columns 128 t + 4 (8 w + g) .. + 3 of tile t, read as one 4-byte word
//     per key (ring rows 672 bytes apart: four consecutive rows on distinct banks).
// K-side reads, key permutation and P^T order are those of consumer_narrow_raw.cuh.
#pragma once

#include <cstdint>

#include "cuda/common/barriers.cuh"
#include "cuda/common/fp8.cuh"
#include "cuda/common/wgmma.cuh"
#include "cuda/sparse_decode/consumer_narrow_raw.cuh"
#include "cuda/sparse_decode/ds_block.cuh"
#include "cuda/sparse_decode/narrow_softmax.cuh"
#include "cuda/sparse_decode/timeline.cuh"

namespace smla::cuda::sparse_decode_family {

template <int kRows, bool kMaxLogits>
__device__ void consume_narrow_raw_ds(const AttnParams& p, const Work& w, uint8_t* smem) {
  constexpr int kFmt = static_cast<int>(CacheFormat::fp8_ds_mla);
  using S = RingSmem<kRows, kFmt>;
  using L = DsMlaLayout;
  constexpr int kStride = kRawRingStride<kFmt>;
  constexpr int N = kRows, kNJ = N / 8, kMT = kDv / 64, kTiles = L::num_scales;
  constexpr int kThreads = 128;  // one consumer warpgroup's (kRawWgs 2: two, each over its own blocks)
  const RawWg<kRows, kFmt> wg(smem);
  const int lane = wg.lane, wq = wg.wq, g = wg.g, c = wg.c, ka = wg.ka, kb_ = wg.kb;
  auto head_of = [&](int j, int e) { return 8 * j + 2 * c + e; };
  float* s_max = wg.max_buf;
  const float* qinv = wg.qinv;
  uint8_t* s_p = wg.p;
  uint64_t *full = wg.full, *empty = wg.empty;
  const uint8_t *ok_bytes = wg.ok, *ring = wg.ring;
  uint32_t* p_ab = wg.p_ab;
  constexpr int kPTile16 = static_cast<int>(S::kPBytes / 16);  // descriptor units between P^T tiles
  const uint64_t dq = wg.dq, dp = wg.dp;
  const uint64_t dqr = gmma_desc(smem_addr(smem + S::q_rope), 128, 16 * 64);
  float qv[kNJ][2];  // Q's latent factor undone, per head
#pragma unroll
  for (int j = 0; j < kNJ; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) qv[j][e] = qinv[head_of(j, e)];

  float o[kMT][kNJ][4], m_run[kNJ][2], l_run[kNJ][2];
  narrow_state_init(o, m_run, l_run);
  // kDsF16V: each scale tile's largest scale exponent so far (biased, at least 7; 0: none yet),
  // the same in every thread of the warpgroup; P^T_t carries 2^(133 - e_run[t]).
  int e_run[kTiles] = {};

  for (int i = wg.cw; i < w.kb_end - w.kb_begin; i += wg.kWgs) {
    const int slot = i % S::kRing;
    mbar_wait(full + slot, (i / S::kRing) & 1);
    if (kTimeline && i == 0 && threadIdx.x == 0) timeline_mark(4);
    if (kBlockTimeline && threadIdx.x % 128 == 0) block_event(4, i);
    const uint8_t* blk = ring + slot * S::kSlotBytes;
    const uint8_t* row_a = blk + ka * kStride;
    const uint8_t* row_b = blk + kb_ * kStride;

    // ---- partial S^T per scale tile and the RoPE part (ds_block.cuh)
    float st[kTiles][kNJ][4], sr[kNJ][4];
    uint32_t a[2][4][4];
    ds_partial_st<N>(row_a, row_b, c, dq, dqr, st, sr, a);
    if (kBlockTimeline && threadIdx.x % 128 == 0) block_event(5, i);

    // ---- fold: S = qinv_h . sum_t scale_t S_t + S_rope (a skipped row was zeroed: its scales are 0)
    float sa[kTiles], sb[kTiles];
    ds_key_scales(row_a, sa);
    ds_key_scales(row_b, sb);
    float s[kNJ][4];
    ds_fold(st, sr, sa, sb, qv, s);
    // P^T's factors: ds_p_word (kDsIntV: values enter as V 2^-120, so P^T takes 2^60 and O^T
    // ends at 2^-60)
    const bool ok0 = ok_bytes[slot * kKeys + ka] != 0, ok1 = ok_bytes[slot * kKeys + kb_] != 0;
    float* buf = s_max + ((i / wg.kWgs) & 1) * 128;
    if constexpr (kDsF16V) {
      // The block's largest scale per tile: positive floats order as their bits; lane c of row 0
      // puts tile c's warp maximum beside the head maxima (heads 16 .. 19 of buf are unused).
      uint32_t tmax = 0;
#pragma unroll
      for (int t = 0; t < kTiles; ++t) {
        const uint32_t m = __reduce_max_sync(0xffffffffu, max(__float_as_uint(sa[t]), __float_as_uint(sb[t])));
        tmax = c == t ? m : tmax;
      }
      if (g == 0) buf[wq * 32 + 16 + c] = __uint_as_float(tmax);
    }
    // kDsF16V: after the barrier, each tile's exponent over the warpgroup's four warps; where it
    // grew, O^T's tiles of that scale tile move to the new factor.
    auto tiles = [&](const float* b, float (&tf)[kMT]) {
      uint32_t mx[kTiles] = {};
#pragma unroll
      for (int v = 0; v < 4; ++v) {
        const uint4 q4 = *reinterpret_cast<const uint4*>(b + v * 32 + 16);
        mx[0] = max(mx[0], q4.x), mx[1] = max(mx[1], q4.y), mx[2] = max(mx[2], q4.z), mx[3] = max(mx[3], q4.w);
      }
      return grow_tile_exponents(mx, e_run, tf);
    };
    auto tile_rescale = [&] {
      if constexpr (kDsF16V) return tiles;
      else return NoTileRescale{};
    }();
    narrow_block_softmax<kNJ, kMT, kThreads, wg.kWgs, kRawLazy<kMaxLogits>>(s, ok0, ok1, [&](int, int) { return p.scale_log2; },
                                                                         buf, wq, g, c, m_run, l_run, o, wg.cw, tile_rescale);

    // ---- P^T_t = P . scale_t (bf16) at the keys' logical positions (the previous block's P V
    // completed in every warp before that warp reached this block's barrier above)
    ds_write_pt<RawWg<kRows, kFmt>, kDsF16V>(p_ab, s, sa, sb, e_run, c);
    fence_proxy_async();  // read next by wgmma
    wg_bar_sync<kBarPReady, kBarPReady2, wg.kBar3 ? kBarPReady3 : -1>(wg.cw, kThreads);

    // ---- O^T += V^T P^T_t (ds_block.cuh): lane (w, g) reads value columns 128 t + 4 (8 w + g) ..
    // + 3 of scale tile t, bytes paired (prmt) and converted.
    const uint8_t* vcol = blk + 4 * (8 * wq + g) + c * kStride;
    auto value_word = [&](int h, int tt, int r) {
      return *reinterpret_cast<const uint32_t*>(vcol + (16 * (h >> 1) + 4 * r) * kStride + 128 * (2 * (h & 1) + tt));
    };
    ds_pv_block<N, kDsF16V ? ValueConversion::f16 : kDsIntV ? ValueConversion::bf16_int : ValueConversion::bf16_float>(
        o, a, value_word, dp, kPTile16);
    raw_block_end(o, a, empty + slot, lane);
    if (kBlockTimeline && threadIdx.x % 128 == 0) block_event(6, i);
  }
  if (kTimeline && threadIdx.x == 0) timeline_mark(5);

  // ---- row sums, lse (and max_logits), O^T out (s_l over P^T, O^T over the ring). Tile mi's
  // rows g and g + 8 of warp wq are value columns 128 (mi / 2) + 4 (8 wq + g) + 2 (mi % 2) and + 1.
  if constexpr (kDsF16V) {
#pragma unroll
    for (int mi = 0; mi < kMT; ++mi) scale_tile(o[mi], __int_as_float((max(e_run[mi >> 1], 7) - 6) << 23));  // 2^(e_run - 133)
  } else if constexpr (kDsIntV) {
#pragma unroll
    for (int mi = 0; mi < kMT; ++mi) scale_tile(o[mi], kDsIntVFactor);
  }
  const int col0 = 4 * (8 * wq + g);
  auto col = [&](int mi, int hf) { return 128 * (mi >> 1) + col0 + 2 * (mi & 1) + hf; };
  narrow_epilogue<kNJ, kMT, kThreads, kMaxLogits, decltype(col), wg.kWgs>(
      p, w, reinterpret_cast<float*>(s_p), reinterpret_cast<float*>(smem + S::ring), o, m_run, l_run, wq, g, c, col, wg.cw,
      reinterpret_cast<float*>(smem + S::heads));
  if (kTimeline && threadIdx.x == 0) timeline_mark(6);
}

}  // namespace smla::cuda::sparse_decode_family
