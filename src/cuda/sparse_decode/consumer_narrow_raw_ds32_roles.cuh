// The two consumer warpgroups of a 32-row kRawConsumer tile of fp8_ds_mla in roles (config.h:
// kRolesOnSplitPlan, the paged prefill's 32-row kernels, on the split tiles' shared-memory plan;
// kRawRoles, a measurement build, in every 32-row kernel on its own plan): consumer_narrow_raw_ds.cuh's
// products for 32 heads, its two halves on two warpgroups that never wait for each other's half
// of a block.
//   WG0: per block, S^T = qinv_h . sum_t scale_t . (K_t Q_t^T) + K_rope Q_rope^T over all four
//     scale tiles and the RoPE columns (keys in M, 32 heads in N), the online softmax of all 32
//     heads (m, l and the tiles' scale exponents live here), P^T_t = P . scale_t . 2^(133 - E_t)
//     in f16 for the four tiles, and the factors O^T must take before this block's P V
//     (RolesHand); it releases its reads of the slot before the softmax.
//   WG1: O^T (all 512 value columns: 128 registers), per block the factors, then O^T += V^T P^T_t
//     with the values as f16 (exact), one block behind WG0; it releases the slot after its P V
//     (kEarlyV: before it, once the block's 64 value words are in its registers).
// Hand-over (named barriers over both): kBarRolesPFull, WG0 -> WG1, P^T and the factors of block i
// are in; kBarRolesPFree, WG1 -> WG0, block i's P V drained (WG0 then writes block i + 1's). One
// set of P^T tiles; each barrier alternates strictly, so its arrivals never mix two blocks. The
// last block's hand-over also carries WG0's final m, l and tile exponents, and WG1 runs the
// epilogue. Fragment rows, key order and reads are those of consumer_narrow_raw_ds.cuh.
// In the run-time roles kernel (kDs32Roles) WG1 also takes the last S::kSplitSt scale tiles of
// S^T (config.h SMLA_SD_DS32_ROLES_SPLIT_ST, default 2): block i + 1's, before its P V of block i,
// folded with the keys' scales and handed to WG0 in xs (kBarRolesSt + block parity), which WG0
// adds in its fold.
#pragma once

#include <cstdint>

#include "cuda/common/barriers.cuh"
#include "cuda/common/fp8.cuh"
#include "cuda/common/wgmma.cuh"
#include "cuda/sparse_decode/consumer_narrow_raw.cuh"
#include "cuda/sparse_decode/ds_block.cuh"
#include "cuda/sparse_decode/narrow_softmax.cuh"

