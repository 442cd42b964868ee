// The "seesaw" consumer warpgroups of a 64-row CTA on TMA pages (config.h kSeesaw; measurement
// build SMLA_SD_ALT=2, d_qk 576). Warpgroup g owns O[:, 256 g .. 256 g + 255]; WG0 takes the even
// blocks (stage 0), WG1 the odd ones (stage 1). Pair j of blocks (2j, 2j + 1), with M the
// running row maximum:
//   WG0: softmax of S(2j) against M(2j - 1) -> P0, M(2j), a0; P0 into K0's RoPE box; "S0 ready";
//        O_L = a0 O_L + P0 V0L (P0 from registers); ["S1 ready"] O_L = a1 O_L + P1 V1L (P1 from
//        K1's RoPE box); then the QK^T of block 2j + 2.
//   WG1: ["S0 ready"] O_R = a0 O_R + P0 V0R (P0 from shared memory, in flight during:) softmax
//        of S(2j + 1) against M(2j) -> P1, M(2j + 1), a1; P1 into K1's RoPE box; "S1 ready";
//        O_R = a1 O_R + P1 V1R (registers); then the QK^T of block 2j + 3.
// So each warpgroup's softmax runs while the other's MMAs hold the tensor pipe. A block's P
// lives in its K tile's RoPE box (columns 512-575, free once its QK^T is done): P tiles are
// 64 x 64 bf16 with the 128-byte swizzle, the layout of a K box, read K-major.
// K tiles come in halves (A: boxes 0-3, B: boxes 4-8), released by every warpgroup that reads
// them: K0.A by WG0 (QK^T, P0 V0L); K0.B by WG0 (QK^T, P0 written) and WG1 (P0 V0R); K1.A by WG1
// (QK^T) and WG0 (P1 V1L); K1.B by WG1 (P V1R, P1 written) and WG0 (P1 V1L).
// SMLA_SD_SEESAW_STAGGER=1: WG1 issues its QK^T only once WG0's is done, so that it runs during
// WG0's softmax instead of beside WG0's QK^T.
// Every wgmma a step issues is waited for inside the step (no accumulator in flight across a
// branch: ptxas would serialize the wgmmas).
#pragma once

#include <cstdint>
#include <type_traits>

#include "cuda/common/barriers.cuh"
#include "cuda/common/online_softmax.cuh"
#include "cuda/common/wgmma.cuh"
#include "cuda/sparse_decode/consumer_alt.cuh"
#include "cuda/sparse_decode/consumer_wide.cuh"
#include "cuda/sparse_decode/epilogue.cuh"

namespace smla::cuda::sparse_decode_family {

// Empty-barrier counts (consumer warps) of the seesaw's K halves, as above.
__host__ __device__ constexpr int seesaw_empty_count(int stage, int half) { return stage == 0 && half == 0 ? 4 : 8; }

template <int kD>
struct SeesawTiles {
  using S = Smem<64, kD>;
  using KT = KTileDesc<kD, true>;
  static_assert(kD == 576, "P lives in the RoPE box of the K tile");
  static constexpr uint32_t kBox = 64 * 128;
  __device__ static uint8_t* tile(uint8_t* smem, int s) { return smem + S::k + s * S::kKBytes; }
  __device__ static uint8_t* p_tile(uint8_t* smem, int s) { return tile(smem, s) + 8 * kBox; }
  // P as the A operand: K-major, 128-byte swizzle; a k-step of 16 keys is 32 bytes.
  __device__ static uint64_t p_desc(uint8_t* smem, int s) { return gmma_desc_sw128(smem_addr(p_tile(smem, s)), 16, 1024); }
  __device__ static uint64_t v(uint8_t* smem, int s, int half) { return KT::v(smem_addr(tile(smem, s)), 256 * half); }
};

// S = Q K^T of the tile in stage s (issued and committed).
template <int kD>
__device__ __forceinline__ void seesaw_qk(float (&sc)[8][4], uint8_t* smem, int s) {
  using KT = KTileDesc<kD, true>;
  const uint64_t dq = WideTiles<kD, true>::q(smem), dk = KT::k(smem_addr(SeesawTiles<kD>::tile(smem, s)));
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < kD / 16; ++ks) wgmma_m64n64k16_ss(sc, desc_add(dq, ks * 16), desc_add(dk, KT::k_step(ks)), ks > 0);
  wgmma_commit();
}

