// The alternating consumer warpgroups of a 64-row CTA (config.h kAlt; measurement build).
// Warpgroup g owns O[:, 256 g .. 256 g + 255] and the blocks n with n % 2 == g: for its block
// it runs S = Q K^T, the mask and the online softmax against the running maximum the other
// published for block n - 1, writes P and the new maximum to shared memory ("ready n"), and
// adds P V to its half from registers; the other warpgroup rescales its half and adds P V from
// shared memory. A warpgroup issues the QK^T of its next block before it waits for the other's
// P, so each softmax overlaps the other's MMAs.
//
// One P buffer and one maximum slot suffice: P(n) is read from shared memory only by the
// warpgroup that writes P(n + 1), after its own read completed. The K tile of block n comes in
// two column halves (A: columns 0-255, the values of O's left half; B: the rest), each with its
// own full and empty barriers: a half is released by the warpgroups that read it (the owner
// after its QK^T, the warpgroup of that half of O after its P V).
#pragma once

#include <cstdint>
#include <type_traits>

#include "cuda/common/barriers.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/common/online_softmax.cuh"
#include "cuda/common/wgmma.cuh"
#include "cuda/sparse_decode/consumer_wide.cuh"
#include "cuda/sparse_decode/half_stage.cuh"
#include "cuda/sparse_decode/epilogue.cuh"
#include "cuda/sparse_decode/producer.cuh"

