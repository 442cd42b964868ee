// The two consumer warpgroups of a 64-row CTA (64 heads of one token):
//   WG0: S = Q K^T (36 or 32 x wgmma m64n64k16, Q and K from shared memory), mask, online
//        softmax, P -> shared memory with the row rescale factors, then O[:, 0:256] += P V
//        (4 x m64n256k16, P from registers);
//   WG1: waits for P, rescales O[:, 256:512], O[:, 256:512] += P V (P and V from shared memory).
// WG0 owns the softmax state; at the end it publishes each row's final factor for WG1.
// Each warpgroup releases a K tile (one arrive per warp) once its wgmmas reading it completed.
#pragma once

#include <cstdint>

#include "cuda/common/barriers.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/common/online_softmax.cuh"
#include "cuda/common/wgmma.cuh"
#include "cuda/sparse_decode/epilogue.cuh"
#include "cuda/sparse_decode/k_tile.cuh"
#include "cuda/sparse_decode/producer.cuh"
#include "cuda/sparse_decode/timeline.cuh"

namespace smla::cuda::sparse_decode_family {

// kSw: the K tile as the TMA unit writes it (config.h kSwizzled); K and V descriptors from
// KTileDesc (k_tile.cuh).
template <int kD, bool kSw = false>
struct WideTiles {
  static constexpr int kRowGroup = 16 * kD;  // bytes of 8 rows of the Q tile
  using S = Smem<64, kD>;
  using KT = KTileDesc<kD, kSw>;
  // Descriptors of k-step 0; later steps add to the start address in the low word only.
  __device__ static uint64_t q(uint8_t* smem) { return gmma_desc(smem_addr(smem + S::q), 128, kRowGroup); }
  __device__ static uint64_t k(uint8_t* smem, int s) { return KT::k(smem_addr(smem + S::k + s * S::kKBytes)); }
  __device__ static uint32_t k_step(int ks) { return KT::k_step(ks); }
  // V = the K tile read MN-major; `half` selects value columns 256 half ... + 255.
  __device__ static uint64_t v(uint8_t* smem, int s, int half) {
    return KT::v(smem_addr(smem + S::k + s * S::kKBytes), 256 * half);
  }
  // 16-byte units from V's keys 0..15 to keys 16 kk ..; and from its columns 0..127 to 128..255.
  static constexpr uint32_t kVKStep = KT::kVKStep;
  static constexpr uint32_t kVHi = KT::v_col(128) / 16;
  __device__ static uint64_t p(uint8_t* smem) { return gmma_desc(smem_addr(smem + S::p), 128, 8 * 128); }
};

// The two 128-column halves of a warpgroup's 64 x 256 accumulator (m64n128 wgmmas: 64
// accumulators each fit the kernel's 128-register entry budget, which ptxas checks per instruction).
__device__ __forceinline__ float (&o_lo(float (&o)[32][4]))[16][4] { return *reinterpret_cast<float(*)[16][4]>(&o[0]); }
__device__ __forceinline__ float (&o_hi(float (&o)[32][4]))[16][4] { return *reinterpret_cast<float(*)[16][4]>(&o[16]); }

// P = exp2(scale S - m) of this thread's fragment rows (m0: row g, m1: row g + 8; one FFMA and
// one MUFU.EX2 a value) as packed bf16 pairs, and the rows' sums over this thread's columns.
// Masked logits are -inf and scale > 0 (the host keeps it at FLT_MIN at least), so they give 0.
__device__ __forceinline__ void exp_pack_p(const float (&sc)[8][4], float scale, float m0, float m1, uint32_t (&pk)[8][2],
                                           float& rs0, float& rs1) {
  rs0 = 0.f;
  rs1 = 0.f;
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    const float e0 = exp2_ftz(fmaf(sc[nt][0], scale, -m0)), e1 = exp2_ftz(fmaf(sc[nt][1], scale, -m0));
    const float e2 = exp2_ftz(fmaf(sc[nt][2], scale, -m1)), e3 = exp2_ftz(fmaf(sc[nt][3], scale, -m1));
    rs0 += e0 + e1;
    rs1 += e2 + e3;
    pk[nt][0] = pack2<false>(e0, e1);
    pk[nt][1] = pack2<false>(e2, e3);
  }
}

