// The per-block online softmax and the epilogue of a narrow tile (16/32 heads, keys in M: S^T
// and O^T hold heads in columns), shared by the narrow consumers (consumer_narrow_wgmma.cuh,
// consumer_narrow_raw.cuh, consumer_narrow_raw_ds.cuh). A thread holds S^T rows r and r + 8 (its
// two keys) and, per 8-head column tile j, heads 8 j + 2 c + e (c = lane % 4, e = 0, 1).
#pragma once

#include <cstdint>
#include <type_traits>

#include "cuda/common/barriers.cuh"
#include "cuda/common/online_softmax.cuh"
#include "cuda/sparse_decode/config.h"
#include "cuda/sparse_decode/epilogue.cuh"
#include "cuda/sparse_decode/timeline.cuh"

namespace smla::cuda::sparse_decode_family {

// The named barrier of consumer warpgroup cw (0: kId0, 1: kId1, 2: kId2 when kId2 >= 0; the
// consumer warpgroups of a raw-ring tile have one each), one bar.sync instruction per id, the id
// an immediate.
template <int kId0, int kId1, int kId2 = -1>
__device__ __forceinline__ void wg_bar_sync(int cw, int threads) {
  if (kId2 >= 0 && cw == 2) asm volatile("bar.sync %0, %1;\n" ::"n"(kId2 < 0 ? 0 : kId2), "r"(threads) : "memory");
  else if (cw) asm volatile("bar.sync %0, %1;\n" ::"n"(kId1), "r"(threads) : "memory");
  else asm volatile("bar.sync %0, %1;\n" ::"n"(kId0), "r"(threads) : "memory");
}
// Merge barrier of warpgroup cw of kWgs.
template <int kWgs>
__device__ __forceinline__ void merge_bar_sync(int cw, int threads) {
  wg_bar_sync<kBarMerge, kBarMerge2, kWgs == 3 ? kBarMerge3 : -1>(cw, threads);
}

// A narrow consumer's running state at the start of a tile: O^T zero, maxima -inf, sums 0.
template <int kNJ, int kMT>
__device__ __forceinline__ void narrow_state_init(float (&o)[kMT][kNJ][4], float (&m_run)[kNJ][2], float (&l_run)[kNJ][2]) {
#pragma unroll
  for (int mi = 0; mi < kMT; ++mi)
#pragma unroll
    for (int j = 0; j < kNJ; ++j) o[mi][j][0] = o[mi][j][1] = o[mi][j][2] = o[mi][j][3] = 0.f;
#pragma unroll
  for (int j = 0; j < kNJ; ++j) m_run[j][0] = m_run[j][1] = -INFINITY, l_run[j][0] = l_run[j][1] = 0.f;
}

// One head's scores of this thread's two keys (x0: row ka, x1: row kb) masked (-inf where the key
// is not real) and scaled, and their maximum over the warp's eight rows of keys (the lanes of
// this lane's quad position).
__device__ __forceinline__ float mask_scale_max(float& x0, float& x1, bool ok0, bool ok1, float scale) {
  x0 = ok0 ? x0 * scale : -INFINITY;
  x1 = ok1 ? x1 * scale : -INFINITY;
  float v = fmaxf(x0, x1);
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 4));
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 8));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 16));
}

// One head's step of the online softmax after the block's maxima are in buf[4 warps][32] (h: the
// head's slot there): its running maximum (kLazy as in narrow_block_softmax), x0 and x1 (the
// thread's two scores) turned into exp2(x - m), the thread's running sum; returns the factor
// (alpha) of the head's earlier O^T columns.
template <bool kLazy>
__device__ __forceinline__ float head_softmax_step(const float* buf, int h, float& m_run, float& l_run, float& x0,
                                                   float& x1) {
  const float bm = fmaxf(fmaxf(buf[h], buf[32 + h]), fmaxf(buf[64 + h], buf[96 + h]));
  const float m_new = kLazy ? (bm > m_run + kLazyRescaleLog2 ? bm : m_run) : fmaxf(m_run, bm);
  const float m_use = m_new == -INFINITY ? 0.f : m_new;
  const float alpha = exp2_ftz(m_run - m_use);
  m_run = m_new;
  x0 = exp2_ftz(x0 - m_use);
  x1 = exp2_ftz(x1 - m_use);
  l_run = l_run * alpha + x0 + x1;
  return alpha;
}

