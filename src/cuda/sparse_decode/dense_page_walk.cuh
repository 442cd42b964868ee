// A producer warp's walk over a work unit's 64-key blocks of dense pages by the TMA unit
// (DensePageWalk): the pages of each block from the block table, the block's valid-key words,
// its boxes issued against one "full" barrier, and zeros over the rows to skip (past seqlen,
// past the causal limit, on a table entry that names no page) before "full" completes for a
// partial block. The bf16 tiles (producer_dense_tma.cuh) and the FP8 tiles (consumer_fp8.cuh)
// load through it.
#pragma once

#include <cstdint>

#include "cuda/attention/attention_params.h"
#include "cuda/common/barriers.cuh"
#include "cuda/common/gather.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/common/wgmma.cuh"
#include "cuda/sparse_decode/config.h"
#include "cuda/sparse_decode/work.cuh"

namespace smla::cuda::sparse_decode_family {

// One producer warp's walk over a work unit's 64-key blocks of dense pages, each block loaded
// by the TMA unit as boxes of 64 rows (a page, or 64 rows of one) x kRowBytes bytes: 64 bf16
// columns (kRowBytes 128, 128-byte swizzle) or 64 e4m3 columns (64, 64-byte swizzle).
template <int kRowBytes>
struct DensePageWalk {
  static constexpr int kBoxBytes = kKeys * kRowBytes;  // one box column of a tile
  const AttnParams& p;
  const Work& w;
  const int lane, ps, rows, pages, shift;  // rows is a power of two: 1 << shift
  uint64_t* const aux;  // partial blocks complete here first
  int partial = 0;      // blocks that used `aux` (its phase)
  int32_t cur, nxt;     // the pages of the next two blocks (lane j < pages: its box's page, or -1)

  __device__ DensePageWalk(const AttnParams& p_, const Work& w_, int lane_, uint64_t* aux_)
      : p(p_), w(w_), lane(lane_), ps(p_.main.page_size), rows(ps < kKeys ? ps : kKeys), pages(kKeys / rows),
        shift((rows >= 2) + (rows >= 4) + (rows >= 8) + (rows >= 16) + (rows >= 32) + (rows >= 64)), aux(aux_) {
    cur = page_of(w.kb_begin);
    nxt = page_of(w.kb_begin + 1);
  }
  // Lane j < pages: the page of block kb's j-th box, or -1 (no real key there).
  __device__ int32_t page_of(int kb) const {
    const int v0 = kb * kKeys + lane * rows;
    if (lane >= pages || kb >= w.kb_end || v0 >= w.len_total || v0 > w.last) return -1;
    const int32_t blk = __ldg(p.block_table + w.req * p.bt_sb + v0 / ps);
    return blk >= 0 && blk < p.main.num_blocks ? blk : -1;
  }
  // Block kb into `tile` (boxes b0 .. b1 - 1) once wait_empty() returns; `valid`, unless null,
  // gets the block's valid-key words (Stage::valid_mask); `full` completes when the boxes are in.
  // kHalves (config.h kDenseEmptyHalves): boxes 4-7 only once wait_b() returns too.
  template <int kBoxes, bool kHalves = false, class WaitEmpty, class WaitB = NoHook>
  __device__ void load(int kb, uint8_t* tile, uint64_t* full, uint32_t* valid, int b0, int b1, WaitEmpty wait_empty,
                       WaitB wait_b = {}) {
    const int32_t ahead = page_of(kb + 2);  // two blocks before its use
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
    wait_empty();
    if (lane < 8 && valid != nullptr) {  // valid-mask words as the consumers read them (Stage::valid_mask)
      const uint32_t bal = lane < 4 ? bal0 : bal1;
      valid[lane] = (bal >> (8 * (lane & 3))) & 0xffu;
    }
    __syncwarp();
    if constexpr (kProducerIdle) {  // experiment (variant 8): the tile handed over unloaded
      if (lane == 0) mbar_arrive(full);
      cur = nxt;
      nxt = ahead;
      return;
    }
    const uint32_t t = smem_addr(tile);
    const int row0 = ps > kKeys ? (kb * kKeys) % ps : 0;
    const uint32_t bar = whole ? smem_addr(full) : smem_addr(aux);
    if (lane == 0) {
      if (whole) mbar_arrive_expect_tx(full, static_cast<uint32_t>(b1 - b0) * kBoxBytes);
      else if (real_pages > 0) mbar_arrive_expect_tx(aux, real_pages * rows * kRowBytes * (b1 - b0));
    }
    __syncwarp();
    auto boxes = [&](bool second) {
      if (cur < 0) return;
#pragma unroll
      for (int b = 0; b < kBoxes; ++b)
        if (b >= b0 && b < b1 && (!kHalves || (second ? in_fill_part<2>(b) : in_fill_part<1>(b)))) {
          const uint32_t dst = t + b * kBoxBytes + lane * rows * kRowBytes;
          if constexpr (kBoxesEvictFirst) tma_load_3d(dst, &p.kv_map, 64 * b, row0, cur, bar, l2_evict_first_policy());
          else tma_load_3d(dst, &p.kv_map, 64 * b, row0, cur, bar);
        }
    };
    boxes(false);
    if constexpr (kHalves) {
      wait_b();
      boxes(true);
    }
    if (!whole) {
      if (real_pages > 0) mbar_wait(aux, partial++ & 1);
      // Zeros over every row to skip: its row in each box (the swizzle only permutes 16-byte
      // chunks within a row).
      constexpr int kChunks = kRowBytes / 16;
      uint64_t skip = ~((static_cast<uint64_t>(bal1) << 32) | bal0);
      while (skip) {
        const int k = __ffsll(static_cast<long long>(skip)) - 1;
        skip &= skip - 1;
        for (int c = b0 * kChunks + lane; c < b1 * kChunks; c += 32)
          *reinterpret_cast<uint4*>(tile + (c / kChunks) * kBoxBytes + k * kRowBytes + (c % kChunks) * 16) = make_uint4(0, 0, 0, 0);
      }
      fence_proxy_async();  // the zeros are read by wgmma
      __syncwarp();
      if (lane == 0) mbar_arrive(full);
    }
    cur = nxt;
    nxt = ahead;
  }
};

}  // namespace smla::cuda::sparse_decode_family
