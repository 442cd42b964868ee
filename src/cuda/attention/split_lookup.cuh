// Which request and split a split-KV CTA (blockIdx.x = its split slot) owns. Two schedules:
// uniform (every request has the same key count, known from shapes on the host: n splits each,
// slot x is request x / n, no schedule kernel) or the device schedule's split_offsets [b + 1].
#pragma once

#include <cstdint>

#include "cuda/attention/attention_params.h"

namespace smla::cuda {

struct SplitSlot {
  bool active = true;  // false: a slot past the schedule's splits (the CTA writes nothing)
  int req = 0, split_id = 0, n_splits = 1;
};

// Slot x of a split launch (p.uniform_splits > 0 or p.split_offsets set).
__device__ __forceinline__ SplitSlot split_slot(const AttnParams& p, int x) {
  SplitSlot s;
  if (p.uniform_splits > 0) {
    s.n_splits = p.uniform_splits;
    s.req = x / s.n_splits;
    s.split_id = x - s.req * s.n_splits;
    s.active = s.req < p.b;
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