// O^T times each head's factor alpha[j][e] (kTiles: and each of its tiles' tf[mi]).
template <bool kTiles, int kNJ, int kMT>
__device__ __forceinline__ void rescale_narrow_o(float (&o)[kMT][kNJ][4], const float (&alpha)[kNJ][2], const float (&tf)[kMT]) {
#pragma unroll
  for (int mi = 0; mi < kMT; ++mi)
#pragma unroll
    for (int j = 0; j < kNJ; ++j) {
      const float a0 = kTiles ? alpha[j][0] * tf[mi] : alpha[j][0], a1 = kTiles ? alpha[j][1] * tf[mi] : alpha[j][1];
      o[mi][j][0] *= a0;
      o[mi][j][1] *= a1;
      o[mi][j][2] *= a0;
      o[mi][j][3] *= a1;
    }
}

// Masks and scales the block's scores (scale(j, e): the logits' factor of the thread's head),
// takes each head's maximum over this thread's two keys, the 8 lanes g and the 4 warps (through
// buf[4 warps][32 heads] and one named barrier over kThreads), turns s into exp2(s - m), updates
// the running maxima and sums, and rescales O^T when some head of the warp moved its maximum.
// buf alternates by block parity: a thread that writes block i + 2's maxima has passed block
// i + 1's barrier, which every thread reaches only after reading block i's. cw: the consumer
// warpgroup (kWgs of them in raw-ring tiles, each with its own barrier). kLazy: m_run is the
// reference maximum of update_max_lazy (online_softmax.cuh), moved only when a block's maximum
// exceeds it by more than 2^kLazyRescaleLog2; l_run and O^T stay relative to it (so lse is
// exact, but m_run is not the exact maximum: no max_logits). tiles (optional): called after the
// barrier with buf, fills a factor per O^T tile and returns whether one is not 1 (warp-uniform);
// O^T is then rescaled by the head's and the tile's factors together.
struct NoTileRescale {
  template <int kMT>
  __device__ bool operator()(const float*, float (&)[kMT]) const { return false; }
};
template <int kNJ, int kMT, int kThreads, int kWgs = 1, bool kLazy = false, class Scale, class Tiles = NoTileRescale>
__device__ __forceinline__ void narrow_block_softmax(float (&s)[kNJ][4], bool ok0, bool ok1, Scale scale, float* buf,
                                                     int wq, int g, int c, float (&m_run)[kNJ][2],
                                                     float (&l_run)[kNJ][2], float (&o)[kMT][kNJ][4],
                                                     int cw = 0, Tiles tiles = Tiles{}) {
  constexpr bool kTiles = !std::is_same_v<Tiles, NoTileRescale>;
  auto head_of = [&](int j, int e) { return 8 * j + 2 * c + e; };
  float mx[kNJ][2];
#pragma unroll
  for (int j = 0; j < kNJ; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      mx[j][e] = mask_scale_max(s[j][e], s[j][2 + e], ok0, ok1, scale(j, e));
    }
  if (g == 0) {
#pragma unroll
    for (int j = 0; j < kNJ; ++j) buf[wq * 32 + head_of(j, 0)] = mx[j][0], buf[wq * 32 + head_of(j, 1)] = mx[j][1];
  }
  merge_bar_sync<kWgs>(cw, kThreads);
  float tf[kMT];
  const bool tiles_moved = kTiles && tiles(buf, tf);
  float alpha[kNJ][2];
  bool moved = false;
#pragma unroll
  for (int j = 0; j < kNJ; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      alpha[j][e] = head_softmax_step<kLazy>(buf, head_of(j, e), m_run[j][e], l_run[j][e], s[j][e], s[j][2 + e]);
      moved |= alpha[j][e] != 1.f;
    }
  // O^T columns are heads: rescale only when some head of the warp moved its maximum.
  if (__any_sync(0xffffffffu, moved) || tiles_moved) rescale_narrow_o<kTiles>(o, alpha, tf);
}

