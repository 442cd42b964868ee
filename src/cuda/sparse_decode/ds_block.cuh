// The per-block pieces of the raw-ring fp8_ds_mla consumers that take a block's whole S^T (the
// 16-row tiles, consumer_narrow_raw_ds.cuh, and the 32-row tiles in roles,
// consumer_narrow_raw_ds32_roles.cuh): the partial S^T sums, their fold with the keys' scales,
// P^T of the four scale tiles, and P V. Fragment rows, key order and reads are those of
// consumer_narrow_raw.cuh.
#pragma once

#include <cstdint>

#include "cuda/common/wgmma.cuh"
#include "cuda/sparse_decode/consumer_narrow_raw.cuh"

namespace smla::cuda::sparse_decode_family {

// This lane's 32 bytes of each of its two keys' RoPE part: bf16 pairs, no conversion.
__device__ __forceinline__ void ds_rope_words(const uint8_t* row_a, const uint8_t* row_b, int c, uint32_t (&wa)[8], uint32_t (&wb)[8]) {
  using L = DsMlaLayout;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const uint4 va = *reinterpret_cast<const uint4*>(row_a + L::rope_offset + 32 * c + 16 * h);
    const uint4 vb = *reinterpret_cast<const uint4*>(row_b + L::rope_offset + 32 * c + 16 * h);
    wa[4 * h] = va.x, wa[4 * h + 1] = va.y, wa[4 * h + 2] = va.z, wa[4 * h + 3] = va.w;
    wb[4 * h] = vb.x, wb[4 * h + 1] = vb.y, wb[4 * h + 2] = vb.z, wb[4 * h + 3] = vb.w;
  }
}

// Partial S^T of a block from this thread's two rows (row_a, row_b): one sum per 128-column scale
// tile (groups 0..7, two per tile: e4m3 -> f16 exact, against Q's f16 latent columns at dq) and
// one over the RoPE columns (group 8: bf16 as stored, against Q's bf16 RoPE part at dqr); the next
// group's fragments are converted while the previous group's wgmmas run. Groups kG0 .. kG1 - 1
// (whole tiles: st[kG0 / 2 ..]) and, with kRope, group 8 (SMLA_SD_DS32_ROLES_SPLIT_ST gives a
// tile range to each warpgroup). Returns with every wgmma drained.
template <int N, int kG0, int kG1, bool kRope, int kNJ>
__device__ __forceinline__ void ds_partial_st_groups(const uint8_t* row_a, const uint8_t* row_b, int c, uint64_t dq, uint64_t dqr,
                                                     float (&st)[4][kNJ][4], float (&sr)[kNJ][4], uint32_t (&a)[2][4][4]) {
  using L = DsMlaLayout;
  static_assert(L::num_scales == 4 && L::d_latent == 512, "four 128-column scale tiles");
  static_assert(kG0 % 2 == 0 && kG1 % 2 == 0 && 0 <= kG0 && kG0 <= kG1 && kG1 <= 8, "whole scale tiles");
  constexpr int kRopeGrp = L::d_latent / 64, kLatent = kG1 - kG0, kGroups = kLatent + (kRope ? 1 : 0);
#pragma unroll
  for (int li = 0; li < kGroups; ++li) {  // li: this call's group count so far
    const int grp = li < kLatent ? kG0 + li : kRopeGrp;
    const bool rope = grp == kRopeGrp;
    uint32_t wa[8], wb[8];
    if (!rope) {
      const uint4 va = *reinterpret_cast<const uint4*>(row_a + 64 * grp + 16 * c);
      const uint4 vb = *reinterpret_cast<const uint4*>(row_b + 64 * grp + 16 * c);
      wa[0] = va.x, wa[1] = va.y, wa[2] = va.z, wa[3] = va.w;
      wb[0] = vb.x, wb[1] = vb.y, wb[2] = vb.z, wb[3] = vb.w;
    } else {
      ds_rope_words(row_a, row_b, c, wa, wb);
    }
    if (li >= 2) {
      wgmma_wait<1>();  // the group two before has read a[li % 2]
      reg_fence(a[li & 1]);
    }
    if (!rope) {
      key_words_to_frags(wa, wb, a[li & 1]);
    } else {
      rope_words_to_frags<4>(wa, wb, a[li & 1]);
    }
    wgmma_fence();
#pragma unroll
    for (int s4 = 0; s4 < 4; ++s4) {
      if (!rope)
        wgmma_m64nNk16_rs<N, false>(st[grp >> 1], a[li & 1][s4], desc_add(dq, (4 * grp + s4) * 16), (grp & 1) || s4 > 0);
      else
        wgmma_m64nNk16_rs<N, true>(sr, a[li & 1][s4], desc_add(dqr, s4 * 16), s4 > 0);
    }
    wgmma_commit();
  }
  wgmma_wait<0>();
#pragma unroll
  for (int t = kG0 / 2; t < kG1 / 2; ++t) reg_fence(st[t]);
  if (kRope) reg_fence(sr);
  reg_fence(a[0]);
  reg_fence(a[1]);
}