namespace smla::cuda::sparse_decode_family {

// Barrier counts of the halves' "empty" barriers: stage s holds the blocks owned by warpgroup
// s. Half A is read by the owner (QK^T) and by warpgroup 0 (P V); half B by the owner and by
// warpgroup 1. A half that only its owner reads has one reader warpgroup.
__device__ __forceinline__ int alt_empty_count(int stage, int half) { return (stage == half ? 1 : 2) * 4; }


// exp2 with no branch around it (ex2.approx, as exp2f compiles to).
__device__ __forceinline__ float alt_exp2(float x) {
  float y;
  asm volatile("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// The factor O and l are scaled by when the running maximum moves from m_old to m_new (both
// warpgroups compute it from the same two values, so they agree bit for bit). Branch-free:
// it runs while wgmmas are in flight.
__device__ __forceinline__ float alt_alpha(float m_old, float m_new) {
  const float e = alt_exp2(m_old - (m_new == -INFINITY ? 0.f : m_new));
  return m_new == m_old ? 1.f : e;
}

// The new running maximum of a row (lazy as update_max_lazy when kLazyRescale) given the block's.
__device__ __forceinline__ float alt_new_max(float m_old, float block_max) {
  return kLazyRescale ? (block_max > m_old + kLazyRescaleLog2 ? block_max : m_old) : fmaxf(m_old, block_max);
}



// The end of a 64-row tile whose two warpgroups hold O's column halves against the same row
// maxima (m0, m1: alternating and seesaw consumers): each row's sums of both warpgroups added
// through s_l[2][64] (kMaxLogits: the two running maxima through s_top[2][64]), then warpgroup
// wg's half of O; WG0 also writes lse (and max_logits).
template <bool kMaxLogits>
__device__ __forceinline__ void two_half_epilogue(const AttnParams& p, const Work& w, int wg, int r0, int r1, int c,
                                                  float m0, float m1, float l0, float l1, float top0, float top1,
                                                  float* s_l, float* s_top, const float (&o)[32][4]) {
  l0 = quad_sum(l0);
  l1 = quad_sum(l1);
  if (c == 0) {
    s_l[wg * 64 + r0] = l0;
    s_l[wg * 64 + r1] = l1;
    if constexpr (kMaxLogits) {
      s_top[wg * 64 + r0] = top0;
      s_top[wg * 64 + r1] = top1;
    }
  }
  named_bar_sync(kBarFinal, kConsumerThreads);
  const float t0 = s_l[r0] + s_l[64 + r0], t1 = s_l[r1] + s_l[64 + r1];
  const RowResult res0 = finish_row_as<kWideFastEnd>(p, w, w.head0 + r0, m0, t0, r0 < w.heads);
  const RowResult res1 = finish_row_as<kWideFastEnd>(p, w, w.head0 + r1, m1, t1, r1 < w.heads);
  if (r0 < w.heads) {
    store_o_row(p, w, w.head0 + r0, 256 * wg, o, 0, res0.factor);
    if (wg == 0 && c == 0) store_lse(p, w, w.head0 + r0, res0.lse);
    if (kMaxLogits && wg == 0 && c == 0) store_max_logit(p, w, w.head0 + r0, fmaxf(s_top[r0], s_top[64 + r0]));
  }
  if (r1 < w.heads) {
    store_o_row(p, w, w.head0 + r1, 256 * wg, o, 1, res1.factor);
    if (wg == 0 && c == 0) store_lse(p, w, w.head0 + r1, res1.lse);
    if (kMaxLogits && wg == 0 && c == 0) store_max_logit(p, w, w.head0 + r1, fmaxf(s_top[r1], s_top[64 + r1]));
  }
}

// kWg: this warpgroup (its half of O, its blocks' parity), a template argument so that every
// branch around the wgmmas depends on uniform values only (ptxas serializes them otherwise).
template <int kD, bool kSw, bool kMaxLogits, int kWg>
__device__ void consume_alt(const AttnParams& p, const Work& w, uint8_t* smem) {
  using T = WideTiles<kD, kSw>;
  using S = Smem<64, kD>;
  constexpr int g_wg = kWg;
  const int lane = threadIdx.x & 31, wq = (threadIdx.x >> 5) & 3;
  const int g = lane >> 2, c = lane & 3;
  const int r0 = 16 * wq + g, r1 = r0 + 8;
  float* s_m = reinterpret_cast<float*>(smem + S::alt_m);
  float* s_l = reinterpret_cast<float*>(smem + S::alt_l);
  float* s_top = reinterpret_cast<float*>(smem + S::alt_top);
  uint8_t* p_row0 = smem + S::p + (r0 >> 3) * 1024 + (r0 & 7) * 16 + 4 * c;
  uint8_t* p_row1 = p_row0 + 1024;
  constexpr int kKSteps = kD / 16;

  float o[32][4];
#pragma unroll
  for (int i = 0; i < 32; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float m0 = -INFINITY, m1 = -INFINITY;  // running maxima (reference of the exponentials)
  float l0 = 0.f, l1 = 0.f;              // sums over this warpgroup's blocks, this thread's columns
  float top0 = -INFINITY, top1 = -INFINITY;
  const uint64_t dq = T::q(smem), dp = T::p(smem);
  const int blocks = w.kb_end - w.kb_begin;

  // Block n is ours (kOwn) and block n - 1 the other's (kOther). Each variant runs straight
  // through and waits for every wgmma it issued, so no accumulator is in flight across a branch
  // (ptxas would serialize the wgmmas otherwise).
  auto step = [&](auto own_c, auto other_c, int n) {
    constexpr bool kOwn = decltype(own_c)::value, kOther = decltype(other_c)::value;
    float sc[8][4];
    const AltStage<kD> so(smem, n & 1), sp(smem, (n - 1) & 1);
    // Every mbarrier wait comes first: a wait is a loop, and no loop or branch may run while
    // wgmmas are in flight. (The owner of block n - 1 waited for both of its halves before its
    // P was published, so this wait is already satisfied then.)
    if constexpr (kOther) mbar_wait(sp.full(g_wg), ((n - 1) >> 1) & 1);
    if constexpr (kOwn) {  // ---- S = Q K^T of our block, issued before we wait for the other's P
      mbar_wait(so.full(0), (n >> 1) & 1);
      mbar_wait(so.full(1), (n >> 1) & 1);
      const uint64_t dk = KTileDesc<kD, kSw>::k(so.tile);
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < kKSteps; ++ks) wgmma_m64n64k16_ss(sc, desc_add(dq, ks * 16), desc_add(dk, T::k_step(ks)), ks > 0);
      wgmma_commit();
    }
    if constexpr (kOther) {  // ---- the other's block n - 1: rescale our half, add P V from shared memory
      named_bar_sync(kBarAltReady + ((n - 1) & 1), kConsumerThreads);
      const float n0 = s_m[r0], n1 = s_m[r1];
      const float a0 = alt_alpha(m0, n0), a1 = alt_alpha(m1, n1);
      m0 = n0;
      m1 = n1;
      l0 *= a0;
      l1 *= a1;
      rescale_o_all(o, a0, a1);
      issue_pv_from_shared<T>(o, dp, KTileDesc<kD, kSw>::v(sp.tile, 256 * g_wg));
    }
    if constexpr (!kOwn) {
      wgmma_wait<0>();
      reg_fence(o);
      sp.release(g_wg, lane);
      return;
    } else {
      // ---- our QK^T is done (the other's P V may still run); the half only QK^T read is free
      if constexpr (kOther) wgmma_wait<1>();
      else wgmma_wait<0>();
      reg_fence(sc);
      so.release(g_wg ^ 1, lane);
      float mx0, mx1;
      mask_rowmax(sc, so.valid_mask(), c, mx0, mx1);
      mx0 = quad_max(mx0) * p.scale_log2;
      mx1 = quad_max(mx1) * p.scale_log2;
      if constexpr (kMaxLogits) top0 = fmaxf(top0, mx0), top1 = fmaxf(top1, mx1);
      const float nm0 = alt_new_max(m0, mx0), nm1 = alt_new_max(m1, mx1);
      const float a0 = alt_alpha(m0, nm0), a1 = alt_alpha(m1, nm1);
      const float u0 = nm0 == -INFINITY ? 0.f : nm0, u1 = nm1 == -INFINITY ? 0.f : nm1;  // exponents' reference
      uint32_t pk[8][2];
      float rs0, rs1;
      exp_pack_p(sc, p.scale_log2, u0, u1, pk, rs0, rs1);
      if constexpr (kOther) {  // the other's P V is done: its half of block n - 1 is free, and so is P
        wgmma_wait<0>();
        reg_fence(o);
        sp.release(g_wg, lane);
        named_bar_sync(kBarAltPRead + g_wg, 128);
      }
      // ---- publish P and the new maxima ("ready n"), then add P V to our half from registers
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        *reinterpret_cast<uint32_t*>(p_row0 + nt * 128) = pk[nt][0];
        *reinterpret_cast<uint32_t*>(p_row1 + nt * 128) = pk[nt][1];
      }
      if (c == 0) {
        s_m[r0] = nm0;
        s_m[r1] = nm1;
      }
      fence_proxy_async();  // the other reads P with wgmma
      named_bar_arrive(kBarAltReady + (n & 1), kConsumerThreads);
      m0 = nm0;
      m1 = nm1;
      l0 = l0 * a0 + rs0;
      l1 = l1 * a1 + rs1;
      rescale_o(o, a0, a1);
      pv_from_registers<T>(o, pk, KTileDesc<kD, kSw>::v(so.tile, 256 * g_wg));
      so.release(g_wg, lane);
    }
  };
  using True = std::true_type;
  using False = std::false_type;
  if (kWg == 0 && blocks > 0) step(True{}, False{}, 0);
  for (int n = kWg == 0 ? 2 : 1; n < blocks; n += 2) step(True{}, True{}, n);
  if (blocks > 0 && (blocks & 1) == kWg) step(False{}, True{}, blocks);

  // ---- epilogue: both warpgroups end with the same maxima
  two_half_epilogue<kMaxLogits>(p, w, g_wg, r0, r1, c, m0, m1, l0, l1, top0, top1, s_l, s_top, o);
}

}  // namespace smla::cuda::sparse_decode_family
