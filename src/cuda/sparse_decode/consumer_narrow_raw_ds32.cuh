// A consumer warpgroup of a 32-row kRawConsumer tile of fp8_ds_mla (config.h, kRawSplitDv): both
// consumer warpgroups take every block, and warpgroup cw owns scale tiles 2 cw and 2 cw + 1,
// value columns 256 cw .. 256 cw + 255. Per block:
//   X_cw = qinv_h . sum_{t of cw} scale_t . (K_t Q_t^T) + K_rope,cw Q_rope,cw^T: the partial S^T of
//     its latent columns (e4m3 -> f16 exact, Q in f16 scaled per head) and of RoPE columns 32 cw
//     .. 32 cw + 31 (bf16 as stored);
//   S^T = X_0 + X_1 through shared memory (each thread adds its counterpart's 16 values: the two
//     sums are bitwise equal), then the same online softmax in both (the same state); with kSplit
//     (config.h kDs32Split: sparse decode) only the other's 16 heads' values cross and each
//     warpgroup runs the softmax of its own 16 heads, writing P^T of all four tiles for them;
//   O^T_cw += V_cw^T P^T_t for its two tiles t: V as f16 (exact) and P^T_t = P . scale_t .
//     2^(133 - E_t) in f16, E_t tile t's largest scale exponent so far (kDs32F16V; else P^T_t =
//     P . scale_t in bf16 and V bf16 on the integer pipes, as consumer_narrow_raw_ds.cuh).
// Register need per thread: O^T 64 (instead of 128 for 32 heads over all 512 columns), two partial
// S^T sums and the RoPE sum (48). Fragment rows, key order and reads as consumer_narrow_raw_ds.cuh.
#pragma once

#include <cstdint>

#include "cuda/common/barriers.cuh"
#include "cuda/common/fp8.cuh"
#include "cuda/common/wgmma.cuh"
#include "cuda/sparse_decode/consumer_narrow_raw.cuh"
#include "cuda/sparse_decode/narrow_softmax.cuh"