// The whole block's partial S^T (every tile and the RoPE columns).
template <int N, int kNJ>
__device__ __forceinline__ void ds_partial_st(const uint8_t* row_a, const uint8_t* row_b, int c, uint64_t dq, uint64_t dqr,
                                              float (&st)[4][kNJ][4], float (&sr)[kNJ][4], uint32_t (&a)[2][4][4]) {
  ds_partial_st_groups<N, 0, 8, true>(row_a, row_b, c, dq, dqr, st, sr, a);
}

// SMLA_SD_DS32_ROLES_KT (config.h): the slot row that S^T's row `arow` of a half tile holds.
// WG0's thread (warp w, fragment row g) owns S^T rows 16 w + g and 16 w + g + 8, its keys ka and
// ka + 4 (RawWg); the half tile puts those keys' columns in those rows.
__device__ __forceinline__ int ds_kt_key(int arow) {
  const int g = arow & 7;
  return (arow & ~15) + (((g & 4) << 1) | ((g & 1) << 1) | ((g >> 1) & 1)) + 4 * ((arow >> 3) & 1);
}

// The converting producer threads (ct < kDsKtThreads) of SMLA_SD_DS32_ROLES_KT: for every block,
// once its rows are in, the latent columns 256 h .. 256 h + 255 of all 64 keys (h = 0, 1) as f16
// (e4m3 -> f16 exact, no scale) into the half tile at `kt`, core matrices (tile_offset<256>) in
// S^T's logical column order (key_words_to_frags: k-step s of a 64-column group takes the low
// byte pairs of the words (c, s), c = 0..3, as its columns 0-7 and the high ones as 8-15, the
// order load_q_f16 gives Q), each half after WG0 has read the one before (kt_empty) and handed
// over on kt_full. A quarter warp writes one core matrix: its eight lanes take eight rows.
template <class S>
__device__ void ds_convert_kt(int ct, int blocks, const uint8_t* ring, uint64_t* full, uint64_t* kt_full, uint64_t* kt_empty,
                              uint8_t* kt) {
  constexpr int kStride = kRawRingStride<static_cast<int>(CacheFormat::fp8_ds_mla)>;
  constexpr int kCols = static_cast<int>(S::kKtCols);
  static_assert(kDsKtThreads == 64 && kCols == 256, "64 threads: 8 rows x 8 (row group, column group) pairs a pass");
  const int r8 = ct & 7, sel = ct >> 3;
  for (int i = 0; i < blocks; ++i) {
    const int slot = i % S::kRing;
    mbar_wait(full + slot, (i / S::kRing) & 1);
    const uint8_t* blk = ring + slot * S::kSlotBytes;
#pragma unroll 1
    for (int h = 0; h < 2; ++h) {
      const int n = 2 * i + h;
      if (n > 0) mbar_wait(kt_empty, (n - 1) & 1);
#pragma unroll 1
      for (int pass = 0; pass < 4; ++pass) {  // rolled: the producer's 72 registers
        const int combo = pass * 8 + sel, rg = combo & 7, grp = combo >> 3;  // 8 row groups x 4 column groups
        const int arow = 8 * rg + r8;
        const uint8_t* src = blk + ds_kt_key(arow) * kStride + kCols * h + 64 * grp;
        uint32_t w[4][4];
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const uint4 v = *reinterpret_cast<const uint4*>(src + 16 * c);
          w[c][0] = v.x, w[c][1] = v.y, w[c][2] = v.z, w[c][3] = v.w;
        }
#pragma unroll
        for (int st = 0; st < 4; ++st) {
          const int ch = 2 * (4 * grp + st);
          *reinterpret_cast<uint4*>(kt + tile_offset<kCols>(arow, ch)) =
              make_uint4(e4m3x2_to_f16x2(w[0][st]), e4m3x2_to_f16x2(w[1][st]), e4m3x2_to_f16x2(w[2][st]), e4m3x2_to_f16x2(w[3][st]));
          *reinterpret_cast<uint4*>(kt + tile_offset<kCols>(arow, ch + 1)) =
              make_uint4(e4m3x2_hi_to_f16x2(w[0][st]), e4m3x2_hi_to_f16x2(w[1][st]), e4m3x2_hi_to_f16x2(w[2][st]),
                         e4m3x2_hi_to_f16x2(w[3][st]));
        }
      }
      fence_proxy_async();  // read next by WG0's wgmmas
      mbar_arrive(kt_full);
    }
  }
}