namespace smla::cuda::sparse_decode_family {

inline constexpr int kBarRolesPFull = kBarPReady;  // the 64-row tiles' ids; no other user in these CTAs
inline constexpr int kBarRolesPFree = kBarPFree;

// RingSmem::xchg of the roles' tiles: float[192].
struct RolesHand {
  static constexpr int alpha = 0;   // [32] each head's factor of O^T before block i's P V
  static constexpr int tile = 32;   // [8] each O^T tile's factor (its scale tile's exponent moved)
  static constexpr int moved = 40;  // 1: some factor is not 1
  static constexpr int e_run = 44;  // [4] the tiles' final exponents (int bits; last block)
  static constexpr int m = 64;      // [32] final running maxima (last block)
  static constexpr int l = 96;      // [32] final row sums (last block)
  static constexpr int tmax = 128;  // [2 parity][4 warps][4 tiles] block maxima of |scale| (WG0's)
  static constexpr int q_addr = 160;  // Q's shared-memory address (WG0's)
  static constexpr int q_addr1 = 161;  // [4] the same, WG1's warps' (S::kSplitSt)
};

// The scale tiles' running exponents after a block whose four warps' maxima of |scale| per tile
// are in tbuf[4 warps][4 tiles] (grow_tile_exponents: tf, and whether one grew).
__device__ __forceinline__ bool tile_exponents(const float* tbuf, int (&e_run)[4], float (&tf)[8]) {
  uint32_t m4[4] = {};
#pragma unroll
  for (int v = 0; v < 4; ++v) {
    const uint4 q4 = *reinterpret_cast<const uint4*>(tbuf + 4 * v);
    m4[0] = max(m4[0], q4.x), m4[1] = max(m4[1], q4.y), m4[2] = max(m4[2], q4.z), m4[3] = max(m4[3], q4.w);
  }
  return grow_tile_exponents(m4, e_run, tf);
}

// kDs32Roles: the run-time roles kernel (config.h kRawRoles).
template <int kRows, bool kMaxLogits, int kRole, bool kDs32Roles = false>
__device__ void consume_ds32_roles(const AttnParams& p, const Work& w, uint8_t* smem) {
  constexpr int kFmt = static_cast<int>(CacheFormat::fp8_ds_mla);
  using S = RingSmem<kRows, kFmt, kDs32Roles>;
  using L = DsMlaLayout;
  using H = RolesHand;
  static_assert(kRows == 32 && (S::kRoles || S::kSplitDv) && S::kWgs == 2 && L::num_scales == 4 && kDs32F16V,
                "two warpgroups in roles, f16 values");
  static_assert(S::kRoles || (S::kPTiles * S::kWgs == L::num_scales && S::xchg + sizeof(float) * 192 <= S::bars),
                "the split plan holds the four P^T tiles and RolesHand");
  // On the split tiles' plan (kRolesOnSplitPlan: three slots) WG1 always loads its value words first.
  constexpr bool kPByWg1 = kRolesPByWg1 && S::kRoles, kEarlyV = kRolesEarlyVOf<kRows, kFmt, kDs32Roles>;
  constexpr int kStride = kRawRingStride<kFmt>;
  constexpr int N = kRows, kNJ = N / 8, kMT = kDv / 64, kTiles = L::num_scales;
  constexpr int kThreads = 128;
  const RawWg<kRows, kFmt, kDs32Roles> wg(smem);
  const int lane = wg.lane, wq = wg.wq, g = wg.g, c = wg.c, ka = wg.ka, kb_ = wg.kb;
  auto head_of = [&](int j, int e) { return 8 * j + 2 * c + e; };
  uint64_t *full = wg.full, *empty = wg.empty;
  const uint8_t *ok_bytes = wg.ok, *ring = wg.ring;
  uint8_t* pt = smem + S::p;  // the one set of P^T tiles
  float* hand = reinterpret_cast<float*>(smem + S::xchg);
  // kPByWg1: a block's P (thread t of WG0 -> thread t of WG1, the same keys and heads) in the
  // first 8 KB of the P^T tiles, float4 [4][128] (8 KB more do not fit beside four slots); WG1
  // reads it before it writes P^T there, and WG0 writes the next once that P V drained.
  float4* stage = reinterpret_cast<float4*>(pt);
  const int tid = static_cast<int>(threadIdx.x) & 127;
  constexpr int kPTile16 = static_cast<int>(S::kPBytes / 16);  // descriptor units between P^T tiles
  const int nb = w.kb_end - w.kb_begin;
  constexpr bool kMarks = kRoleMarks<kDs32Roles>;  // per-block marks (timeline.cuh role_mark)
  // S::kSplitSt: WG1 takes scale tiles kT0 .. 3 of S^T, WG0 the others and the RoPE columns
  constexpr int kT0 = kTiles - S::kSplitSt;
  static_assert(!S::kSplitSt || !kPByWg1, "the split S^T's barriers are kPByWg1's WG1 merge");
  float4* xs = reinterpret_cast<float4*>(smem + S::xs);  // [2 parities][kNJ][128]

  if constexpr (kRole == 0) {
    // ---------------- WG0: S^T, the softmax, P^T ----------------
    uint32_t* p_ab = reinterpret_cast<uint32_t*>(RawWg<kRows, kFmt, kDs32Roles>::key_entry(pt, raw_key_logical(ka)));
    float* s_max = wg.max_buf;
    if (threadIdx.x == 0) *reinterpret_cast<uint32_t*>(hand + H::q_addr) = smem_addr(smem + S::q);
    named_bar_sync(kBarMerge, kThreads);
    if (kMarks && tid == 0) role_mark(10, 0);
    float qv[kNJ][2];
#pragma unroll
    for (int j = 0; j < kNJ; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) qv[j][e] = wg.qinv[head_of(j, e)];
    float m_run[kNJ][2], l_run[kNJ][2];
#pragma unroll
    for (int j = 0; j < kNJ; ++j) m_run[j][0] = m_run[j][1] = -INFINITY, l_run[j][0] = l_run[j][1] = 0.f;
    int e_run[kTiles] = {};

    for (int i = 0; i < nb; ++i) {
      const int slot = i % S::kRing;
      mbar_wait(full + slot, (i / S::kRing) & 1);
      if (kMarks && tid == 0) role_mark(2, i);
      const uint8_t* blk = ring + slot * S::kSlotBytes;
      const uint8_t* row_a = blk + ka * kStride;
      const uint8_t* row_b = blk + kb_ * kStride;
      // Q's descriptors made anew each block from an address read back from shared memory and
      // shuffled (warp-uniform): from the address held in an ordinary register across the loop,
      // ptxas built all 36 there and moved each into uniform registers before its wgmma
      const uint32_t qa = __shfl_sync(0xffffffffu, *reinterpret_cast<volatile uint32_t*>(hand + H::q_addr), 0);
      const uint64_t dq = gmma_desc(qa, 128, 16 * S::kQCols);
      const uint64_t dqr = gmma_desc(qa + static_cast<uint32_t>(S::q_rope - S::q), 128, 16 * 64);

      float st[kTiles][kNJ][4], sr[kNJ][4];
      uint32_t a[2][4][4];
      if constexpr (S::kKt) {
        // the half tile's descriptor from Q's per-block address too (not hoisted out of the loop)
        const uint64_t dkt = gmma_desc(qa + static_cast<uint32_t>(S::kt - S::q), 128, 16 * S::kKtCols);
        ds_partial_st_kt<N>(row_a, row_b, c, lane, dkt, dq, dqr,
                            full + 2 * S::kRing, full + 2 * S::kRing + 1, 2 * i, st, sr, a);
      } else if constexpr (S::kSplitSt) {
        ds_partial_st_groups<N, 0, 2 * kT0, true>(row_a, row_b, c, dq, dqr, st, sr, a);
      } else {
        ds_partial_st<N>(row_a, row_b, c, dq, dqr, st, sr, a);
      }
      if (kMarks && tid == 0) role_mark(3, i);

      // S = qinv_h . sum_t scale_t S_t + S_rope
      float sa[kTiles], sb[kTiles];
      ds_key_scales(row_a, sa);
      ds_key_scales(row_b, sb);
      float s[kNJ][4];
      if constexpr (S::kSplitSt) {
        // WG1's tiles' sums of this block (written before its P V of block i - 1)
        named_bar_sync(kBarRolesSt + (i & 1), 2 * kThreads);
        float x[kNJ][4];
#pragma unroll
        for (int j = 0; j < kNJ; ++j) {
          const float4 v = xs[((i & 1) * kNJ + j) * kThreads + tid];
          x[j][0] = v.x, x[j][1] = v.y, x[j][2] = v.z, x[j][3] = v.w;
        }
        ds_fold_with<kT0>(st, sr, sa, sb, qv, x, s);
      } else {
        ds_fold(st, sr, sa, sb, qv, s);
      }
      const bool ok0 = ok_bytes[slot * kKeys + ka] != 0, ok1 = ok_bytes[slot * kKeys + kb_] != 0;
      raw_slot_release(empty + slot, lane);  // WG0's reads of the slot are done; WG1's follow

      // the softmax of all 32 heads; the tiles' block maxima of |scale| beside it
      float* buf = s_max + (i & 1) * 128;
      float* tbuf = hand + H::tmax + (i & 1) * 16;
      if constexpr (!kPByWg1) {
        const uint32_t tmax = warp_tile_scale_max(sa, sb, c);
        if (g == 0) tbuf[wq * 4 + c] = __uint_as_float(tmax);
      }
#pragma unroll
      for (int j = 0; j < kNJ; ++j) {
        const float m0 = mask_scale_max(s[j][0], s[j][2], ok0, ok1, p.scale_log2);
        const float m1 = mask_scale_max(s[j][1], s[j][3], ok0, ok1, p.scale_log2);
        if (g == 0) buf[wq * 32 + head_of(j, 0)] = m0, buf[wq * 32 + head_of(j, 1)] = m1;
      }
      merge_bar_sync<1>(0, kThreads);
      float tf[kMT];
      bool moved = !kPByWg1 && tile_exponents(tbuf, e_run, tf);
      float alpha[kNJ][2];
#pragma unroll
      for (int j = 0; j < kNJ; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          alpha[j][e] = head_softmax_step<kRawLazy<kMaxLogits>>(buf, head_of(j, e), m_run[j][e], l_run[j][e], s[j][e], s[j][2 + e]);
          moved |= alpha[j][e] != 1.f;
        }
      moved = __any_sync(0xffffffffu, moved);  // every warp holds all 32 heads' factors: warp 0's are all

      if (i == nb - 1) {
        // the final state for WG1's epilogue: each head's sum over the lanes and warps (through
        // the other parity's maxima buffer, last read before this block's barrier)
        float* s_l = s_max + ((i + 1) & 1) * 128;
        warp_head_sums(l_run, s_l, wq, g, c);
        merge_bar_sync<1>(0, kThreads);
        if (wq == 0 && g == 0) {
#pragma unroll
          for (int j = 0; j < kNJ; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int h = head_of(j, e);
              hand[H::m + h] = m_run[j][e];
              hand[H::l + h] = s_l[h] + s_l[32 + h] + s_l[64 + h] + s_l[96 + h];
            }
          if (!kPByWg1 && c == 0) {
#pragma unroll
            for (int t = 0; t < kTiles; ++t) hand[H::e_run + t] = __int_as_float(e_run[t]);
          }
        }
      }

      // block i - 1's P V has drained: P^T_t of this block (kPByWg1: P itself) and its factors
      if (kMarks && tid == 0) role_mark(4, i);
      if (i > 0) named_bar_sync(kBarRolesPFree, 2 * kThreads);
      if (kMarks && tid == 0) role_mark(5, i);
      if constexpr (kPByWg1) {
#pragma unroll
        for (int j = 0; j < kNJ; ++j) stage[j * kThreads + tid] = make_float4(s[j][0], s[j][1], s[j][2], s[j][3]);
      } else {
        ds_write_pt<RawWg<kRows, kFmt, kDs32Roles>, true>(p_ab, s, sa, sb, e_run, c);
      }
      if (wq == 0) {
        if (g == 0) {
#pragma unroll
          for (int j = 0; j < kNJ; ++j) hand[H::alpha + head_of(j, 0)] = alpha[j][0], hand[H::alpha + head_of(j, 1)] = alpha[j][1];
        }
        if (lane == 0) {
          if constexpr (!kPByWg1) {
#pragma unroll
            for (int mi = 0; mi < kMT; ++mi) hand[H::tile + mi] = tf[mi];
          }
          hand[H::moved] = moved ? 1.f : 0.f;
        }
      }
      if constexpr (!kPByWg1) fence_proxy_async();  // P^T is read next by WG1's wgmmas
      named_bar_arrive(kBarRolesPFull, 2 * kThreads);
      if (kMarks && tid == 0) role_mark(6, i);
    }
    if constexpr (kRolesEndWg0) narrow_epilogue_helper<kRows, 2 * kThreads>(p, w, reinterpret_cast<const float*>(smem + S::ring), tid);
    return;
  } else {
    // ---------------- WG1: O^T ----------------
    const uint64_t dp = gmma_desc(smem_addr(pt), 128, 8 * 128);
    float o[kMT][kNJ][4], m_run[kNJ][2], l_run[kNJ][2];
    narrow_state_init(o, m_run, l_run);
    int e_run[kTiles] = {};
    uint32_t a[2][4][4];
    uint32_t* p_ab = reinterpret_cast<uint32_t*>(RawWg<kRows, kFmt, kDs32Roles>::key_entry(pt, raw_key_logical(ka)));
    static_assert(!kRolesVFirst || (kEarlyV && !kPByWg1), "V first: the value words early, no scales read after the release");
    // S::kSplitSt: tiles kT0 .. 3 of block ib's S^T, folded with its keys' scales, into xs for WG0
    // (block ib's parity: WG0 read the buffer's block ib - 2 before handing block ib - 2 over,
    // which this warpgroup waited for before its P V of block ib - 2)
    if constexpr (S::kSplitSt) {
      if (lane == 0) hand[H::q_addr1 + wq] = __uint_as_float(smem_addr(smem + S::q));
      __syncwarp();
    }
    auto split_st = [&](int ib) {
      if constexpr (S::kSplitSt) {
        const int sl = ib % S::kRing;
        mbar_wait(full + sl, (ib / S::kRing) & 1);
        const uint8_t* bk = ring + sl * S::kSlotBytes;
        const uint8_t *ra = bk + ka * kStride, *rb = bk + kb_ * kStride;
        // Q's descriptors from an address read back each block, as WG0's (not hoisted)
        const uint32_t qa = *reinterpret_cast<volatile uint32_t*>(hand + H::q_addr1 + wq);
        const uint64_t dq = gmma_desc(qa, 128, 16 * S::kQCols);
        float st[kTiles][kNJ][4], sr[kNJ][4];
        ds_partial_st_groups<N, 2 * kT0, 8, false>(ra, rb, c, dq, dq, st, sr, a);
        float sa[kTiles], sb[kTiles], x[kNJ][4];
        ds_key_scales(ra, sa);
        ds_key_scales(rb, sb);
        ds_tile_sums<kT0, kTiles>(st, sa, sb, x);
#pragma unroll
        for (int j = 0; j < kNJ; ++j) xs[((ib & 1) * kNJ + j) * kThreads + tid] = make_float4(x[j][0], x[j][1], x[j][2], x[j][3]);
        named_bar_arrive(kBarRolesSt + (ib & 1), 2 * kThreads);
      }
    };
    if (nb > 0) split_st(0);
    for (int i = 0; i < nb; ++i) {
      const int slot = i % S::kRing;
      if (i + 1 < nb) split_st(i + 1);
      if (kMarks && S::kSplitSt && tid == 0) role_mark(17, i);
      if constexpr (!kRolesVFirst) {
        named_bar_sync(kBarRolesPFull, 2 * kThreads);
        if (kMarks && tid == 0) role_mark(7, i);
      }
      // the slot's bytes for this thread (complete already where WG0 handed the block over)
      mbar_wait(full + slot, (i / S::kRing) & 1);
      const uint8_t* blk = ring + slot * S::kSlotBytes;
      // O^T += V^T P^T_t below: per k-step kk (16 keys) and half (scale tiles 2 half, 2 half + 1:
      // O^T tiles 4 half .. 4 half + 3), one 4-byte word of four rows (keys 16 kk + 4 r + c) per tile
      const uint8_t* vcol = blk + 4 * (8 * wq + g) + c * kStride;
      auto value_word = [&](int h, int tt, int r) {
        return *reinterpret_cast<const uint32_t*>(vcol + (16 * (h >> 1) + 4 * r) * kStride + 128 * (2 * (h & 1) + tt));
      };
      // kEarlyV: all 64 of the block's value words now (and kPByWg1's scales), the slot back
      // to the producer before the factors, P^T and P V
      uint32_t xv[kEarlyV ? 8 : 1][2][4];
      float sa[kTiles], sb[kTiles];
      if constexpr (kPByWg1) {
        ds_key_scales(blk + ka * kStride, sa);
        ds_key_scales(blk + kb_ * kStride, sb);
      }
      if constexpr (kEarlyV) {
#pragma unroll
        for (int h = 0; h < 8; ++h)
#pragma unroll
          for (int tt = 0; tt < 2; ++tt)
#pragma unroll
            for (int r = 0; r < 4; ++r) xv[h][tt][r] = value_word(h, tt, r);
        raw_slot_release(empty + slot, lane);
      }
      if constexpr (kRolesVFirst) {  // the value words and the release before the hand-over (config.h)
        named_bar_sync(kBarRolesPFull, 2 * kThreads);
        if (kMarks && tid == 0) role_mark(7, i);
      }
      const bool moved = hand[H::moved] != 0.f;  // the same word for every thread
      float alpha[kNJ][2], tf[kMT];
#pragma unroll
      for (int j = 0; j < kNJ; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) alpha[j][e] = moved ? hand[H::alpha + head_of(j, e)] : 1.f;
      if constexpr (kPByWg1) {
        // P of this thread's keys and heads, the keys' scales, and the tiles' exponents over WG1's
        // four warps (its barrier: every thread has read P before P^T overwrites it, and every
        // warp's P V of the block before drained)
        float s[kNJ][4];
#pragma unroll
        for (int j = 0; j < kNJ; ++j) {
          const float4 v = stage[j * kThreads + tid];
          s[j][0] = v.x, s[j][1] = v.y, s[j][2] = v.z, s[j][3] = v.w;
        }
        float* tbuf = hand + H::tmax + (i & 1) * 16;
        const uint32_t tmax = warp_tile_scale_max(sa, sb, c);
        if (g == 0) tbuf[wq * 4 + c] = __uint_as_float(tmax);
        merge_bar_sync<1>(1, kThreads);
        const bool grew = tile_exponents(tbuf, e_run, tf);
        if (moved || grew) rescale_narrow_o<true>(o, alpha, tf);  // O^T drained at the last block's end
        ds_write_pt<RawWg<kRows, kFmt, kDs32Roles>, true>(p_ab, s, sa, sb, e_run, c);
        fence_proxy_async();  // read next by wgmma
        merge_bar_sync<1>(1, kThreads);
      } else if (moved) {  // O^T drained at the last block's end
#pragma unroll
        for (int mi = 0; mi < kMT; ++mi) tf[mi] = hand[H::tile + mi];
        rescale_narrow_o<true>(o, alpha, tf);
      }
      auto pv_word = [&](int h, int tt, int r) { return kEarlyV ? xv[kEarlyV ? h : 0][tt][r] : value_word(h, tt, r); };
      ds_pv_block<N, ValueConversion::f16>(o, a, pv_word, dp, kPTile16);
      raw_block_end<kMT, kNJ, !kEarlyV>(o, a, empty + slot, lane);  // drained (and the slot released)
      if (kMarks && tid == 0) role_mark(8, i);
      if (i + 1 < nb) named_bar_arrive(kBarRolesPFree, 2 * kThreads);  // P^T (and kPByWg1's P) may be rewritten
    }
    if (nb > 0) {  // WG0's final state came with the last block's hand-over
#pragma unroll
      for (int j = 0; j < kNJ; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int h = head_of(j, e);
          m_run[j][e] = hand[H::m + h];
          l_run[j][e] = wq == 0 && g == 0 ? hand[H::l + h] : 0.f;  // the epilogue's sum over lanes and warps adds zeros
        }
      if constexpr (!kPByWg1) {
#pragma unroll
        for (int t = 0; t < kTiles; ++t) e_run[t] = __float_as_int(hand[H::e_run + t]);
      }
    }
#pragma unroll
    for (int mi = 0; mi < kMT; ++mi) scale_tile(o[mi], __int_as_float((max(e_run[mi >> 1], 7) - 6) << 23));  // 2^(e_run - 133)
    const int col0 = 4 * (8 * wq + g);
    auto col = [&](int mi, int hf) { return 128 * (mi >> 1) + col0 + 2 * (mi & 1) + hf; };
    // kRolesEndWg0: WG0's threads join the stores as tids 0-127 (the store threads start there)
    constexpr int kHelpers = kRolesEndWg0 ? kThreads : 0;
    narrow_epilogue<kNJ, kMT, kThreads, kMaxLogits, decltype(col), 1, 1, kHelpers, kMarks>(
        p, w, reinterpret_cast<float*>(pt), reinterpret_cast<float*>(smem + S::ring), o, m_run, l_run, wq, g, c, col, 1, nullptr, 1,
        kThreads - kHelpers);
    if (kMarks && tid == 0) role_mark(11, 0);
  }
}

}  // namespace smla::cuda::sparse_decode_family
