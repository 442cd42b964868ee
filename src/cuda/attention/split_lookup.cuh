// Which request and split a split-KV CTA (blockIdx.x = its split slot) owns. Three schedules:
// uniform (every request has the same key count, known from shapes on the host: n splits each,
// slot x is request x / n, no schedule kernel), the schedule kernel's split_offsets [b + 1], or
// (p.split_inline: one-unit launches of at most kInlineSplitRequests requests) the same schedule
// made by each warp from the lengths, CTA (0, 0, 0) writing it to split_offsets for the combine.
#pragma once

#include <cstdint>

#include "cuda/attention/attention_params.h"
#include "cuda/common/kv_load.cuh"

namespace smla::cuda {

inline constexpr int kSplitBlockKeys = 64;  // keys a block of the split schedule
// The device schedule of up to kInlineSplitRequests requests is made by the one-unit kernels
// themselves (inline_splits); warp 0 of CTA (0, 0, 0) also writes it to split_offsets, which the
// combine reads as it reads the schedule kernel's. Persistent launches and larger batches keep the
// schedule kernel. On an H100 (docs/PERF.md, seventy-first pass, µs, against the schedule kernel):
// b1 h128 with lengths 18.9 -> 17.5, V4 b1 h64 17.4 -> 15.3, dense bf16 b1 h128 28.5 -> 26.4, b4
// h128 45.0 -> 41.7; b16 h128 with lengths and the b128 rows level. Measurement build
// SMLA_SPLIT_INLINE=0: the schedule kernel for every batch (the kernels' SASS as at 9175dc3). The
// value 1 (the combine making the schedule again in every CTA: b16 h128 +2.5%) is gone.
#ifndef SMLA_SPLIT_INLINE
#define SMLA_SPLIT_INLINE 2
#endif
static_assert(SMLA_SPLIT_INLINE == 0 || SMLA_SPLIT_INLINE == 2, "SMLA_SPLIT_INLINE: 0 (schedule kernel) or 2");
inline constexpr int kInlineSplitRequests = SMLA_SPLIT_INLINE != 0 ? 32 : 0;

// Request req's key count: its index lists' clamped lengths, or (dense) its clamped seqlen.
__device__ __forceinline__ int request_keys(const AttnParams& p, int req) {
  if (p.dense) {
    const int64_t cap = static_cast<int64_t>(p.max_blocks) * p.main.page_size;
    const int64_t s = __ldg(p.seqlens + req * p.seqlens_st);
    return static_cast<int>(s < 0 ? 0 : (s > cap ? cap : s));
  }
  return sparse_len(p.main, req) + (p.has_extra ? sparse_len(p.extra, req) : 0);
}

// Sum of v over one whole, converged warp: every lane gets the total, and the sum over the lanes
// before it is returned.
template <typename T>
__device__ __forceinline__ T warp_exclusive_sum(T v, T& total) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  T x = v;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const T y = __shfl_up_sync(0xffffffffu, x, d);
    if (lane >= d) x += y;
  }
  total = __shfl_sync(0xffffffffu, x, 31);
  return x - v;
}

// The device schedule (metadata.h decode_split_schedule, as the schedule kernel writes it) made
// by one warp for p.b <= 32 requests: lane r gets request r's split count n and first split, every
// lane the total. One read of the lengths, shuffles, one division a lane: no schedule kernel, no
// wait for it, no dependent reads of its offsets. The warp must be whole and converged (the
// attention kernels and the combine call it at their entry).
struct InlineSplits {
  int n = 0, first = 0, total = 0;
};
__device__ __forceinline__ InlineSplits inline_splits(const AttnParams& p) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  const bool real = lane < p.b;
  // meta::split_key_blocks, split_per_unit_at_least and split_count in 32 bits: a request's keys
  // are below 2^31, so its blocks below 2^25 and 32 requests' cost below 2^30.
  const int keys = real ? request_keys(p, lane) : 0;
  const uint32_t blocks = (static_cast<uint32_t>(max(keys, 0)) + (kSplitBlockKeys - 1)) / kSplitBlockKeys;
  uint32_t total;
  warp_exclusive_sum(real ? blocks + 1 : 0u, total);
  const uint32_t units = static_cast<uint32_t>(max(p.split_units, 1));
  const uint32_t per_unit = max(static_cast<uint32_t>(max(p.split_min_blocks, 1)), max(1u, (total + units - 1) / units));
  InlineSplits s;
  s.n = real ? static_cast<int>(max(1u, (blocks + per_unit - 1) / per_unit)) : 0;
  s.first = warp_exclusive_sum(s.n, s.total);
  return s;
}

struct SplitSlot {
  bool active = true;  // false: a slot past the schedule's splits (the CTA writes nothing)
  int req = 0, split_id = 0, n_splits = 1;
};

// Slot x of a split launch (p.uniform_splits > 0 or p.split_offsets set). kInline: the caller
// may make the schedule itself (p.split_inline); persistent CTAs may not (their launch fills
// split_offsets with the schedule kernel instead: the per-unit code of their roles has no
// registers to spare).
template <bool kInline = true>
__device__ __forceinline__ SplitSlot split_slot(const AttnParams& p, int x) {
  SplitSlot s;
  if (p.uniform_splits > 0) {
    s.n_splits = p.uniform_splits;
    s.req = x / s.n_splits;
    s.split_id = x - s.req * s.n_splits;
    s.active = s.req < p.b;
    return s;
  }
  if (kInline && SMLA_SPLIT_INLINE != 0 && p.split_inline) {
    const InlineSplits in = inline_splits(p);
    // The request whose splits end past x: the first lane with first + n > x.
    const unsigned past = __ballot_sync(0xffffffffu, in.n > 0 && x < in.first + in.n);
    if (blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0 && threadIdx.x < 32) {
      int32_t* offsets = const_cast<int32_t*>(p.split_offsets);  // the workspace's [b + 1]
      const int lane = static_cast<int>(threadIdx.x);
      if (lane < p.b) offsets[lane] = in.first;
      if (lane == 0) offsets[p.b] = in.total;
    }
    if (x >= in.total || past == 0) {
      s.active = false;
      return s;
    }
    s.req = __ffs(past) - 1;
    s.split_id = x - __shfl_sync(0xffffffffu, in.first, s.req);
    s.n_splits = __shfl_sync(0xffffffffu, in.n, s.req);
    return s;
  }
  if (x >= __ldg(p.split_offsets + p.b)) {
    s.active = false;
    return s;
  }
  int lo = 0, hi = p.b - 1;  // last request with split_offsets[r] <= x
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (__ldg(p.split_offsets + mid) <= x) lo = mid; else hi = mid - 1;
  }
  s.req = lo;
  s.split_id = x - __ldg(p.split_offsets + lo);
  s.n_splits = __ldg(p.split_offsets + lo + 1) - __ldg(p.split_offsets + lo);
  return s;
}

// Request `req`'s first split slot and split count.
__device__ __forceinline__ void request_splits(const AttnParams& p, int req, int& first, int& n) {
  if (p.uniform_splits > 0) {
    first = req * p.uniform_splits;
    n = p.uniform_splits;
    return;
  }
  first = __ldg(p.split_offsets + req);
  n = __ldg(p.split_offsets + req + 1) - first;
}

// True when this launch splits keys at all (partials + combine).
__device__ __forceinline__ bool is_split_launch(const AttnParams& p) {
  return p.uniform_splits > 0 || p.split_offsets != nullptr;
}

}  // namespace smla::cuda
