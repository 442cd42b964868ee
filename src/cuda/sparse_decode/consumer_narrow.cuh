// The consumer warps of a 16- or 32-row CTA (h_q <= 32: no tensor-core work on padded heads).
// The eight consumer warps are row groups (16 rows) x key groups x value-column halves; a key
// group takes 64 / KG keys of every block, computes their scores with mma.sync m16n8k16 (both
// halves of a group compute the same scores, so no warp waits for another), keeps its own
// online softmax and a 16 x 256 slice of O. The key groups merge (m, l, O) once at the end.
#pragma once

#include <cstdint>

#include "cuda/common/barriers.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/common/online_softmax.cuh"
#include "cuda/sparse_decode/consumer_wide.cuh"
#include "cuda/sparse_decode/epilogue.cuh"
#include "cuda/sparse_decode/producer.cuh"

namespace smla::cuda::sparse_decode_family {

template <int kRows, int kD>
__device__ void consume_narrow(const AttnParams& p, const Work& w, uint8_t* smem) {
  using S = Smem<kRows, kD>;
  constexpr int NG = kRows / 16;                 // row groups
  constexpr int KG = narrow_key_groups(kRows);   // key groups
  constexpr int kGroupKeys = kKeys / KG;         // 16 or 32
  constexpr int kNT = kGroupKeys / 8;            // 8-key score tiles per warp
  constexpr int kRowGroup = 16 * kD;
  const int lane = threadIdx.x & 31, cw = threadIdx.x >> 5;  // consumer warp 0..7
  const int group = cw >> 1, half = cw & 1;
  const int rg = group % NG, kg = group / NG;
  const int key0 = kg * kGroupKeys;
  const int g = lane >> 2, c = lane & 3;
  const int r0 = rg * 16 + g, r1 = r0 + 8;

  // Byte offset of 16-byte chunk `ch` of row r in a core-matrix tile.
  auto tile_off = [](int r, int ch) { return (r >> 3) * kRowGroup + ch * 128 + (r & 7) * 16; };
  const uint32_t a_addr = smem_addr(smem + S::q) + tile_off(rg * 16 + (lane & 15), lane >> 4);
  const uint32_t b_off = tile_off(key0 + (lane >> 4) * 8 + (lane & 7), (lane >> 3) & 1);
  const uint32_t v_off = tile_off(key0 + ((lane >> 3) & 1) * 8 + (lane & 7), half * 32 + (lane >> 4));

  float o[32][4];
#pragma unroll
  for (int i = 0; i < 32; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  RowState st0, st1;

  for (int kb = w.kb_begin; kb < w.kb_end; ++kb) {
    const int i = kb - w.kb_begin;
    const Stage<kRows, kD> stage(smem, i & 1);
    stage.wait_full(i);
    if constexpr (kVariant == 7) {
      stage.release(w, lane);
      continue;
    }
    const uint32_t k_base = smem_addr(stage.tile);

    // ---- S = Q K^T for this warp's 16 rows x kGroupKeys keys
    float sc[kNT][4];
#pragma unroll
    for (int n = 0; n < kNT; ++n) sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.f;
#pragma unroll 4
    for (int ks = 0; ks < kD / 16; ++ks) {
      uint32_t a[4];
      ldmatrix_x4(a, a_addr + ks * 256);
#pragma unroll
      for (int np = 0; np < kNT / 2; ++np) {
        uint32_t b[4];
        ldmatrix_x4(b, k_base + b_off + np * 2 * kRowGroup + ks * 256);
        mma_16816<false>(sc[2 * np], a, b[0], b[1]);
        mma_16816<false>(sc[2 * np + 1], a, b[2], b[3]);
      }
    }

    // ---- mask, online softmax (log2 domain)
    float mx0, mx1;
    mask_scale_rowmax(sc, stage.valid_mask() >> (key0 + 2 * c), p.scale_log2, mx0, mx1);
    float m0, m1;
    const float a0 = update_max(st0, quad_max(mx0), m0);
    const float a1 = update_max(st1, quad_max(mx1), m1);
    float rs0 = 0.f, rs1 = 0.f;
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
      sc[nt][0] = exp2f(sc[nt][0] - m0);
      sc[nt][1] = exp2f(sc[nt][1] - m0);
      sc[nt][2] = exp2f(sc[nt][2] - m1);
      sc[nt][3] = exp2f(sc[nt][3] - m1);
      rs0 += sc[nt][0] + sc[nt][1];
      rs1 += sc[nt][2] + sc[nt][3];
    }
    st0.l = st0.l * a0 + rs0;
    st1.l = st1.l * a1 + rs1;
    rescale_o(o, a0, a1);

    // ---- O += P V over this warp's 256 value columns
#pragma unroll
    for (int kk = 0; kk < kGroupKeys / 16; ++kk) {
      uint32_t a[4];
      a[0] = pack2<false>(sc[2 * kk][0], sc[2 * kk][1]);
      a[1] = pack2<false>(sc[2 * kk][2], sc[2 * kk][3]);
      a[2] = pack2<false>(sc[2 * kk + 1][0], sc[2 * kk + 1][1]);
      a[3] = pack2<false>(sc[2 * kk + 1][2], sc[2 * kk + 1][3]);
#pragma unroll
      for (int dn = 0; dn < 16; ++dn) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, k_base + v_off + kk * 2 * kRowGroup + dn * 256);
        mma_16816<false>(o[2 * dn], a, b[0], b[1]);
        mma_16816<false>(o[2 * dn + 1], a, b[2], b[3]);
      }
    }
    stage.release(w, lane);
  }

  // ---- merge the key groups' (m, l, O); the K tiles are free once every warp is here
  st0.l = quad_sum(st0.l);
  st1.l = quad_sum(st1.l);
  float* s_m = reinterpret_cast<float*>(smem + S::merge);  // [KG][kRows]
  float* s_l = s_m + 4 * 32;
  if (half == 0 && c == 0) {
    s_m[kg * kRows + r0] = st0.m;
    s_m[kg * kRows + r1] = st1.m;
    s_l[kg * kRows + r0] = st0.l;
    s_l[kg * kRows + r1] = st1.l;
  }
  named_bar_sync(kBarMerge, kConsumerThreads);
  float scale[2], m_all[2], l_all[2];
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const int r = k ? r1 : r0;
    const float m_own = k ? st1.m : st0.m;
    float mm = -INFINITY;