// Every element of one O^T tile times f.
template <int kNJ>
__device__ __forceinline__ void scale_tile(float (&t)[kNJ][4], float f) {
#pragma unroll
  for (int j = 0; j < kNJ; ++j)
#pragma unroll
    for (int k = 0; k < 4; ++k) t[j][k] *= f;
}

// Each head's sum of l over the warp's eight lanes of its quad position into s_l[wq * 32 + head]
// (written by lane g == 0; heads 8 j + 2 c + e).
template <int kNJ>
__device__ __forceinline__ void warp_head_sums(const float (&l)[kNJ][2], float* s_l, int wq, int g, int c) {
#pragma unroll
  for (int j = 0; j < kNJ; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      float v = l[j][e];
      v += __shfl_xor_sync(0xffffffffu, v, 4);
      v += __shfl_xor_sync(0xffffffffu, v, 8);
      v += __shfl_xor_sync(0xffffffffu, v, 16);
      if (g == 0) s_l[wq * 32 + 8 * j + 2 * c + e] = v;
    }
}

// The narrow end's barrier before the row stores: every thread that wrote obuf's rows (and their
// factors) and every thread that stores them.
template <int kThreads, int kWgs, int kDvWgs, int kHelpers>
__device__ __forceinline__ void narrow_rows_in_bar(int cw) {
  if constexpr (kWgs > 1 || kDvWgs > 1) named_bar_sync(kBarFinal, kWgs * kDvWgs * kThreads);
  else if constexpr (kHelpers > 0) named_bar_sync(kBarFinal, kThreads + kHelpers);  // the helpers' tids come first
  else merge_bar_sync<kWgs>(cw, kThreads);
}