// Issues O[:, half] += P V with P from shared memory (descriptor dp; kPStep: 16-byte units
// from one 16-key step of P to the next, 16 for core matrices, 2 for the 128-byte swizzle) and
// V from dv; commits the group without waiting for it.
template <class T, uint32_t kPStep = 16>
__device__ __forceinline__ void issue_pv_from_shared(float (&o)[32][4], uint64_t dp, uint64_t dv) {
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const uint64_t d = desc_add(dv, kk * T::kVKStep);
    wgmma_m64n128k16_ss_tb(o_lo(o), desc_add(dp, kk * kPStep), d, 1);
    wgmma_m64n128k16_ss_tb(o_hi(o), desc_add(dp, kk * kPStep), desc_add(d, T::kVHi), 1);
  }
  wgmma_commit();
}

// Issues O[:, half] += P V with P from registers (pk: the softmax's packed bf16 pairs, this
// thread's accumulator fragment of the 64 x 64 P) and V from the descriptor dv (keys 0..15 of
// the half); commits the group without waiting for it.
template <class T>
__device__ __forceinline__ void issue_pv_from_registers(float (&o)[32][4], const uint32_t (&pk)[8][2], uint64_t dv) {
  uint32_t a[4][4];
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    a[kk][0] = pk[2 * kk][0];
    a[kk][1] = pk[2 * kk][1];
    a[kk][2] = pk[2 * kk + 1][0];
    a[kk][3] = pk[2 * kk + 1][1];
  }
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const uint64_t d = desc_add(dv, kk * T::kVKStep);
    wgmma_m64n128k16_rs(o_lo(o), a[kk], d);
    wgmma_m64n128k16_rs(o_hi(o), a[kk], desc_add(d, T::kVHi));
  }
  wgmma_commit();
}

// The same, waiting for the wgmmas.
template <class T>
__device__ __forceinline__ void pv_from_registers(float (&o)[32][4], const uint32_t (&pk)[8][2], uint64_t dv) {
  issue_pv_from_registers<T>(o, pk, dv);
  wgmma_wait<0>();
  reg_fence(o);
}

// kOutTile (config.h kBf16PersistEnds) pieces. A warp of WG0: the unit's Q is no longer read.
template <int kD>
__device__ __forceinline__ void arrive_q_free(uint8_t* smem, int lane) {
  __syncwarp();
  if (lane == 0) mbar_arrive(reinterpret_cast<uint64_t*>(smem + Smem<64, kD>::q_free));
}
// The K tile of the unit's last block (n0: blocks of the CTA's earlier units).
template <int kD>
__device__ __forceinline__ uint8_t* last_tile(uint8_t* smem, const Work& w, int n0) {
  return Stage<64, kD>(smem, (n0 + w.kb_end - w.kb_begin - 1) & 1).tile;
}
// Every warp of both consumer warpgroups, once its rows of O left that tile (or never went there).
// kPartB (config.h kEmptyHalves): the release of WG1's part, on empty_b.
template <int kD, bool kPartB = false>
__device__ __forceinline__ void release_last_tile(uint8_t* smem, const Work& w, int n0, int lane) {
  if (w.kb_end > w.kb_begin) {
    const Stage<64, kD> st(smem, (n0 + w.kb_end - w.kb_begin - 1) & 1);
    if constexpr (kPartB) st.release_b(w, lane);
    else st.release(w, lane);
  }
}
// O's bf16 rows leave by the TMA unit: the launch built out's map, the unit is unsplit and has
// a last tile.
__device__ __forceinline__ bool out_tile_ok(const AttnParams& p, const Work& w) {
  return p.o_tma && staged_rows_ok(w) && w.kb_end > w.kb_begin;
}

// n0: K blocks the CTA handled before this unit (persistent CTAs; stage and phase continue).
// kPair: the CTA is one of a pair, whose producers leave the proxy fence to the consumers.
// kSw: the K tiles are TMA boxes with the 128-byte swizzle (dense decode, config.h kSwizzled).
// kMaxLogits: also keep each row's exact maximum (the lazy rescale's m may lag it) for
// sparse prefill's max_logits (bf16 kernels).
// kStaged (config.h kStagedEpilogue: one-unit CTAs, where nothing writes the tiles after the
// last block; kPersistStaged: persistent CTAs, whose rows go to the Q tile (d512: row 63 to the P
// tile, kRow63), which the next unit's Q load waits to store into): O's rows leave through shared
// memory and bulk copies.
// kRow63: where staged row 63 goes (config.h kStagedRow63; 0 in sequence).
// kQSw (config.h kQTma): the Q tile in the 128-byte swizzle, boxes of 64 columns (load_q_tma).
// kFenceFull (config.h kBf16AsyncArrive): the K tile's rows are the producers' cp.async writes,
// completed on "full" without a producer fence: fence after the wait.
// kOutTile (config.h kBf16PersistEnds, persistent CTAs): WG0's warps arrive on Smem::q_free once
// the unit's last QK^T is done (the producer then loads the next unit's Q), and O's rows leave
// through the last block's K tile (epilogue.cuh store_rows_tile), which both warpgroups release
// only after that.
// next (persistent_units, config.h kBf16NextWorkEarly): called once, while the unit's last P V
// runs (or before the epilogue of a unit without blocks), to make the next unit's Work.
template <int kD, bool kPair, bool kSw = false, bool kMaxLogits = false, bool kStaged = false, int kRow63 = 0,
          bool kQSw = false, bool kFenceFull = false, bool kOutTile = false, class Next = NoHook>