#pragma unroll
    for (int gk = 0; gk < KG; ++gk) mm = fmaxf(mm, s_m[gk * kRows + r]);
    const float m_use = mm == -INFINITY ? 0.f : mm;
    float ll = 0.f;
#pragma unroll
    for (int gk = 0; gk < KG; ++gk) ll += s_l[gk * kRows + r] * exp2f(s_m[gk * kRows + r] - m_use);
    scale[k] = exp2f(m_own - m_use);
    m_all[k] = mm;
    l_all[k] = ll;
  }
  float* merged = reinterpret_cast<float*>(smem + S::k);  // [kRows][512] floats, in the K tiles
#pragma unroll 1
  for (int gk = 0; gk < KG; ++gk) {
    if (kg == gk) {
#pragma unroll
      for (int nt = 0; nt < 32; ++nt) {
#pragma unroll
        for (int k = 0; k < 2; ++k) {
          float2* dst = reinterpret_cast<float2*>(merged + (k ? r1 : r0) * kDv + half * 256 + nt * 8 + 2 * c);
          float2 v = make_float2(o[nt][2 * k] * scale[k], o[nt][2 * k + 1] * scale[k]);
          if (gk > 0) {
            const float2 prev = *dst;
            v.x += prev.x;
            v.y += prev.y;
          }
          *dst = v;
        }
      }
    }
    named_bar_sync(kBarMerge, kConsumerThreads);
  }
  if (kg != 0) return;
#pragma unroll
  for (int nt = 0; nt < 32; ++nt) {
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      const float2 v = *reinterpret_cast<const float2*>(merged + (k ? r1 : r0) * kDv + half * 256 + nt * 8 + 2 * c);
      o[nt][2 * k] = v.x;
      o[nt][2 * k + 1] = v.y;
    }
  }
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const int r = k ? r1 : r0;
    if (r >= w.heads) continue;
    const RowResult res = finish_row(p, w, w.head0 + r, m_all[k], l_all[k]);
    store_o_row(p, w, w.head0 + r, half * 256, o, k, res.factor);
    if (half == 0 && c == 0) store_lse(p, w, w.head0 + r, res.lse);
  }
}

}  // namespace smla::cuda::sparse_decode_family