// ds_partial_st with the latent columns' sums from the half tiles of ds_convert_kt (SS wgmma, A at
// dkt, two halves of the block, `n0` = 2 x the block's index: the half tile's phases) and the RoPE
// columns' from this thread's rows as before. Returns with every wgmma drained and both halves
// released on kt_empty.
template <int N, int kNJ>
__device__ __forceinline__ void ds_partial_st_kt(const uint8_t* row_a, const uint8_t* row_b, int c, int lane, uint64_t dkt,
                                                 uint64_t dq, uint64_t dqr, uint64_t* kt_full, uint64_t* kt_empty, int n0,
                                                 float (&st)[4][kNJ][4], float (&sr)[kNJ][4], uint32_t (&a)[2][4][4]) {
  uint32_t wa[8], wb[8];
  ds_rope_words(row_a, row_b, c, wa, wb);
  rope_words_to_frags<4>(wa, wb, a[0]);
  wgmma_fence();
#pragma unroll
  for (int s4 = 0; s4 < 4; ++s4) wgmma_m64nNk16_rs<N, true>(sr, a[0][s4], desc_add(dqr, s4 * 16), s4 > 0);
  wgmma_commit();
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    mbar_wait(kt_full, (n0 + h) & 1);
    wgmma_fence();
#pragma unroll
    for (int tl = 0; tl < 2; ++tl)
#pragma unroll
      for (int kk = 0; kk < 8; ++kk)
        wgmma_m64nNk16_ss<N, 0, false>(st[2 * h + tl], desc_add(dkt, 16 * (8 * tl + kk)), desc_add(dq, 16 * (8 * (2 * h + tl) + kk)),
                                       kk > 0);
    wgmma_commit();
    wgmma_wait<0>();
    __syncwarp();
    if (lane == 0) mbar_arrive(kt_empty);  // this warp's reads of the half tile are done
  }
#pragma unroll
  for (int t = 0; t < 4; ++t) reg_fence(st[t]);
  reg_fence(sr);
  reg_fence(a[0]);
}

// A key row's four scale-tile factors (float32, at the row's scale offset; a skipped row was
// zeroed, so its factors are 0).
__device__ __forceinline__ void ds_key_scales(const uint8_t* row, float (&s)[4]) {
  const float4 v = *reinterpret_cast<const float4*>(row + DsMlaLayout::scale_offset);
  s[0] = v.x, s[1] = v.y, s[2] = v.z, s[3] = v.w;
}

// S = qinv_h . sum_t scale_t S_t + S_rope for this thread's heads and its two keys (sa, sb: their
// four scales; a skipped row was zeroed, so its scales are 0).
template <int kNJ>
__device__ __forceinline__ void ds_fold(const float (&st)[4][kNJ][4], const float (&sr)[kNJ][4], const float (&sa)[4],
                                        const float (&sb)[4], const float (&qv)[kNJ][2], float (&s)[kNJ][4]) {
#pragma unroll
  for (int j = 0; j < kNJ; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      float xa = 0.f, xb = 0.f;
#pragma unroll
      for (int t = 0; t < 4; ++t) xa += sa[t] * st[t][j][e], xb += sb[t] * st[t][j][2 + e];
      s[j][e] = qv[j][e] * xa + sr[j][e];
      s[j][2 + e] = qv[j][e] * xb + sr[j][2 + e];
    }
}

// SMLA_SD_DS32_ROLES_SPLIT_ST: the scale-weighted sums of tiles kT0 .. kT1 - 1 for this thread's
// heads and two keys (x[j][e]: key a, x[j][2 + e]: key b), the part of ds_fold's sums one
// warpgroup hands the other.
template <int kT0, int kT1, int kNJ>
__device__ __forceinline__ void ds_tile_sums(const float (&st)[4][kNJ][4], const float (&sa)[4], const float (&sb)[4],
                                             float (&x)[kNJ][4]) {
#pragma unroll
  for (int j = 0; j < kNJ; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      float xa = 0.f, xb = 0.f;
#pragma unroll
      for (int t = kT0; t < kT1; ++t) xa += sa[t] * st[t][j][e], xb += sb[t] * st[t][j][2 + e];
      x[j][e] = xa, x[j][2 + e] = xb;
    }
}