// A narrow tile's rows of O from obuf ([kWgs][kRows][kDv + 4] floats, the kWgs buffers summed)
// written out by kT threads (tid 0 .. kT - 1): eight 16-byte pieces a thread read at a time (rows
// past w.heads are in obuf too, and not stored), so that the reads' latencies overlap; then their
// stores.
// kScaled (config.h kNarrowHeadThreads): obuf's rows are unscaled, each row's factor at its
// column kDv (the row's padding).
template <int kRows, int kT, int kWgs = 1, bool kRolled = kNarrowRolledStores, bool kScaled = false>
__device__ __forceinline__ void narrow_store_rows(const AttnParams& p, const Work& w, const float* obuf, int tid) {
  constexpr int kStride = kDv + 4;
  // kPieces not a multiple of kT (three warpgroups of a 16-row tile: 2048 over 384): the last
  // round's threads past the tile read row 0 and store nothing
  constexpr int kPieces = kRows * (kDv / 4), kIters = (kPieces + kT - 1) / kT, kBatch = kIters < 8 ? kIters : 8;
  static_assert(kIters % kBatch == 0, "the tile's rows in whole rounds of the threads");
  if constexpr (kRolled) {
    // config.h kNarrowRolledStores: a thread's column is the same in every round (kT a multiple of
    // a row's pieces), its rows kRowStep apart; the destination's address made once, then stepped.
    static_assert(kT % (kDv / 4) == 0, "whole rows a round of the threads");
    constexpr int kRowStep = kT / (kDv / 4);
    const int cl = 4 * (tid % (kDv / 4)), h0 = tid / (kDv / 4);
    auto read = [&](int h) {
      const int hr = kPieces % kT == 0 || h < kRows ? h : 0;
      const float* at = obuf + hr * kStride + cl;
      float4 v = *reinterpret_cast<const float4*>(at);
      if constexpr (kScaled) {
        const float f = obuf[hr * kStride + kDv];
        v.x *= f, v.y *= f, v.z *= f, v.w *= f;
      }
#pragma unroll
      for (int b = 1; b < kWgs; ++b) {
        const float4 u = *reinterpret_cast<const float4*>(at + b * kRows * kStride);
        const float f = kScaled ? obuf[b * kRows * kStride + hr * kStride + kDv] : 1.f;
        v.x += u.x * f, v.y += u.y * f, v.z += u.z * f, v.w += u.w * f;
      }
      return v;
    };
    // kBatch reads, then kBatch stores, a round at a time (rolled: this code runs once a CTA)
    auto rounds = [&](auto* dst, int64_t step, auto store) {
#pragma unroll 1
      for (int i0 = 0; i0 < kIters; i0 += kBatch) {
        float4 v[kBatch];
#pragma unroll
        for (int it = 0; it < kBatch; ++it) v[it] = read(h0 + (i0 + it) * kRowStep);
#pragma unroll
        for (int it = 0; it < kBatch; ++it) {
          const int h = h0 + (i0 + it) * kRowStep;
          if (h < w.heads && (kPieces % kT == 0 || h < kRows)) store(dst + it * step, v[it]);
        }
        dst += kBatch * step;
      }
    };
    if (w.n_splits == 1) {
      uint16_t* dst = static_cast<uint16_t*>(p.out) + w.req * p.o_sb + w.t * p.o_st + (w.head0 + h0) * p.o_sh + cl;
      rounds(dst, kRowStep * p.o_sh, [](uint16_t* at, const float4& v) {
        *reinterpret_cast<uint2*>(at) = make_uint2(to16x2(v.x, v.y, false), to16x2(v.z, v.w, false));
      });
    } else {
      float* dst = p.part_o + part_row(p, w, w.head0 + h0) * kDv + cl;  // part_row steps by one a head
      rounds(dst, int64_t{kRowStep} * kDv, [](float* at, const float4& v) { *reinterpret_cast<float4*>(at) = v; });
    }
  } else {
    static_assert(!kScaled, "unscaled rows take the rolled stores");
#pragma unroll
    for (int i0 = 0; i0 < kIters; i0 += kBatch) {
      float4 v[kBatch];
#pragma unroll
      for (int it = 0; it < kBatch; ++it) {
        const int at = tid + (i0 + it) * kT, idx = kPieces % kT == 0 || at < kPieces ? at : 0;
        const int h = idx / (kDv / 4), cl = 4 * (idx % (kDv / 4));
        v[it] = *reinterpret_cast<const float4*>(obuf + h * kStride + cl);
#pragma unroll
        for (int b = 1; b < kWgs; ++b) {
          const float4 u = *reinterpret_cast<const float4*>(obuf + b * kRows * kStride + h * kStride + cl);
          v[it].x += u.x, v[it].y += u.y, v[it].z += u.z, v[it].w += u.w;
        }
      }
#pragma unroll
      for (int it = 0; it < kBatch; ++it) {
        const int idx = tid + (i0 + it) * kT, h = idx / (kDv / 4);
        if (h < w.heads && (kPieces % kT == 0 || idx < kPieces)) store_o4(p, w, w.head0 + h, 4 * (idx % (kDv / 4)), v[it]);
      }
    }
  }
}

// Threads of another warpgroup that join a narrow tile's stores (narrow_epilogue's kHelpers; kT
// all of them) once its rows are in obuf; tid 0 .. kHelpers - 1.
template <int kRows, int kT>
__device__ __forceinline__ void narrow_epilogue_helper(const AttnParams& p, const Work& w, const float* obuf, int tid) {
  named_bar_sync(kBarFinal, kT);
  narrow_store_rows<kRows, kT, 1, kNarrowRolledStores, kNarrowHeadThreads>(p, w, obuf, tid);
}

