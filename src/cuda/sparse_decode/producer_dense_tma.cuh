// Dense decode's producer for bf16 caches whose pages hold 16, 32 or a multiple of 64 tokens
// (config.h kDenseTma): one warp loads each 64-key block by the TMA unit, page by page, as boxes
// of 64 columns x min(page, 64) rows straight into the K tile (128-byte swizzle, the layout the
// consumers' kSw descriptors read). Nothing is converted and no row passes through registers.
//
// A block whose 64 keys are all real (the rule) completes its "full" barrier by the boxes' bytes
// alone. A block with keys to skip (past seqlen, past the token's causal limit, or on a table
// entry that names no page) loads its real pages, waits for them, writes zeros over the rows it
// must skip (their logits are masked, and zero V keeps NaN bytes of unused slots out of P V),
// then arrives.
//
// kAlt (config.h): the tile is handed over in two column halves, A (boxes 0-3) by warp 0 and B
// (the rest) by warp 1, each with its own full, empty and aux barriers; warp 0 also writes the
// block's valid-key words.
#pragma once

#include <cstdint>

#include "cuda/common/barriers.cuh"
#include "cuda/common/gather.cuh"
#include "cuda/sparse_decode/config.h"
#include "cuda/sparse_decode/dense_page_walk.cuh"
#include "cuda/sparse_decode/producer.cuh"
#include "cuda/sparse_decode/work.cuh"

namespace smla::cuda::sparse_decode_family {

// kHalves (config.h kDenseEmptyHalves): boxes 4-7 (WG1's values) wait for empty_b.
template <int kRows, int kD, bool kAlt = false, bool kHalves = false>
__device__ void produce_dense_tma(const AttnParams& p, const Work& w, uint8_t* smem) {
  using S = Smem<kRows, kD>;
  constexpr int kBoxes = kD / 64;           // 64-column boxes per key row
  const int pt = static_cast<int>(threadIdx.x) - consumer_threads(kRows);
  const int half = kAlt ? pt >> 5 : 0;      // kAlt: the warp's column half
  if (pt >= (kAlt ? 64 : 32) || w.kb_begin >= w.kb_end) return;  // one warp (kAlt: one per half)
  const int lane = kAlt ? pt & 31 : pt;
  const int b0 = kAlt && half ? 4 : 0, b1 = kAlt && !half ? 4 : kBoxes;  // this warp's boxes
  uint64_t* const bars_b = reinterpret_cast<uint64_t*>(smem + S::alt_bars);  // kAlt: full_b, empty_b, aux_b
  DensePageWalk<128> walk(p, w, lane, half ? bars_b + 2 * kStages : reinterpret_cast<uint64_t*>(smem + S::aux));
  for (int kb = w.kb_begin; kb < w.kb_end; ++kb) {
    const int i = kb - w.kb_begin;
    Stage<kRows, kD> st(smem, i & 1);
    if (kAlt && half) {
      st.full = bars_b + (i & 1);
      st.empty = st.empty_b;
    }
    // Warp 0 writes the block's valid-key words (kAlt: warp 1 loads the B half only).
    if constexpr (kHalves) {
      walk.template load<kBoxes, true>(kb, st.tile, st.full, st.valid, b0, b1, [&] { st.wait_empty(i); },
                                       [&] { st.wait_empty_b(i); });
    } else {
      walk.template load<kBoxes>(kb, st.tile, st.full, half == 0 ? st.valid : nullptr, b0, b1, [&] { st.wait_empty(i); });
    }
  }
}

}  // namespace smla::cuda::sparse_decode_family
