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
#include "cuda/sparse_decode/producer.cuh"
#include "cuda/sparse_decode/work.cuh"

namespace smla::cuda::sparse_decode_family {

template <int kRows, int kD, bool kAlt = false>
__device__ void produce_dense_tma(const AttnParams& p, const Work& w, uint8_t* smem) {
  using S = Smem<kRows, kD>;
  constexpr int kBoxes = kD / 64;           // 64-column boxes per key row
  constexpr int kBoxBytes = kKeys * 128;    // one box column of the tile: 64 rows x 128 bytes
  const int pt = static_cast<int>(threadIdx.x) - consumer_threads(kRows);
  const int half = kAlt ? pt >> 5 : 0;      // kAlt: the warp's column half
  if (pt >= (kAlt ? 64 : 32) || w.kb_begin >= w.kb_end) return;  // one warp (kAlt: one per half)
  const int lane = kAlt ? pt & 31 : pt;
  const int b0 = kAlt && half ? 4 : 0, b1 = kAlt && !half ? 4 : kBoxes;  // this warp's boxes
  const uint32_t half_bytes = static_cast<uint32_t>(b1 - b0) * kBoxBytes;
  uint64_t* const bars_b = reinterpret_cast<uint64_t*>(smem + S::alt_bars);  // kAlt: full_b, empty_b, aux_b
  const int ps = p.main.page_size;
  const int rows = ps < kKeys ? ps : kKeys;      // rows of one box: a page, or 64 rows of one
  const int pages = kKeys / rows;                // pages a block spans (lanes 0 .. pages - 1)
  const int shift = __ffs(rows) - 1;             // rows is a power of two
  uint64_t* aux = half ? bars_b + 2 * kStages : reinterpret_cast<uint64_t*>(smem + S::aux);
  const uint32_t aux_addr = smem_addr(aux);
  int partial = 0;                               // blocks that used `aux` (its phase)

  // Lane j < pages: the page of block kb's j-th box, or -1 (no real key there).
  auto page_of = [&](int kb) -> int32_t {
    const int v0 = kb * kKeys + lane * rows;
    if (lane >= pages || kb >= w.kb_end || v0 >= w.len_total || v0 > w.last) return -1;
    const int32_t blk = __ldg(p.block_table + w.req * p.bt_sb + v0 / ps);
    return blk >= 0 && blk < p.main.num_blocks ? blk : -1;
  };
  int32_t cur = page_of(w.kb_begin), nxt = page_of(w.kb_begin + 1);

  for (int kb = w.kb_begin; kb < w.kb_end; ++kb) {
    const int i = kb - w.kb_begin;
    const int32_t ahead = page_of(kb + 2);  // two blocks before its use
    Stage<kRows, kD> st(smem, i & 1);
    if (kAlt && half) {
      st.full = bars_b + (i & 1);
      st.empty = bars_b + kStages + (i & 1);
    }
    // Keys lane and lane + 32 of the block: real when inside the length and the causal limit,
    // on a page that exists.
    // (Every lane shuffles: a shuffle inside a short-circuited condition would leave lanes out.)
    const int32_t page0 = __shfl_sync(0xffffffffu, cur, lane >> shift);
    const int32_t page1 = __shfl_sync(0xffffffffu, cur, (lane + 32) >> shift);
    const int v0 = kb * kKeys + lane, v1 = v0 + 32;
    const bool ok0 = v0 < w.len_total && v0 <= w.last && page0 >= 0;
    const bool ok1 = v1 < w.len_total && v1 <= w.last && page1 >= 0;
    const uint32_t bal0 = __ballot_sync(0xffffffffu, ok0), bal1 = __ballot_sync(0xffffffffu, ok1);
    const bool whole = (bal0 & bal1) == 0xffffffffu;
    const int real_pages = __popc(__ballot_sync(0xffffffffu, cur >= 0));
    st.wait_empty(i);
    if (lane < 8 && half == 0) {  // valid-mask words as the consumers read them (Stage::valid_mask)
      const uint32_t bal = lane < 4 ? bal0 : bal1;
      st.valid[lane] = (bal >> (8 * (lane & 3))) & 0xffu;
    }
    __syncwarp();
    if constexpr (kProducerIdle) {  // experiment (variant 8): the tile handed over unloaded
      if (lane == 0) mbar_arrive(st.full);
      cur = nxt;
      nxt = ahead;
      continue;
    }
    const uint32_t tile = smem_addr(st.tile);
    const int row0 = ps > kKeys ? (kb * kKeys) % ps : 0;
    const uint32_t bar = whole ? smem_addr(st.full) : aux_addr;
    if (lane == 0) {
      if (whole) mbar_arrive_expect_tx(st.full, half_bytes);
      else if (real_pages > 0) mbar_arrive_expect_tx(aux, real_pages * rows * 128 * (b1 - b0));
    }
    __syncwarp();
    if (cur >= 0) {
#pragma unroll
      for (int b = 0; b < kBoxes; ++b)
        if (b >= b0 && b < b1) tma_load_3d(tile + b * kBoxBytes + lane * rows * 128, &p.kv_map, 64 * b, row0, cur, bar);
    }
    if (!whole) {
      if (real_pages > 0) mbar_wait(aux, partial++ & 1);
      // Zeros over every row to skip: its 128-byte row in each box (the swizzle only permutes
      // 16-byte chunks within a row).
      uint64_t skip = ~((static_cast<uint64_t>(bal1) << 32) | bal0);
      while (skip) {
        const int k = __ffsll(static_cast<long long>(skip)) - 1;
        skip &= skip - 1;
        for (int c = b0 * 8 + lane; c < b1 * 8; c += 32)
          *reinterpret_cast<uint4*>(st.tile + (c >> 3) * kBoxBytes + k * 128 + (c & 7) * 16) = make_uint4(0, 0, 0, 0);
      }
      fence_proxy_async();  // the zeros are read by wgmma
      __syncwarp();
      if (lane == 0) mbar_arrive(st.full);
    }
    cur = nxt;
    nxt = ahead;
  }
}

}  // namespace smla::cuda::sparse_decode_family
