// Writing a consumer warp's rows of O: bf16 into `out` when the CTA holds the whole key list
// of its request (sink applied here), float32 partials plus the partial lse otherwise (merged
// and sink-scaled by the combine kernel).
#pragma once

#include <cstdint>

#include "cuda/attention/attention_params.h"
#include "cuda/common/bulk_store.cuh"
#include "cuda/common/kv_load.cuh"
#include "cuda/common/online_softmax.cuh"
#include "cuda/common/sink.cuh"
#include "cuda/common/wgmma.cuh"
#include "cuda/sparse_decode/work.cuh"

namespace smla::cuda::sparse_decode_family {

// Final factor of a row: 1 / l (0 for an empty row), times the sink's factor when unsplit.
// `real`: the row is a head of the call (padded rows of a tile are never written).
struct RowResult {
  float factor, lse;
};

__device__ __forceinline__ RowResult finish_row(const AttnParams& p, const Work& w, int head, float m, float l,
                                                bool real = true) {
  const bool empty = !(l > 0.f);
  RowResult r;
  r.lse = empty ? -INFINITY : (m + log2f(l)) * kLn2;
  r.factor = empty ? 0.f : p.out_scale / l;
  if (real && w.n_splits == 1 && p.sink && !empty) r.factor *= sink_factor_dev(__ldg(p.sink + head * p.sink_st), r.lse);
  return r;
}

// finish_row by the MUFU unit's approximations and no branch (lg2.approx for lse: absolute error
// ~3e-6 at most over the l of 1 .. 2^17 a row can sum to, against SPEC §6's 1e-5 + 1e-4 |lse|;
// rcp.approx for 1 / l and the sink's factor: ~2 ulp), where log2f's polynomial, the division's
// slow-path check and call, and expf keep each head's end a long chain of its own, one head after
// another (narrow tiles end four to eight heads a thread: config.h kNarrowFastEnd).
__device__ __forceinline__ RowResult finish_row_fast(const AttnParams& p, const Work& w, int head, float m, float l,
                                                     bool real = true) {
  const bool empty = !(l > 0.f);
  RowResult r;
  r.lse = empty ? -INFINITY : (m + __log2f(l)) * kLn2;
  r.factor = empty ? 0.f : __fdividef(p.out_scale, l);
  if (real && w.n_splits == 1 && p.sink && !empty) {
    const float s = __ldg(p.sink + head * p.sink_st);
    r.factor *= s == INFINITY ? 0.f : s == -INFINITY ? 1.f : __fdividef(1.f, 1.f + __expf(s - r.lse));
  }
  return r;
}

// finish_row_fast with the head's sink at an address made by the caller (null: no sink factor,
// as for a split's partial or a padded row; config.h kNarrowHeadOuts).
__device__ __forceinline__ RowResult finish_row_fast_at(const AttnParams& p, float m, float l, const float* sink) {
  const bool empty = !(l > 0.f);
  RowResult r;
  r.lse = empty ? -INFINITY : (m + __log2f(l)) * kLn2;
  r.factor = empty ? 0.f : __fdividef(p.out_scale, l);
  if (sink != nullptr && !empty) {
    const float s = __ldg(sink);
    r.factor *= s == INFINITY ? 0.f : s == -INFINITY ? 1.f : __fdividef(1.f, 1.f + __expf(s - r.lse));
  }
  return r;
}

// finish_row or (kFast) finish_row_fast: the measurement switches' one call site per consumer.
template <bool kFast>
__device__ __forceinline__ RowResult finish_row_as(const AttnParams& p, const Work& w, int head, float m, float l,
                                                   bool real = true) {
  if constexpr (kFast) return finish_row_fast(p, w, head, m, l, real);
  else return finish_row(p, w, head, m, l, real);
}

// A split's partial row of `head` (part_o / part_lse / part_max rows: split slot, token, head).
// A prefill tail part (config.h kTailMerge; a launch with tail_parts has no other splits): the
// heads of its tile only, from comb_h0.
__device__ __forceinline__ int64_t part_row(const AttnParams& p, const Work& w, int head) {
  if constexpr (kTailMerge)
    if (p.tail_parts > 0) return (static_cast<int64_t>(w.split_slot) * p.s_q + w.t) * p.heads_tile + head - p.comb_h0;
  return (static_cast<int64_t>(w.split_slot) * p.s_q + w.t) * p.h_q + head;
}

// Fragment row k (0: row g, 1: row g + 8) of a 16 x 256 accumulator slice o[32][4] (mma.sync C
// layout), columns col0 + 8 nt + 2c, + 1, times `factor`.
__device__ __forceinline__ void store_o_row(const AttnParams& p, const Work& w, int head, int col0,
                                            const float (&o)[32][4], int k, float factor) {
  const int c = threadIdx.x & 3;
  if (w.n_splits == 1) {
    uint16_t* row = static_cast<uint16_t*>(p.out) + w.req * p.o_sb + w.t * p.o_st + head * p.o_sh + col0;
#pragma unroll
    for (int nt = 0; nt < 32; ++nt)
      *reinterpret_cast<uint32_t*>(row + nt * 8 + 2 * c) = to16x2(o[nt][2 * k] * factor, o[nt][2 * k + 1] * factor, false);
  } else {
    const int64_t prow = part_row(p, w, head);
    float* row = p.part_o + prow * kDv + col0;
#pragma unroll
    for (int nt = 0; nt < 32; ++nt)
      *reinterpret_cast<float2*>(row + nt * 8 + 2 * c) = make_float2(o[nt][2 * k] * factor, o[nt][2 * k + 1] * factor);
  }
}

// Whether this work's rows of O can leave by bulk copies (kStagedEpilogue): bf16 rows of `out`
// (no split), which are 16-byte aligned (the API rejects an `out` whose pointer or outer strides
// are not: validate.cpp check_aligned).
__device__ __forceinline__ bool staged_rows_ok(const Work& w) { return w.n_splits == 1; }

// kStagedEpilogue (config.h): a 64-row consumer warp's 16 rows (16 wq .. 16 wq + 15) of O's
// columns [col0, col0 + 256), bf16, through shared memory at `stage` (the Q and K tiles' bytes,
// free once both warpgroups' last MMAs are done) and into `out` by one bulk copy a row (lane i:
// row 16 wq + i) instead of 32 narrow stores a thread. Row k of the fragment (0: row g, 1: row
// g + 8) is scaled by f[k]. Staged rows are padded (config.h kStageRowWords) so that a warp's
// stores fall in distinct banks. kRow63: row 63 at that byte offset from `stage` instead of in
// sequence (config.h kStagedRow63: d512's persistent CTAs).
template <int kRow63 = 0>
__device__ __forceinline__ void store_rows_staged(const AttnParams& p, const Work& w, uint8_t* stage, int col0,
                                                  const float (&o)[32][4], float f0, float f1) {
  const int lane = threadIdx.x & 31, wq = (threadIdx.x >> 5) & 3, g = lane >> 2, c = lane & 3;
  const int r = 16 * wq + lane;  // the row this lane copies out (lanes 0-15)
  const bool copies = lane < 16 && r < w.heads;
  uint32_t* s0 = reinterpret_cast<uint32_t*>(stage) + (16 * wq + g) * kStageRowWords + col0 / 2 + c;
  uint32_t* s1 = s0 + 8 * kStageRowWords;
  if constexpr (kRow63 != 0)
    if (16 * wq + g + 8 == 63) s1 = reinterpret_cast<uint32_t*>(stage + kRow63) + col0 / 2 + c;
#pragma unroll
  for (int nt = 0; nt < 32; ++nt) {
    s0[nt * 4] = to16x2(o[nt][0] * f0, o[nt][1] * f0, false);
    s1[nt * 4] = to16x2(o[nt][2] * f1, o[nt][3] * f1, false);
  }
  fence_proxy_async();  // read next by the bulk copies (async proxy)
  __syncwarp();
  if (copies) {
    uint16_t* row = static_cast<uint16_t*>(p.out) + w.req * p.o_sb + w.t * p.o_st + (w.head0 + r) * p.o_sh + col0;
    const uint32_t* src = (kRow63 != 0 && r == 63 ? reinterpret_cast<const uint32_t*>(stage + kRow63)
                                                   : reinterpret_cast<const uint32_t*>(stage) + r * kStageRowWords) + col0 / 2;
    bulk_copy_s2g(row, static_cast<uint32_t>(__cvta_generic_to_shared(src)), 256 * 2);
    bulk_commit_and_wait_read();
  }
}

// config.h kBf16PersistEnds: warpgroup `half`'s rows of O (columns 256 half .. + 255, rows
// scaled by f0 / f1 as store_rows_staged) into `tile`, a free K tile, as four 64-column boxes of
// out's tensor map (8 KB each, boxes 4 half .. 4 half + 3, the 128-byte swizzle: a warp's stores
// fall in distinct banks), then out by the TMA unit (rows past h_q are not written). Thread 0 of
// the warpgroup issues and waits until they are read; its warp releases the tile after that.
// kWg1Issues (config.h kBf16OutByWg1): warpgroup 0 only writes its rows and signals; thread 0 of
// warpgroup 1 issues all eight boxes once both halves are in and waits for their read, so
// warpgroup 0 goes on to its next unit at once (warpgroup 1 then releases the tile for both).
template <bool kWg1Issues = false>
__device__ __forceinline__ void store_rows_tile(const AttnParams& p, const Work& w, uint8_t* tile, int half,
                                                const float (&o)[32][4], float f0, float f1) {
  const int lane = threadIdx.x & 31, wq = (threadIdx.x >> 5) & 3, g = lane >> 2, c = lane & 3;
  const int r0 = 16 * wq + g;  // and r0 + 8; both have swizzle line g
  uint8_t* base = tile + half * 4 * 8192;
  uint8_t* row0 = base + r0 * 128 + 4 * c;
#pragma unroll
  for (int nt = 0; nt < 32; ++nt) {
    uint8_t* at = row0 + (nt >> 3) * 8192 + (((nt & 7) ^ g) << 4);
    *reinterpret_cast<uint32_t*>(at) = to16x2(o[nt][0] * f0, o[nt][1] * f0, false);
    *reinterpret_cast<uint32_t*>(at + 8 * 128) = to16x2(o[nt][2] * f1, o[nt][3] * f1, false);
  }
  fence_proxy_async();  // read next by the TMA unit
  // The boxes thread 0 of the warpgroup issues: its own four, or with kWg1Issues (warpgroup 1)
  // all eight once warpgroup 0's rows are in too.
  constexpr int kBoxes = kWg1Issues ? 8 : 4;
  const int first = kWg1Issues ? 0 : 4 * half;
  if constexpr (kWg1Issues) {
    if (half == 0) {
      named_bar_arrive(kBarOutTile, 256);
      return;
    }
    named_bar_sync(kBarOutTile, 256);
  } else {
    named_bar_sync(kBarOutTile + half, 128);
  }
  if (threadIdx.x % 128 == 0) {
    const uint32_t src = static_cast<uint32_t>(__cvta_generic_to_shared(tile + first * 8192));
#pragma unroll
    for (int b = 0; b < kBoxes; ++b) tma_store_4d(&p.o_map, src + b * 8192, 64 * (first + b), w.head0, w.t, w.req);
    bulk_commit_and_wait_read();
  }
}

// Four values of a row of O (columns col .. col + 3, already scaled): bf16 into `out`, or the
// float32 partial of the split.
__device__ __forceinline__ void store_o4(const AttnParams& p, const Work& w, int head, int col, const float4& v) {
  if (w.n_splits == 1) {
    uint16_t* row = static_cast<uint16_t*>(p.out) + w.req * p.o_sb + w.t * p.o_st + head * p.o_sh + col;
    *reinterpret_cast<uint2*>(row) = make_uint2(to16x2(v.x, v.y, false), to16x2(v.z, v.w, false));
  } else {
    const int64_t prow = part_row(p, w, head);
    *reinterpret_cast<float4*>(p.part_o + prow * kDv + col) = v;
  }
}

__device__ __forceinline__ void store_lse(const AttnParams& p, const Work& w, int head, float lse) {
  if (w.n_splits == 1) {
    p.lse[w.req * p.l_sb + w.t * p.l_st + head * p.l_sh] = lse;
  } else {
    p.part_lse[part_row(p, w, head)] = lse;
  }
}

// Sparse prefill: a head's largest scaled logit, natural units (-inf: no key).
// `max_log2`: the maximum in the kernel's log2 domain (logit * softmax scale * log2 e).
// A part of a tail unit (config.h kTailMerge) writes its own maximum for the combine. Only a
// prefill launch with a tail split has part_max; the splits of a decode launch (the bf16-row
// kernels keep maxima too) have max_logits null and write none.
__device__ __forceinline__ void store_max_logit(const AttnParams& p, const Work& w, int head, float max_log2) {
  if constexpr (kTailMerge) {
    if (p.tail_parts > 0 && w.n_splits > 1) {
      p.part_max[part_row(p, w, head)] = max_log2 * kLn2;
      return;
    }
  }
  if (p.max_logits != nullptr) p.max_logits[w.req * p.m_sb + w.t * p.m_st + head * p.m_sh] = max_log2 * kLn2;
}

// O *= alpha of its row (fragment rows g and g + 8), every element (no branch: the alternating
// consumers run it while a QK^T is in flight).
__device__ __forceinline__ void rescale_o_all(float (&o)[32][4], float a0, float a1) {
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    o[i][0] *= a0;
    o[i][1] *= a0;
    o[i][2] *= a1;
    o[i][3] *= a1;
  }
}

// As rescale_o_all; skipped when no row of the warp moved its running maximum (every alpha
// exactly 1), the common case once the maxima settle.
__device__ __forceinline__ void rescale_o(float (&o)[32][4], float a0, float a1) {
  if (!__any_sync(0xffffffffu, a0 != 1.f || a1 != 1.f)) return;
  rescale_o_all(o, a0, a1);
}

}  // namespace smla::cuda::sparse_decode_family