// narrow_epilogue with config.h kNarrowHeadThreads: every thread writes its heads' O^T unscaled
// into obuf; one thread a head (warp 0 of warpgroup lse_wg, lane h) takes the head's sums and
// maxima from shared memory (s_l[4][32] and s_l[128 + h]; with kWgs > 1 every warpgroup's through
// heads), ends the row (lse, max_logits, the sink) and leaves each warpgroup's factor of the row
// in the row's padding (obuf column kDv), which the rolled stores apply.
template <int kNJ, int kMT, int kThreads, bool kMaxLogits, class Col, int kWgs, int kDvWgs, int kHelpers>
__device__ __forceinline__ void narrow_end_by_head_threads(const AttnParams& p, const Work& w, float* s_l, float* obuf,
                                                           const float (&o)[kMT][kNJ][4], const float (&m_run)[kNJ][2],
                                                           const float (&l_run)[kNJ][2], int wq, int g, int c, Col col,
                                                           int cw, float* heads, int lse_wg, int tid0, bool role_marker) {
  auto head_of = [&](int j, int e) { return 8 * j + 2 * c + e; };
  constexpr int kStride = kDv + 4, kRows = 8 * kNJ;
  static_assert(kRows <= 32, "one lane of a warp a head");
  const int lane = static_cast<int>(threadIdx.x) & 31;
  merge_bar_sync<kWgs>(cw, kThreads);  // the warpgroup is past its reads of s_l's memory
  warp_head_sums(l_run, s_l, wq, g, c);
  if (wq == 0 && g == 0) {  // every warp holds each head's running maximum
#pragma unroll
    for (int j = 0; j < kNJ; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) s_l[128 + head_of(j, e)] = m_run[j][e];
  }
  merge_bar_sync<kWgs>(cw, kThreads);
  if (role_marker) role_mark(19, 0);
  const bool head_thread = wq == 0 && lane < kRows;
  auto l_of = [&](int h) { return s_l[h] + s_l[32 + h] + s_l[64 + h] + s_l[96 + h]; };
  if constexpr (kWgs > 1) {
    if (head_thread) heads[cw * 32 + lane] = s_l[128 + lane], heads[(kWgs + cw) * 32 + lane] = l_of(lane);
    named_bar_sync(kBarFinal, kWgs * kThreads);
  }
  if constexpr (kDvWgs > 1) named_bar_sync(kBarFinal, kDvWgs * kThreads);  // both are past their ring reads
  float* ob = obuf + (kWgs > 1 ? cw * kRows * kStride : 0);
#pragma unroll
  for (int j = 0; j < kNJ; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int h = head_of(j, e);
#pragma unroll
      for (int mi = 0; mi < kMT; ++mi) {
        ob[h * kStride + col(mi, 0)] = o[mi][j][e];
        ob[h * kStride + col(mi, 1)] = o[mi][j][2 + e];
      }
    }
  if (head_thread && cw == lse_wg) {
    const int h = lane;
    float m, l, mw[kWgs];
    if constexpr (kWgs == 1) {
      m = mw[0] = s_l[128 + h];
      l = l_of(h);
    } else {
      m = -INFINITY;
#pragma unroll
      for (int v = 0; v < kWgs; ++v) mw[v] = heads[v * 32 + h], m = fmaxf(m, mw[v]);
    }
    const float m_use = m == -INFINITY ? 0.f : m;
    if constexpr (kWgs > 1) {
      l = 0.f;
#pragma unroll
      for (int v = 0; v < kWgs; ++v) l += heads[(kWgs + v) * 32 + h] * exp2_ftz(mw[v] - m_use);
    }
    const bool real = h < w.heads;
    const RowResult res = finish_row_fast(p, w, w.head0 + h, m, l, real);
    if (real) {
      store_lse(p, w, w.head0 + h, res.lse);
      if constexpr (kMaxLogits) store_max_logit(p, w, w.head0 + h, m);
    }
#pragma unroll
    for (int v = 0; v < kWgs; ++v)
      obuf[v * kRows * kStride + h * kStride + kDv] = kWgs == 1 ? res.factor : res.factor * exp2_ftz(mw[v] - m_use);
  }
  narrow_rows_in_bar<kThreads, kWgs, kDvWgs, kHelpers>(cw);
  if (role_marker) role_mark(20, 0);
  constexpr int kT = kWgs * kDvWgs * kThreads + kHelpers;  // the threads here: tid0 .. tid0 + kT - 1
  narrow_store_rows<kRows, kT, kWgs, true, true>(p, w, obuf, static_cast<int>(threadIdx.x) - tid0);
  if (role_marker) role_mark(21, 0);
}