// ds_fold with tiles 0 .. kT - 1 from st and the others' sums given (x, ds_tile_sums).
template <int kT, int kNJ>
__device__ __forceinline__ void ds_fold_with(const float (&st)[4][kNJ][4], const float (&sr)[kNJ][4], const float (&sa)[4],
                                             const float (&sb)[4], const float (&qv)[kNJ][2], const float (&x)[kNJ][4],
                                             float (&s)[kNJ][4]) {
  if constexpr (kFoldFromX) {
    // SMLA_SD_LEAN_STEP & 4 (config.h): the sums of tiles 0 .. kT - 1 start from the others'
#pragma unroll
    for (int j = 0; j < kNJ; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float xa = x[j][e], xb = x[j][2 + e];
#pragma unroll
        for (int t = 0; t < kT; ++t) xa += sa[t] * st[t][j][e], xb += sb[t] * st[t][j][2 + e];
        s[j][e] = qv[j][e] * xa + sr[j][e];
        s[j][2 + e] = qv[j][e] * xb + sr[j][2 + e];
      }
  } else {
    float own[kNJ][4];
    ds_tile_sums<0, kT>(st, sa, sb, own);
#pragma unroll
    for (int j = 0; j < kNJ; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        s[j][e] = qv[j][e] * (own[j][e] + x[j][e]) + sr[j][e];
        s[j][2 + e] = qv[j][e] * (own[j][2 + e] + x[j][2 + e]) + sr[j][2 + e];
      }
  }
}

// P^T_t of the four scale tiles for this thread's heads and keys (ds_p_word; kF16: with each
// tile's running exponent e_run); Wg: the tile's RawWg (its P^T word offsets).
template <class Wg, bool kF16, int kNJ>
__device__ __forceinline__ void ds_write_pt(uint32_t* p_ab, const float (&s)[kNJ][4], const float (&sa)[4], const float (&sb)[4],
                                            const int (&e_run)[4], int c) {
  if constexpr (kF16 && kPtF16x2) {
    // SMLA_SD_LEAN_STEP & 1 (config.h): P of the two keys in f16 once per head, each tile's
    // factors of the two keys in f16 once per tile (scale . 2^(133 - e) < 2^7; P <= 2^8), one
    // HMUL2 a word (< 2^15)
    __half2 pp[kNJ][2];
#pragma unroll
    for (int j = 0; j < kNJ; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) pp[j][e] = __floats2half2_rn(s[j][e], s[j][2 + e]);
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      const float f = __int_as_float((260 - e_run[t]) << 23);
      const __half2 sf = __floats2half2_rn(sa[t] * f, sb[t] * f);
#pragma unroll
      for (int j = 0; j < kNJ; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const __half2 w = __hmul2(pp[j][e], sf);
          p_ab[Wg::p_word(t, j, c, e)] = *reinterpret_cast<const uint32_t*>(&w);
        }
    }
  } else {
#pragma unroll
    for (int t = 0; t < 4; ++t)
#pragma unroll
      for (int j = 0; j < kNJ; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) p_ab[Wg::p_word(t, j, c, e)] = ds_p_word<kF16>(s[j][e], s[j][2 + e], sa[t], sb[t], e_run[t]);
  }
}

// O^T += V^T P^T_t over a block: per k-step kk (16 keys) and half (scale tiles 2 half, 2 half + 1:
// O^T tiles 4 half .. 4 half + 3), one 4-byte word of four rows (keys 16 kk + 4 r + c) per scale
// tile, word(h, tt, r) with h = 2 kk + half, bytes paired and converted (kConv) against P^T_t at
// dp + t kPTile16 (f16, or bf16 for the bf16 conversions). The last wgmmas stay in flight.
template <int N, ValueConversion kConv, int kMT, int kNJ, class Word>
__device__ __forceinline__ void ds_pv_block(float (&o)[kMT][kNJ][4], uint32_t (&a)[2][4][4], Word word, uint64_t dp, int kPTile16) {
  static_assert(kMT == 8, "512 value columns");
#pragma unroll
  for (int h = 0; h < 8; ++h) {
    const int kk = h >> 1, half = h & 1;
    uint32_t x[2][4];
#pragma unroll
    for (int tt = 0; tt < 2; ++tt)
#pragma unroll
      for (int r = 0; r < 4; ++r) x[tt][r] = word(h, tt, r);
    if (h >= 2) {
      wgmma_wait<1>();
      reg_fence(a[h & 1]);
    }
#pragma unroll
    for (int tt = 0; tt < 2; ++tt)  // O^T tiles 4 half + 2 tt (bytes 0/1 of a word), + 1 (bytes 2/3)
      value_words_to_frags<kConv>(x[tt][0], x[tt][1], x[tt][2], x[tt][3], a[h & 1][2 * tt], a[h & 1][2 * tt + 1]);
    wgmma_fence();
#pragma unroll
    for (int m4 = 0; m4 < 4; ++m4) {
      const int mt = 4 * half + m4;
      wgmma_m64nNk16_rs<N, kConv != ValueConversion::f16>(o[mt], a[h & 1][m4], desc_add(dp, (mt >> 1) * kPTile16 + kk * 16), 1);
    }
    wgmma_commit();
  }
}

}  // namespace smla::cuda::sparse_decode_family