namespace smla::cuda::sparse_decode_family {

template <int kRows, bool kMaxLogits>
__device__ void consume_narrow_raw_ds32(const AttnParams& p, const Work& w, uint8_t* smem) {
  constexpr int kFmt = static_cast<int>(CacheFormat::fp8_ds_mla);
  using S = RingSmem<kRows, kFmt>;
  using L = DsMlaLayout;
  static_assert(kRows == 32 && S::kSplitDv && S::kWgs == 2 && L::num_scales == 4, "two warpgroups, two scale tiles each");
  constexpr int kStride = kRawRingStride<kFmt>;
  constexpr int N = kRows, kNJ = N / 8, kMT = kDv / 64 / 2, kGroups = L::d_latent / 64 / 2;
  constexpr int kThreads = 128;
  constexpr bool kSplit = kDs32Split<kMaxLogits>;
  const RawWg<kRows, kFmt> wg(smem);
  const int lane = wg.lane, wq = wg.wq, g = wg.g, c = wg.c, ka = wg.ka, kb_ = wg.kb, cw = wg.cw;
  const int tid = static_cast<int>(threadIdx.x) & 127;
  auto head_of = [&](int j, int e) { return 8 * j + 2 * c + e; };
  float* s_max = wg.max_buf;
  uint64_t *full = wg.full, *empty = wg.empty;
  const uint8_t *ok_bytes = wg.ok, *ring = wg.ring;
  uint32_t* p_ab = wg.p_ab;
  float* xchg = reinterpret_cast<float*>(smem + S::xchg);  // [parity][warpgroup][16][128]
  constexpr int kPTile16 = static_cast<int>(S::kPBytes / 16);  // descriptor units between P^T tiles
  const uint64_t dq = desc_add(wg.dq, 4 * kGroups * cw * 16), dp = wg.dp;  // Q from latent group 4 cw
  const uint64_t dqr = desc_add(gmma_desc(smem_addr(smem + S::q_rope), 128, 16 * 64), 2 * cw * 16);
  float qv[kNJ][2];  // Q's latent factor undone, per head
#pragma unroll
  for (int j = 0; j < kNJ; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) qv[j][e] = wg.qinv[head_of(j, e)];

  float o[kMT][kNJ][4], m_run[kNJ][2], l_run[kNJ][2];
  narrow_state_init(o, m_run, l_run);
  // kDs32F16V: each of this warpgroup's scale tiles' largest scale exponent so far (biased, at
  // least 7; 0: none yet), the same in every thread of the warpgroup; P^T_t carries 2^(133 -
  // e_run[t]). Block maxima: float[warpgroup][parity][4 warps][2 tiles] in RingSmem::heads.
  int e_run[2] = {};
  float* tile_max = reinterpret_cast<float*>(smem + S::heads) + cw * 16;
  // kSplit: this warpgroup runs the softmax of heads 16 cw .. 16 cw + 15 (fragment columns j
  // = 2 cw + jj): their running maxima and this thread's sums, every scale tile's exponent
  // (kDs32F16V: P^T of all four tiles), and in RingSmem::heads each warpgroup's tile maxima
  // (float[2][parity][4 warps][4 tiles]) and row factors (float[2][16], from float 64 on).
  float m_own[2][2], l_own[2][2];
#pragma unroll
  for (int jj = 0; jj < 2; ++jj) m_own[jj][0] = m_own[jj][1] = -INFINITY, l_own[jj][0] = l_own[jj][1] = 0.f;
  int e_all[4] = {};
  float* split_heads = reinterpret_cast<float*>(smem + S::heads);
  uint32_t* p_other = p_ab + (cw ? -1 : 1) * static_cast<int>(S::kPTiles * S::kPBytes / 4);  // the other warpgroup's P^T tiles

  // kSplit: block i's softmax of this warpgroup's heads, P^T of all four scale tiles for
  // them, and, once both warpgroups' are in, O^T rescaled with all 32 heads' factors (the
  // barriers as in narrow_block_softmax and the exchange above; a warpgroup writes the other's
  // P^T tiles and reads its row factors only between two barriers over both).
  auto split_softmax_block = [&](int i, float (&sv)[2][4], const float4& sca, const float4& scb, bool ok0, bool ok1) {
    float* buf = s_max + (i & 1) * 128;               // [4 warps][32]: this warpgroup's heads at 0..15
    float* tbuf = split_heads + cw * 32 + (i & 1) * 16;  // [4 warps][4 tiles]
    float* alpha_buf = split_heads + 64;              // [2 warpgroups][16 heads]
    const float sa4[4] = {sca.x, sca.y, sca.z, sca.w}, sb4[4] = {scb.x, scb.y, scb.z, scb.w};
    if constexpr (kDs32F16V) {  // every tile's block maximum of |scale| (lane c: tile c)
      const uint32_t tmax = warp_tile_scale_max(sa4, sb4, c);
      if (g == 0) tbuf[wq * 4 + c] = __uint_as_float(tmax);
    }
    float mx[2][2];
#pragma unroll
    for (int jj = 0; jj < 2; ++jj)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        mx[jj][e] = mask_scale_max(sv[jj][e], sv[jj][2 + e], ok0, ok1, p.scale_log2);
      }
    if (g == 0) {
#pragma unroll
      for (int jj = 0; jj < 2; ++jj) buf[wq * 32 + 8 * jj + 2 * c] = mx[jj][0], buf[wq * 32 + 8 * jj + 2 * c + 1] = mx[jj][1];
    }
    merge_bar_sync<1>(cw, kThreads);
    float tf[kMT];
#pragma unroll
    for (int mi = 0; mi < kMT; ++mi) tf[mi] = 1.f;
    bool grew = false;  // one of this warpgroup's tiles moved its exponent (uniform)
    if constexpr (kDs32F16V) {
      uint32_t m4[4] = {};
#pragma unroll
      for (int v = 0; v < 4; ++v) {
        const uint4 q4 = *reinterpret_cast<const uint4*>(tbuf + 4 * v);
        m4[0] = max(m4[0], q4.x), m4[1] = max(m4[1], q4.y), m4[2] = max(m4[2], q4.z), m4[3] = max(m4[3], q4.w);
      }
      float tf_all[8];  // O^T tiles of both warpgroups: 2 t, 2 t + 1 for scale tile t
      grow_tile_exponents(m4, e_all, tf_all);
#pragma unroll
      for (int mi = 0; mi < kMT; ++mi) tf[mi] = cw ? tf_all[4 + mi] : tf_all[mi];
      grew = tf[0] != 1.f || tf[2] != 1.f;  // a tile's factor is 1 exactly where its exponent held
    }
    float alpha_own[2][2];
#pragma unroll
    for (int jj = 0; jj < 2; ++jj)
#pragma unroll
      for (int e = 0; e < 2; ++e)
        alpha_own[jj][e] =
            head_softmax_step<kRawLazy<kMaxLogits>>(buf, 8 * jj + 2 * c + e, m_own[jj][e], l_own[jj][e], sv[jj][e], sv[jj][2 + e]);
    if (wq == 0 && g == 0) {
#pragma unroll
      for (int jj = 0; jj < 2; ++jj)
#pragma unroll
        for (int e = 0; e < 2; ++e) alpha_buf[cw * 16 + 8 * jj + 2 * c + e] = alpha_own[jj][e];
    }
    // P^T_t of this warpgroup's heads for all four tiles: tiles 2 cw, 2 cw + 1 into its own P^T
    // tiles, the other two into the other warpgroup's (both read their P^T tiles only after the
    // barrier below; the previous block's P V completed before the exchange's barrier)
#pragma unroll
    for (int t = 0; t < 4; ++t)
#pragma unroll
      for (int jj = 0; jj < 2; ++jj)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          uint32_t* dst = ((t >> 1) == cw ? p_ab : p_other) + RawWg<kRows, kFmt>::p_word(t & 1, 2 * cw + jj, c, e);
          *dst = ds_p_word<kDs32F16V>(sv[jj][e], sv[jj][2 + e], sa4[t], sb4[t], e_all[t]);
        }
    fence_proxy_async();  // read next by wgmma
    named_bar_sync(kBarXchg, 2 * kThreads);  // both warpgroups' P^T tiles and row factors are in
    bool moved = grew;
    float alpha[kNJ][2];
#pragma unroll
    for (int j = 0; j < kNJ; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float theirs = alpha_buf[(1 - cw) * 16 + 8 * (j & 1) + 2 * c + e];
        alpha[j][e] = (j >> 1) == cw ? alpha_own[j & 1][e] : theirs;
        moved |= alpha[j][e] != 1.f;
      }
    if (__any_sync(0xffffffffu, moved)) rescale_narrow_o<kDs32F16V>(o, alpha, tf);
  };

  for (int i = 0; i < w.kb_end - w.kb_begin; ++i) {
    const int slot = i % S::kRing;
    mbar_wait(full + slot, (i / S::kRing) & 1);
    const uint8_t* blk = ring + slot * S::kSlotBytes;
    const uint8_t* row_a = blk + ka * kStride;
    const uint8_t* row_b = blk + kb_ * kStride;

    // ---- partial S^T of this warpgroup's scale tiles (groups 0..3: latent groups 4 cw ..,
    // two per tile) and of its RoPE half (group 4, two k-steps); the next group's fragments
    // are converted while the previous group's wgmmas run.
    float st[2][kNJ][4], sr[kNJ][4];
    uint32_t a[2][4][4];
#pragma unroll
    for (int grp = 0; grp <= kGroups; ++grp) {
      const bool rope = grp == kGroups;
      uint32_t wa[4], wb[4];
      {
        const int off = rope ? L::rope_offset + 32 * c + 16 * cw : 64 * (kGroups * cw + grp) + 16 * c;
        const uint4 va = *reinterpret_cast<const uint4*>(row_a + off);
        const uint4 vb = *reinterpret_cast<const uint4*>(row_b + off);
        wa[0] = va.x, wa[1] = va.y, wa[2] = va.z, wa[3] = va.w;
        wb[0] = vb.x, wb[1] = vb.y, wb[2] = vb.z, wb[3] = vb.w;
      }
      if (grp >= 2) {
        wgmma_wait<1>();  // group grp - 2 has read a[grp % 2]
        reg_fence(a[grp & 1]);
      }
      if (!rope) {
        key_words_to_frags(wa, wb, a[grp & 1]);
      } else {  // RoPE k-steps 2 cw, 2 cw + 1: this lane's words 4 cw .. 4 cw + 3 of its 32 bytes
        rope_words_to_frags<2>(wa, wb, a[grp & 1]);
      }
      wgmma_fence();
      if (!rope) {
#pragma unroll
        for (int s4 = 0; s4 < 4; ++s4)
          wgmma_m64nNk16_rs<N, false>(st[grp >> 1], a[grp & 1][s4], desc_add(dq, (4 * grp + s4) * 16), (grp & 1) || s4 > 0);
      } else {
#pragma unroll
        for (int s2 = 0; s2 < 2; ++s2) wgmma_m64nNk16_rs<N, true>(sr, a[grp & 1][s2], desc_add(dqr, s2 * 16), s2 > 0);
      }
      wgmma_commit();
    }
    wgmma_wait<0>();
    reg_fence(st[0]);
    reg_fence(st[1]);
    reg_fence(sr);
    reg_fence(a[0]);
    reg_fence(a[1]);

    // ---- X_cw = qinv_h . sum_t scale_t S_t + S_rope (a skipped row was zeroed: its scales are 0)
    const float4 sca = *reinterpret_cast<const float4*>(row_a + L::scale_offset);
    const float4 scb = *reinterpret_cast<const float4*>(row_b + L::scale_offset);
    const float sa[2] = {cw ? sca.z : sca.x, cw ? sca.w : sca.y}, sb[2] = {cw ? scb.z : scb.x, cw ? scb.w : scb.y};
    float s[kNJ][4];
#pragma unroll
    for (int j = 0; j < kNJ; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        s[j][e] = qv[j][e] * (sa[0] * st[0][j][e] + sa[1] * st[1][j][e]) + sr[j][e];
        s[j][2 + e] = qv[j][e] * (sb[0] * st[0][j][2 + e] + sb[1] * st[1][j][2 + e]) + sr[j][2 + e];
      }
    // The value words of this warpgroup's P V (k-step kk, tiles 2 cw + tt; keys 16 kk + 4 r + c);
    // kRawEarlyV: all of them now (the skip flags above too), and the slot goes back to the producer.
    const uint8_t* vcol = blk + 256 * cw + 4 * (8 * wq + g) + c * kStride;
    auto value_word = [&](int kk, int tt, int r) {
      return *reinterpret_cast<const uint32_t*>(vcol + (16 * kk + 4 * r) * kStride + 128 * tt);
    };
    const bool ok0 = ok_bytes[slot * kKeys + ka] != 0, ok1 = ok_bytes[slot * kKeys + kb_] != 0;
    // ---- S^T = X_0 + X_1: this thread's 16 values through xchg (parity i % 2: a warpgroup
    // writes block i + 2's values only after the barrier of block i + 1, which the other
    // reaches only after reading block i's)
    float* mine = xchg + ((i & 1) * 2 + cw) * 16 * 128 + tid;
    const float* other = xchg + ((i & 1) * 2 + (1 - cw)) * 16 * 128 + tid;
    float sv[2][4];  // kSplit: S^T of this warpgroup's heads (j = 2 cw + jj)
    if constexpr (kSplit) {  // only the other warpgroup's heads go over
#pragma unroll
      for (int jj = 0; jj < 2; ++jj)
#pragma unroll
        for (int k = 0; k < 4; ++k) mine[(4 * jj + k) * 128] = cw ? s[jj][k] : s[2 + jj][k];
      named_bar_sync(kBarXchg, 2 * kThreads);
#pragma unroll
      for (int jj = 0; jj < 2; ++jj)
#pragma unroll
        for (int k = 0; k < 4; ++k) sv[jj][k] = (cw ? s[2 + jj][k] : s[jj][k]) + other[(4 * jj + k) * 128];
    } else {
#pragma unroll
      for (int j = 0; j < kNJ; ++j)
#pragma unroll
        for (int k = 0; k < 4; ++k) mine[(4 * j + k) * 128] = s[j][k];
      named_bar_sync(kBarXchg, 2 * kThreads);
#pragma unroll
      for (int j = 0; j < kNJ; ++j)
#pragma unroll
        for (int k = 0; k < 4; ++k) s[j][k] += other[(4 * j + k) * 128];
    }
    uint32_t xv[kRawEarlyV ? 4 : 1][2][4];
    if constexpr (kRawEarlyV) {
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
#pragma unroll
        for (int tt = 0; tt < 2; ++tt)
#pragma unroll
          for (int r = 0; r < 4; ++r) xv[kk][tt][r] = value_word(kk, tt, r);
      raw_slot_release(empty + slot, lane);
    }

    if constexpr (kSplit) {
      split_softmax_block(i, sv, sca, scb, ok0, ok1);
    } else {
      // P^T's factors: ds_p_word (kDsIntV: values enter as V 2^-120, so P^T takes 2^60 and O^T
      // ends at 2^-60)
      float* tmax_buf = tile_max + (i & 1) * 8;
      if constexpr (kDs32F16V) {
        // The block's largest |scale| per tile: lane c < 2 of row 0 writes tile c's warp
        // maximum. Read after the softmax's barrier (tiles, below).
        const uint32_t tmax = warp_tile_scale_max(sa, sb, c);
        if (g == 0 && c < 2) tmax_buf[wq * 2 + c] = __uint_as_float(tmax);
      }
      // kDs32F16V: after the barrier, each tile's exponent over the warpgroup's four warps; where it
      // grew, O^T's tiles of that scale tile move to the new factor.
      auto tiles = [&](const float*, float (&tf)[kMT]) {
        uint32_t mx[2] = {};
#pragma unroll
        for (int v = 0; v < 4; ++v) {
          const float2 q2 = *reinterpret_cast<const float2*>(tmax_buf + 2 * v);
          mx[0] = max(mx[0], __float_as_uint(q2.x)), mx[1] = max(mx[1], __float_as_uint(q2.y));
        }
        return grow_tile_exponents(mx, e_run, tf);
      };
      auto tile_rescale = [&] {
        if constexpr (kDs32F16V) return tiles;
        else return NoTileRescale{};
      }();
      narrow_block_softmax<kNJ, kMT, kThreads, 1, kRawLazy<kMaxLogits>>(s, ok0, ok1, [&](int, int) { return p.scale_log2; },
                                                  s_max + (i & 1) * 128, wq, g, c, m_run, l_run, o, cw, tile_rescale);

      // ---- P^T_t = P . scale_t (f16 with 2^(133 - e_run), or bf16) for this warpgroup's two
      // tiles (the previous block's P V completed in every warp of the warpgroup before that warp
      // reached the barrier above)
#pragma unroll
      for (int t = 0; t < 2; ++t)
#pragma unroll
        for (int j = 0; j < kNJ; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e)
            p_ab[RawWg<kRows, kFmt>::p_word(t, j, c, e)] = ds_p_word<kDs32F16V>(s[j][e], s[j][2 + e], sa[t], sb[t], e_run[t]);
      fence_proxy_async();  // read next by wgmma
      wg_bar_sync<kBarPReady, kBarPReady2>(cw, kThreads);
    }

    // ---- O^T += V^T P^T_t over this warpgroup's tiles 2 cw, 2 cw + 1: per k-step kk (16 keys)
    // one 4-byte word of four rows (keys 16 kk + 4 r + c) per tile, bytes paired and converted.
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      uint32_t x[2][4];
#pragma unroll
      for (int tt = 0; tt < 2; ++tt)
#pragma unroll
        for (int r = 0; r < 4; ++r) x[tt][r] = kRawEarlyV ? xv[kRawEarlyV ? kk : 0][tt][r] : value_word(kk, tt, r);
      if (kk >= 2) {
        wgmma_wait<1>();
        reg_fence(a[kk & 1]);
      }
#pragma unroll
      for (int tt = 0; tt < 2; ++tt)  // O^T tiles 2 tt (bytes 0/1 of a word) and 2 tt + 1 (bytes 2/3)
        value_words_to_frags<kDs32F16V ? ValueConversion::f16 : kDsIntV ? ValueConversion::bf16_int : ValueConversion::bf16_float>(
            x[tt][0], x[tt][1], x[tt][2], x[tt][3], a[kk & 1][2 * tt], a[kk & 1][2 * tt + 1]);
      wgmma_fence();
#pragma unroll
      for (int m4 = 0; m4 < 4; ++m4)
        wgmma_m64nNk16_rs<N, !kDs32F16V>(o[m4], a[kk & 1][m4], desc_add(dp, (m4 >> 1) * kPTile16 + kk * 16), 1);
      wgmma_commit();
    }
    raw_block_end<kMT, kNJ, !kRawEarlyV>(o, a, empty + slot, lane);
  }

  if constexpr (kSplit) {
    // Both warpgroups' final states, so that each holds all 32 heads' (the same thread of each
    // holds the same keys: its sums are the other's missing ones). Parity nb % 2 of xchg: the
    // last block's exchange used the other, and both passed the last barrier over both.
    const int nb = w.kb_end - w.kb_begin;
    float* mine = xchg + ((nb & 1) * 2 + cw) * 16 * 128 + tid;
    const float* other = xchg + ((nb & 1) * 2 + (1 - cw)) * 16 * 128 + tid;
#pragma unroll
    for (int jj = 0; jj < 2; ++jj)
#pragma unroll
      for (int e = 0; e < 2; ++e) mine[(2 * jj + e) * 128] = m_own[jj][e], mine[(4 + 2 * jj + e) * 128] = l_own[jj][e];
    named_bar_sync(kBarXchg, 2 * kThreads);
#pragma unroll
    for (int j = 0; j < kNJ; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const bool own = (j >> 1) == cw;
        m_run[j][e] = own ? m_own[j & 1][e] : other[(2 * (j & 1) + e) * 128];
        l_run[j][e] = own ? l_own[j & 1][e] : other[(4 + 2 * (j & 1) + e) * 128];
      }
#pragma unroll
    for (int lt = 0; lt < 2; ++lt) e_run[lt] = cw ? e_all[2 + lt] : e_all[lt];
  }

  // ---- row sums, lse (and max_logits), O^T out (s_l over P^T, O^T over the ring). Tile mi's
  // rows g and g + 8 of warp wq are value columns 256 cw + 128 (mi / 2) + 4 (8 wq + g) + 2 (mi % 2) and + 1.
  if constexpr (kDs32F16V) {
#pragma unroll
    for (int mi = 0; mi < kMT; ++mi) scale_tile(o[mi], __int_as_float((max(e_run[mi >> 1], 7) - 6) << 23));  // 2^(e_run - 133)
  } else if constexpr (kDsIntV) {
#pragma unroll
    for (int mi = 0; mi < kMT; ++mi) scale_tile(o[mi], kDsIntVFactor);
  }
  const int col0 = 256 * cw + 4 * (8 * wq + g);
  auto col = [&](int mi, int hf) { return 128 * (mi >> 1) + col0 + 2 * (mi & 1) + hf; };
  narrow_epilogue<kNJ, kMT, kThreads, kMaxLogits, decltype(col), 1, 2>(
      p, w, reinterpret_cast<float*>(wg.p), reinterpret_cast<float*>(smem + S::ring), o, m_run, l_run, wq, g, c, col, cw);
}

}  // namespace smla::cuda::sparse_decode_family