// The end of a narrow tile: each head's row sum over the lanes and warps (through s_l[4][32]),
// lse (and with kMaxLogits max_logits: m_run is exact here), then O^T scaled by each head's final
// factor into obuf ([head][512 + 4] floats; col(mi, half): the value column of tile mi's
// fragment row g + 8 half) and written out as rows. The caller's warps are past their last
// reads of the shared memory that s_l and obuf reuse.
// kWgs > 1 (consumer warpgroups, each over its own blocks): warpgroup cw (its own barrier and
// s_l) publishes its heads' maxima and sums in heads[2][kWgs][32]; each takes the merged state
// (m = the maximum over the warpgroups, l = the sums rescaled to m), scales its O^T by the final
// factor times 2^(m_cw - m) into obuf[cw] (obuf + cw * kRows * (512 + 4)), and all threads
// write the sums of the buffers. kDvWgs 2 (kWgs 1): two warpgroups with the same state that
// hold disjoint value columns (col) of O^T write them into one obuf between two barriers over
// both, and all their threads write it out. lse_wg: the warpgroup whose threads store lse (and
// max_logits); tid0: the first thread of the warpgroups here (the 32-row roles: WG1 alone, 128).
// kHelpers: threads of other warpgroups (narrow_epilogue_helper, tids before ours) that join
// the stores (the 32-row roles' WG0 with SMLA_SD_ROLES_END_WG0).
template <int kNJ, int kMT, int kThreads, bool kMaxLogits, class Col, int kWgs = 1, int kDvWgs = 1, int kHelpers = 0,
          bool kRoleEndMarks = false, bool kRolled = kNarrowRolledStores>