// This thread's P fragment (rows r0 = 16 wq + g and r0 + 8) into a swizzled P tile: element
// (r, key) at (r / 8) * 1024 + (r % 8) * 128 + ((key / 8) ^ (r % 8)) * 16 + (key % 8) * 2.
__device__ __forceinline__ void seesaw_store_p(uint8_t* tile, const uint32_t (&pk)[8][2], int r0, int g, int c) {
  uint8_t* row0 = tile + (r0 >> 3) * 1024 + g * 128 + 4 * c;
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    *reinterpret_cast<uint32_t*>(row0 + ((nt ^ g) << 4)) = pk[nt][0];
    *reinterpret_cast<uint32_t*>(row0 + 1024 + ((nt ^ g) << 4)) = pk[nt][1];
  }
}

template <int kD, int kWg>
__device__ void consume_seesaw(const AttnParams& p, const Work& w, uint8_t* smem) {
  using T = SeesawTiles<kD>;
  using S = Smem<64, kD>;
  const int lane = threadIdx.x & 31, wq = (threadIdx.x >> 5) & 3;
  const int g = lane >> 2, c = lane & 3;
  const int r0 = 16 * wq + g, r1 = r0 + 8;
  // M and the factors of the even blocks (WG0 writes) and of the odd blocks (WG1 writes).
  float* s_m0 = reinterpret_cast<float*>(smem + S::scale);
  float* s_a0 = reinterpret_cast<float*>(smem + S::factor);
  float* s_m1 = reinterpret_cast<float*>(smem + S::alt_m);
  float* s_a1 = reinterpret_cast<float*>(smem + S::alt_top);
  float* s_l = reinterpret_cast<float*>(smem + S::alt_l);  // [2][64] each warpgroup's row sums

  float o[32][4];
#pragma unroll
  for (int i = 0; i < 32; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float sc[8][4];
  float m0 = -INFINITY, m1 = -INFINITY;  // running maxima (M after the latest block)
  float l0 = 0.f, l1 = 0.f;              // sums of this warpgroup's P, this thread's columns, against M
  const int nb = w.kb_end - w.kb_begin;
  const AltStage<kD> k0(smem, 0), k1(smem, 1);
  // The rows' maxima and factors for the other warpgroup.
  auto publish = [&](float* s_m, float* s_a, float a0, float a1) {
    if (c == 0) {
      s_m[r0] = m0;
      s_m[r1] = m1;
      s_a[r0] = a0;
      s_a[r1] = a1;
    }
  };
  auto wait_tile = [&](const AltStage<kD>& st, int j) {
    mbar_wait(st.full(0), j & 1);
    mbar_wait(st.full(1), j & 1);
  };
  // Softmax of sc against the maxima (ma0, ma1) -> pk, the new maxima and factors; l updated.
  auto softmax = [&](const AltStage<kD>& st, float ma0, float ma1, uint32_t (&pk)[8][2], float& a0, float& a1) {
    float mx0, mx1;
    mask_rowmax(sc, st.valid_mask(), c, mx0, mx1);
    mx0 = quad_max(mx0) * p.scale_log2;
    mx1 = quad_max(mx1) * p.scale_log2;
    const float n0 = alt_new_max(ma0, mx0), n1 = alt_new_max(ma1, mx1);
    a0 = alt_alpha(ma0, n0);
    a1 = alt_alpha(ma1, n1);
    float rs0, rs1;
    exp_pack_p(sc, p.scale_log2, n0 == -INFINITY ? 0.f : n0, n1 == -INFINITY ? 0.f : n1, pk, rs0, rs1);
    l0 = l0 * a0 + rs0;
    l1 = l1 * a1 + rs1;
    m0 = n0;
    m1 = n1;
  };
  // Softmax of the block in stage s, its P into that tile's RoPE box and the maxima and factors
  // into shared memory, then "ready" to the other warpgroup (which reads P with wgmma).
  auto hand_over = [&](const AltStage<kD>& st, int s, float ma0, float ma1, uint32_t (&pk)[8][2], float& a0, float& a1,
                       float* s_m, float* s_a, int bar) {
    softmax(st, ma0, ma1, pk, a0, a1);
    seesaw_store_p(T::p_tile(smem, s), pk, r0, g, c);
    publish(s_m, s_a, a0, a1);
    fence_proxy_async();
    named_bar_arrive(bar, kConsumerThreads);
  };

  if constexpr (kWg == 0) {
    if (nb > 0) {
      wait_tile(k0, 0);
      seesaw_qk<kD>(sc, smem, 0);
      wgmma_wait<0>();
      reg_fence(sc);
      if (kSeesawStagger && nb > 1) named_bar_arrive(kBarSeeQ, kConsumerThreads);
    }
    // kHas1: block 2j + 1 exists; kNext: block 2j + 2 exists.
    auto step = [&](auto has1_c, auto next_c, int j) {
      constexpr bool kHas1 = decltype(has1_c)::value, kNext = decltype(next_c)::value;
      uint32_t pk[8][2];
      float a0, a1;
      hand_over(k0, 0, m0, m1, pk, a0, a1, s_m0, s_a0, kBarSeeS0);
      k0.release(1, lane);
      rescale_o(o, a0, a1);
      issue_pv_from_registers<WideTiles<kD, true>>(o, pk, T::v(smem, 0, 0));
      if constexpr (kHas1) {
        named_bar_sync(kBarSeeS1, kConsumerThreads);
        const float b0 = s_a1[r0], b1 = s_a1[r1];
        m0 = s_m1[r0];
        m1 = s_m1[r1];
        wgmma_wait<0>();
        reg_fence(o);
        k0.release(0, lane);
        l0 *= b0;
        l1 *= b1;
        rescale_o(o, b0, b1);
        issue_pv_from_shared<WideTiles<kD, true>, 2>(o, T::p_desc(smem, 1), T::v(smem, 1, 0));
        wgmma_wait<0>();
        reg_fence(o);
        k1.release(0, lane);
        k1.release(1, lane);
      } else {
        wgmma_wait<0>();
        reg_fence(o);
        k0.release(0, lane);
      }
      if constexpr (kNext) {
        wait_tile(k0, j + 1);
        seesaw_qk<kD>(sc, smem, 0);
        wgmma_wait<0>();
        reg_fence(sc);
        if (kSeesawStagger && 2 * j + 3 < nb) named_bar_arrive(kBarSeeQ, kConsumerThreads);
      }
    };
    using True = std::true_type;
    using False = std::false_type;
    const int pairs = nb / 2;
    for (int j = 0; j + 1 < pairs; ++j) step(True{}, True{}, j);
    if (pairs > 0) {
      if (nb & 1) step(True{}, True{}, pairs - 1);
      else step(True{}, False{}, pairs - 1);
    }
    if (nb & 1) step(False{}, False{}, pairs);
  } else {
    if (nb > 1) {
      wait_tile(k1, 0);
      if (kSeesawStagger) named_bar_sync(kBarSeeQ, kConsumerThreads);
      seesaw_qk<kD>(sc, smem, 1);
      wgmma_wait<0>();
      reg_fence(sc);
      k1.release(0, lane);
    }
    // kHas1: block 2j + 1 exists; kNext: block 2j + 3 exists.
    auto step = [&](auto has1_c, auto next_c, int j) {
      constexpr bool kHas1 = decltype(has1_c)::value, kNext = decltype(next_c)::value;
      named_bar_sync(kBarSeeS0, kConsumerThreads);
      const float e0 = s_a0[r0], e1 = s_a0[r1];
      const float n0 = s_m0[r0], n1 = s_m0[r1];
      l0 *= e0;
      l1 *= e1;
      rescale_o(o, e0, e1);
      issue_pv_from_shared<WideTiles<kD, true>, 2>(o, T::p_desc(smem, 0), T::v(smem, 0, 1));
      if constexpr (kHas1) {
        uint32_t pk[8][2];
        float a0, a1;
        hand_over(k1, 1, n0, n1, pk, a0, a1, s_m1, s_a1, kBarSeeS1);
        wgmma_wait<0>();
        reg_fence(o);
        k0.release(1, lane);
        rescale_o(o, a0, a1);
        issue_pv_from_registers<WideTiles<kD, true>>(o, pk, T::v(smem, 1, 1));
        wgmma_wait<0>();
        reg_fence(o);
        k1.release(1, lane);
        if constexpr (kNext) {
          wait_tile(k1, j + 1);
          if (kSeesawStagger) named_bar_sync(kBarSeeQ, kConsumerThreads);
          seesaw_qk<kD>(sc, smem, 1);
          wgmma_wait<0>();
          reg_fence(sc);
          k1.release(0, lane);
        }
      } else {
        m0 = n0;
        m1 = n1;
        wgmma_wait<0>();
        reg_fence(o);
        k0.release(1, lane);
      }
    };
    using True = std::true_type;
    using False = std::false_type;
    const int pairs = nb / 2;
    for (int j = 0; j + 1 < pairs; ++j) step(True{}, True{}, j);
    if (pairs > 0) step(True{}, False{}, pairs - 1);
    if (nb & 1) step(False{}, False{}, pairs);
  }

  // ---- epilogue: both warpgroups end with the same maxima
  two_half_epilogue<false>(p, w, kWg, r0, r1, c, m0, m1, l0, l1, 0.f, 0.f, s_l, nullptr, o);
}

}  // namespace smla::cuda::sparse_decode_family