__device__ void consume_wg0(const AttnParams& p, const Work& w, uint8_t* smem, int n0 = 0, Next next = {}) {
  using T = WideTiles<kD, kSw>;
  using S = Smem<64, kD>;
  const int lane = threadIdx.x & 31, wq = (threadIdx.x >> 5) & 3;  // warp within the warpgroup
  const int g = lane >> 2, c = lane & 3;
  const int r0 = 16 * wq + g, r1 = r0 + 8;
  float* s_scale = reinterpret_cast<float*>(smem + S::scale);
  float* s_factor = reinterpret_cast<float*>(smem + S::factor);
  uint8_t* s_p = smem + S::p;
  // P tile (64 x 64 bf16, K-major core matrices): element (r, key) at
  // (r / 8) * 1024 + (key / 8) * 128 + (r % 8) * 16 + (key % 8) * 2.
  uint8_t* p_row0 = s_p + (r0 >> 3) * 1024 + (r0 & 7) * 16 + 4 * c;
  uint8_t* p_row1 = p_row0 + 1024;

  float o[32][4];
#pragma unroll
  for (int i = 0; i < 32; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  RowState st0, st1;
  // kMaxLogits: the rows' exact maxima. The persistent bf16 build (kBf16Persistent, where the
  // two extra registers spilled) rescales at every new maximum instead and reads st.m.
  constexpr bool kExactMax = kMaxLogits && kBf16Persistent && !kBf16PersistEnds;
  float top0 = -INFINITY, top1 = -INFINITY;
  using QT = KTileDesc<kD, true>;  // kQSw: Q's boxes have the K tiles' swizzled geometry (64 rows)
  const uint64_t dq = kQSw ? QT::k(smem_addr(smem + S::q)) : T::q(smem);

  for (int kb = w.kb_begin; kb < w.kb_end; ++kb) {
    const int i = kb - w.kb_begin, n = n0 + i, s = n & 1;
    const Stage<64, kD> stage(smem, s);
    stage.wait_full(n, (kPair && kPairConsumerFence) || kFenceFull);
    if (kTimeline && i == 0 && threadIdx.x == 0) timeline_mark(4);
    if constexpr (kConsumersIdle) {
      if (kOutTile && kb + 1 == w.kb_end) arrive_q_free<kD>(smem, lane);
      if (!kOutTile || kb + 1 < w.kb_end) stage.release(w, lane);
      if (kb + 1 == w.kb_end) next();  // (the persistent walk's next Work, as below)
      continue;
    }

    // ---- S = Q K^T: 64 heads x 64 keys (swizzled tiles read the valid-key words first: config.h kMaskEarly)
    constexpr bool kEarly = kMaskEarly && kSw;
    const uint64_t valid_early = kEarly ? stage.valid_mask() : 0;
    float sc[8][4];
    const uint64_t dk = T::k(smem, s);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks)
      wgmma_m64n64k16_ss(sc, desc_add(dq, kQSw ? QT::k_step(ks) : ks * 16), desc_add(dk, T::k_step(ks)), ks > 0);
    wgmma_commit();
    wgmma_wait<0>();
    reg_fence(sc);
    if constexpr (kOutTile)
      if (kb + 1 == w.kb_end) {
        arrive_q_free<kD>(smem, lane);
        if (kTimeline && threadIdx.x == 0) timeline_mark(3);
      }

    // ---- mask, online softmax (log2 domain: the rows' maxima scaled here, each logit in its
    // exponent's FFMA)
    float mx0, mx1;
    mask_rowmax(sc, kEarly ? valid_early : stage.valid_mask(), c, mx0, mx1);
    mx0 = quad_max(mx0) * p.scale_log2;
    mx1 = quad_max(mx1) * p.scale_log2;
    float m0, m1;
    // kExactMax: no lazy rescale, so st.m is each row's exact maximum (no extra registers).
    if constexpr (kMaxLogits && !kExactMax) top0 = fmaxf(top0, mx0), top1 = fmaxf(top1, mx1);
    const float a0 = kLazyRescale && !kExactMax ? update_max_lazy(st0, mx0, m0) : update_max(st0, mx0, m0);
    const float a1 = kLazyRescale && !kExactMax ? update_max_lazy(st1, mx1, m1) : update_max(st1, mx1, m1);
    uint32_t pk[8][2];
    float rs0, rs1;
    exp_pack_p(sc, p.scale_log2, m0, m1, pk, rs0, rs1);
    st0.l = st0.l * a0 + rs0;
    st1.l = st1.l * a1 + rs1;

    // ---- hand P and the rescale factors to WG1 (single-buffered: wait until it read the last)
    if (i > 0) named_bar_sync(kBarPFree, kConsumerThreads);
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      *reinterpret_cast<uint32_t*>(p_row0 + nt * 128) = pk[nt][0];
      *reinterpret_cast<uint32_t*>(p_row1 + nt * 128) = pk[nt][1];
    }
    if (c == 0) {
      s_scale[r0] = a0;
      s_scale[r1] = a1;
    }
    fence_proxy_async();  // WG1 reads P with wgmma
    named_bar_arrive(kBarPReady, kConsumerThreads);

    // ---- O[:, 0:256] += P V (pv_from_registers spelled out: the call changes the bf16 and
    // dense-TMA kernels' SASS, and this is the measured code)
    rescale_o(o, a0, a1);
    uint32_t a[4][4];
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      a[kk][0] = pk[2 * kk][0];
      a[kk][1] = pk[2 * kk][1];
      a[kk][2] = pk[2 * kk + 1][0];
      a[kk][3] = pk[2 * kk + 1][1];
    }
    const uint64_t dv = T::v(smem, s, 0);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const uint64_t d = desc_add(dv, kk * T::kVKStep);
      wgmma_m64n128k16_rs(o_lo(o), a[kk], d);
      wgmma_m64n128k16_rs(o_hi(o), a[kk], desc_add(d, T::kVHi));
    }
    wgmma_commit();
    if (kb + 1 == w.kb_end) next();
    wgmma_wait<0>();
    reg_fence(o);
    reg_fence(a);
    if (!kOutTile || kb + 1 < w.kb_end) stage.release(w, lane);
  }
  if (w.kb_end <= w.kb_begin) {  // (a unit without blocks: its hook and Q release here)
    next();
    if constexpr (kOutTile) arrive_q_free<kD>(smem, lane);
  }

  if (kTimeline && threadIdx.x == 0) timeline_mark(5);
  // ---- epilogue: full row sums, final factors for WG1, this half of O
  // (kOutTile, persistent CTAs: also in a unit without blocks, where WG1 syncs here too, so that
  // the warpgroups meet once a unit and WG0 cannot reach the next unit's final-factor barrier, or
  // write Smem::factor, before WG1 has read this one's)
  if (!kConsumersIdle && (w.kb_end > w.kb_begin || kOutTile))
    named_bar_sync(kBarPFree, kConsumerThreads);  // WG1 is past its last P
  if (kUnitTimeline && threadIdx.x == 0) timeline_mark(10);
  st0.l = quad_sum(st0.l);
  st1.l = quad_sum(st1.l);
  const RowResult res0 = finish_row_as<kWideFastEnd>(p, w, w.head0 + r0, st0.m, st0.l, r0 < w.heads);
  const RowResult res1 = finish_row_as<kWideFastEnd>(p, w, w.head0 + r1, st1.m, st1.l, r1 < w.heads);
  if (c == 0) {
    s_factor[r0] = res0.factor;
    s_factor[r1] = res1.factor;
  }
  named_bar_arrive(kBarFinal, kConsumerThreads);
  if (kUnitTimeline && threadIdx.x == 0) timeline_mark(11);
  // kStaged: WG1 is past its last P V (kBarPFree), so the Q and K tiles are free (persistent
  // CTAs stage in the Q tile alone, d512's row 63 in the P tile: config.h kPersistStaged).
  static_assert(!kStaged || 64 * kStageRowBytes <= S::p, "staged rows beyond the Q and K tiles");
  const bool staged = kStaged && staged_rows_ok(w);
  const bool tiled = kOutTile && out_tile_ok(p, w);
  if (staged) store_rows_staged<kRow63>(p, w, smem + S::q, 0, o, res0.factor, res1.factor);
  if (tiled) store_rows_tile<kBf16OutByWg1>(p, w, last_tile<kD>(smem, w, n0), 0, o, res0.factor, res1.factor);
  if (kUnitTimeline && threadIdx.x == 0) timeline_mark(12);
  if (r0 < w.heads) {
    if (!staged && !tiled) store_o_row(p, w, w.head0 + r0, 0, o, 0, res0.factor);
    if (c == 0) store_lse(p, w, w.head0 + r0, res0.lse);
    if (kMaxLogits && c == 0) store_max_logit(p, w, w.head0 + r0, kExactMax ? st0.m : top0);
  }
  if (r1 < w.heads) {
    if (!staged && !tiled) store_o_row(p, w, w.head0 + r1, 0, o, 1, res1.factor);
    if (c == 0) store_lse(p, w, w.head0 + r1, res1.lse);
    if (kMaxLogits && c == 0) store_max_logit(p, w, w.head0 + r1, kExactMax ? st1.m : top1);
  }
  if constexpr (kOutTile)
    if (!(kBf16OutByWg1 && tiled)) release_last_tile<kD>(smem, w, n0, lane);  // else WG1 releases for both
  if (kTimeline && threadIdx.x == 0) timeline_mark(6);
}

