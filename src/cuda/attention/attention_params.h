// Plain parameters of the gather-attention kernel that serves sparse_decode, sparse_prefill
// and dense_decode: every stride explicit, every device-read value untrusted.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace smla::cuda {

// One paged cache and how key j of a row is found in it.
struct KeySetParams {
  const uint8_t* base = nullptr;
  int64_t page_stride = 0;  // bytes between pages
  int64_t num_blocks = 0;
  int page_size = 1;
  int format = 0;           // smla::CacheFormat
  int h_kv = 1;
  int row_elems = 576;      // element formats: values per head row
  float k_scale = 1.0f;
  // Sparse key sets: indices [b, s_q, topk] (last dim packed) and optional lengths [b].
  const int32_t* indices = nullptr;
  int64_t idx_sb = 0, idx_st = 0;
  int topk = 0;
  const int32_t* topk_length = nullptr;
  int64_t tl_st = 1;
};

struct AttnParams {
  bool dense = false;  // keys from a block table (dense) or from index lists (sparse)
  // Dense decode on the sparse-decode family, grids of two waves or more: the CTAs of a split
  // take consecutive launch positions (sparse_decode/work.cuh, dense_cta_position). Set by the
  // family's launch (sparse_decode/launch.cu).
  bool dense_cta_order = false;
  // q [b, s_q, h_q, d_qk]
  const void* q = nullptr;
  int64_t q_sb = 0, q_st = 0, q_sh = 0;
  int q_kind = 0;  // 0 bf16, 1 fp16, 2 fp8_e4m3 (dequantized with q_scale)
  float q_scale = 1.0f;
  int b = 0, s_q = 1, h_q = 1, h_kv = 1, d_qk = 576;
  float scale_log2 = 0.0f;  // softmax_scale * log2(e) (times q_scale and k_scale for fp8 q / cache)
  float out_scale = 1.0f;   // fp8_e4m3 cache: k_scale, applied to O (e4m3 values are staged unscaled, exactly)

  KeySetParams main, extra;
  bool has_extra = false;

  // dense: block_table [b, max_blocks], seqlens [b]
  const int32_t* block_table = nullptr;
  int64_t bt_sb = 0;
  int max_blocks = 0;
  const int32_t* seqlens = nullptr;
  int64_t seqlens_st = 1;
  bool causal = false;

  const float* sink = nullptr;  // [h_q] or null
  int64_t sink_st = 1;

  // out [b, s_q, h_q, 512] (bf16, or fp16 when out_f16), lse/max_logits [b, s_q, h_q]
  void* out = nullptr;
  int64_t o_sb = 0, o_st = 0, o_sh = 0;
  bool out_f16 = false;
  float* lse = nullptr;
  int64_t l_sb = 0, l_st = 0, l_sh = 0;
  float* max_logits = nullptr;
  int64_t m_sb = 0, m_st = 0, m_sh = 0;

  // Split-KV: split_offsets [b+1] from the device schedule, or null for one CTA per request;
  // uniform_splits > 0 instead: every request has that many splits (split_lookup.cuh).
  const int32_t* split_offsets = nullptr;
  int uniform_splits = 0;
  float* part_o = nullptr;    // [splits, s_q, h_q, 512]
  float* part_lse = nullptr;  // [splits, s_q, h_q]

  // CTA tiling: rows = tokens_per_cta x heads_tile (<= 64); head tiles per kv head.
  int tokens_per_cta = 1;
  int heads_tile = 64;
  int tiles_per_kv = 1;
  int raw_stride = 656;  // bytes per staged key row in shared memory (multiple of 16)

  // Dense decode by the TMA unit (sparse_decode/producer_dense_tma.cuh): the cache as a 3-D
  // tensor (d_qk values, page_size rows, num_blocks pages), boxes of 64 values x min(page, 64)
  // rows with the 128-byte swizzle. Built by the launch; unused elsewhere.
  CUtensorMap kv_map;  // (64-byte aligned by its type)

  // Persistent sparse-decode CTAs (sparse_decode/instantiate.cuh): the grid of work
  // units the CTAs walk (what grid.x, y, z would be without persistence); 0 otherwise.
  int unit_gx = 0, unit_gy = 0, unit_gz = 0;

  // q for the TMA unit (sparse_decode config.h SMLA_SD_Q_TMA): a 4-D tensor (d_qk values, h_q
  // heads, s_q tokens, b requests), boxes of 64 values x 64 heads in the 128-byte swizzle;
  // q_tma = 1 when the launch built it. Last, so that no other field moves.
  CUtensorMap q_map;
  int q_tma = 0;
  // out for the TMA unit (sparse_decode config.h kBf16PersistEnds): the same geometry over
  // (d_v, h_q, s_q, b) of the bf16 output; o_tma = 1 when the launch built it.
  CUtensorMap o_map;
  int o_tma = 0;
  // Sparse prefill's tail split (sparse_decode config.h kTailMerge): the persistent walk's units
  // past its last whole round run as tail_parts parts each (0: no split), whose partial rows hold
  // the heads of their one tile, from comb_h0 (part_o, part_lse and their max logits in part_max:
  // [parts, s_q, heads_tile]); the combine of those units merges that tile's heads. Last, so that
  // no other field moves.
  int tail_parts = 0;
  float* part_max = nullptr;
  int comb_h0 = 0;
  // The device split schedule's work units and floor of key blocks a split; split_inline: the
  // one-unit kernels make it themselves, a warp each (split_lookup.cuh inline_splits), instead of
  // reading split_offsets, which CTA (0, 0, 0) fills for the combine. Last, so that no other
  // field moves.
  int split_units = 1, split_min_blocks = 1;
  bool split_inline = false;
};

}  // namespace smla::cuda