__device__ __forceinline__ void narrow_epilogue(const AttnParams& p, const Work& w, float* s_l, float* obuf,
                                                const float (&o)[kMT][kNJ][4], const float (&m_run)[kNJ][2],
                                                const float (&l_run)[kNJ][2], int wq, int g, int c, Col col,
                                                int cw = 0, float* heads = nullptr, int lse_wg = 0, int tid0 = 0) {
  auto head_of = [&](int j, int e) { return 8 * j + 2 * c + e; };
  const bool marker = kTimeline && threadIdx.x == 128;
  // kRoleEndMarks: the 32-row roles' epilogue marks (timeline.cuh role_mark 18-21, WG1's first thread)
  const bool role_marker = kRoleEndMarks && threadIdx.x == 128;
  if (marker) timeline_mark(10);
  if (role_marker) role_mark(18, 0);
  constexpr int kStride = kDv + 4;  // the 4 heads of a lane quad land in distinct banks
  constexpr int kRows = 8 * kNJ;
  static_assert(kDvWgs == 1 || kWgs == 1, "value columns split among warpgroups that share one state");
  static_assert(kHelpers == 0 || (kWgs == 1 && kDvWgs == 1), "helpers join one warpgroup's stores");
  if constexpr (kNarrowHeadThreads && kRolled) {
    narrow_end_by_head_threads<kNJ, kMT, kThreads, kMaxLogits, Col, kWgs, kDvWgs, kHelpers>(
        p, w, s_l, obuf, o, m_run, l_run, wq, g, c, col, cw, heads, lse_wg, tid0, role_marker);
    return;
  }
  merge_bar_sync<kWgs>(cw, kThreads);
  warp_head_sums(l_run, s_l, wq, g, c);
  merge_bar_sync<kWgs>(cw, kThreads);
  if (role_marker) role_mark(19, 0);
  float l_sum[kNJ][2];
  if constexpr (kWgs > 1) {
#pragma unroll
    for (int j = 0; j < kNJ; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int h = head_of(j, e);
        l_sum[j][e] = s_l[h] + s_l[32 + h] + s_l[64 + h] + s_l[96 + h];
        if (wq == 0 && g == 0) heads[cw * 32 + h] = m_run[j][e], heads[(kWgs + cw) * 32 + h] = l_sum[j][e];
      }
    named_bar_sync(kBarFinal, kWgs * kThreads);
  }
  if (marker) timeline_mark(11);
  if constexpr (kDvWgs > 1) named_bar_sync(kBarFinal, kDvWgs * kThreads);  // both are past their ring reads
  float* ob = obuf + (kWgs > 1 ? cw * kRows * kStride : 0);
  // kNarrowHeadOuts (config.h): the heads' lse slots (out's, or the split's partial row) and sinks
  // from addresses made once here
  float* lse_at = nullptr;
  int64_t lse_step = 1;
  const float* sink_at = nullptr;
  if constexpr (kNarrowHeadOuts) {
    if (w.n_splits == 1) {
      lse_at = p.lse + w.req * p.l_sb + w.t * p.l_st + w.head0 * p.l_sh;
      lse_step = p.l_sh;
      if (p.sink) sink_at = p.sink + w.head0 * p.sink_st;
    } else {
      lse_at = p.part_lse + part_row(p, w, w.head0);  // part_row steps by one a head
    }
  }
#pragma unroll
  for (int j = 0; j < kNJ; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int h = head_of(j, e);
      float m = m_run[j][e], l, mine = 1.f;
      if constexpr (kWgs == 1) l = s_l[h] + s_l[32 + h] + s_l[64 + h] + s_l[96 + h];
      else if constexpr (kWgs == 2) {
        l = l_sum[j][e];
        const float m_o = heads[(1 - cw) * 32 + h], l_o = heads[64 + (1 - cw) * 32 + h];
        m = fmaxf(m_run[j][e], m_o);
        const float m_use = m == -INFINITY ? 0.f : m;
        mine = kNarrowFastEnd ? exp2_ftz(m_run[j][e] - m_use) : exp2f(m_run[j][e] - m_use);
        l = l * mine + l_o * (kNarrowFastEnd ? exp2_ftz(m_o - m_use) : exp2f(m_o - m_use));
      } else {  // every warpgroup's state (its own included, read back: the same values)
        float mw[kWgs];
#pragma unroll
        for (int v = 0; v < kWgs; ++v) mw[v] = heads[v * 32 + h], m = fmaxf(m, mw[v]);
        const float m_use = m == -INFINITY ? 0.f : m;
        mine = exp2f(m_run[j][e] - m_use);
        l = 0.f;
#pragma unroll
        for (int v = 0; v < kWgs; ++v) l += heads[(kWgs + v) * 32 + h] * exp2f(mw[v] - m_use);
      }
      const bool real = h < w.heads;
      RowResult res;
      if constexpr (kNarrowHeadOuts) res = finish_row_fast_at(p, m, l, real && sink_at ? sink_at + h * p.sink_st : nullptr);
      else res = finish_row_as<kNarrowFastEnd>(p, w, w.head0 + h, m, l, real);
      if (real && cw == lse_wg && wq == 0 && g == 0) {
        if constexpr (kNarrowHeadOuts) lse_at[h * lse_step] = res.lse;
        else store_lse(p, w, w.head0 + h, res.lse);
      }
      if (kMaxLogits && real && cw == lse_wg && wq == 0 && g == 0) store_max_logit(p, w, w.head0 + h, m);
      const float f = res.factor * mine;
#pragma unroll
      for (int mi = 0; mi < kMT; ++mi) {
        ob[h * kStride + col(mi, 0)] = o[mi][j][e] * f;
        ob[h * kStride + col(mi, 1)] = o[mi][j][2 + e] * f;
      }
    }
  narrow_rows_in_bar<kThreads, kWgs, kDvWgs, kHelpers>(cw);
  if (marker) timeline_mark(12);
  if (role_marker) role_mark(20, 0);
  constexpr int kT = kWgs * kDvWgs * kThreads + kHelpers;  // the threads here: tid0 .. tid0 + kT - 1
  narrow_store_rows<kRows, kT, kWgs, kRolled>(p, w, obuf, static_cast<int>(threadIdx.x) - tid0);
  if (marker) timeline_mark(13);
  if (role_marker) role_mark(21, 0);
}

}  // namespace smla::cuda::sparse_decode_family