// kEmptyB (config.h kEmptyHalves): the warps release their tile on empty_b (Smem::alt_bars +
// kStages), the barrier of the boxes WG1 reads.
template <int kD, bool kPair, bool kSw = false, bool kStaged = false, int kRow63 = 0, bool kFenceFull = false,
          bool kOutTile = false, class Next = NoHook, bool kEmptyB = false>
__device__ void consume_wg1(const AttnParams& p, const Work& w, uint8_t* smem, int n0 = 0, Next next = {}) {
  using T = WideTiles<kD, kSw>;
  using S = Smem<64, kD>;
  const int lane = threadIdx.x & 31, wq = (threadIdx.x >> 5) & 3;
  const int r0 = 16 * wq + (lane >> 2), r1 = r0 + 8;
  const float* s_scale = reinterpret_cast<const float*>(smem + S::scale);
  const float* s_factor = reinterpret_cast<const float*>(smem + S::factor);

  float o[32][4];
#pragma unroll
  for (int i = 0; i < 32; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  const uint64_t dp = T::p(smem);
  static_assert(!(kEmptyB && kConsumersIdle), "the idle variants release on one barrier");

  for (int kb = w.kb_begin; kb < w.kb_end; ++kb) {
    const int i = kb - w.kb_begin, n = n0 + i, s = n & 1;
    const Stage<64, kD> stage(smem, s);
    stage.wait_full(n, (kPair && kPairConsumerFence) || kFenceFull);
    if constexpr (kConsumersIdle) {
      if (!kOutTile || kb + 1 < w.kb_end) stage.release(w, lane);
      continue;
    }
    named_bar_sync(kBarPReady, kConsumerThreads);
    rescale_o(o, s_scale[r0], s_scale[r1]);
    issue_pv_from_shared<T>(o, dp, T::v(smem, s, 1));
    wgmma_wait<0>();
    reg_fence(o);
    named_bar_arrive(kBarPFree, kConsumerThreads);
    if (!kOutTile || kb + 1 < w.kb_end) {
      if constexpr (kEmptyB) stage.release_b(w, lane);
      else stage.release(w, lane);
    }
  }

  if constexpr (kOutTile && !kConsumersIdle)
    if (w.kb_end <= w.kb_begin) named_bar_sync(kBarPFree, kConsumerThreads);  // with WG0's epilogue sync
  next();  // (while WG0 finishes its rows)
  named_bar_sync(kBarFinal, kConsumerThreads);
  const bool tiled = kOutTile && out_tile_ok(p, w);
  if (tiled) {
    store_rows_tile<kBf16OutByWg1>(p, w, last_tile<kD>(smem, w, n0), 1, o, s_factor[r0], s_factor[r1]);
  } else if (kStaged && staged_rows_ok(w)) {
    store_rows_staged<kRow63>(p, w, smem + S::q, 256, o, s_factor[r0], s_factor[r1]);
  } else {
    if (r0 < w.heads) store_o_row(p, w, w.head0 + r0, 256, o, 0, s_factor[r0]);
    if (r1 < w.heads) store_o_row(p, w, w.head0 + r1, 256, o, 1, s_factor[r1]);
  }
  if constexpr (kOutTile) {
    release_last_tile<kD, kEmptyB>(smem, w, n0, lane);
    if (kBf16OutByWg1 && tiled) release_last_tile<kD>(smem, w, n0, lane);  // for WG0's warp too
  }
}

}  // namespace smla::cuda::sparse_decode_family
