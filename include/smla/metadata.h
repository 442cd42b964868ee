// Index and metadata utilities (SPEC §4.6). Each takes CPU or CUDA tensors and gives the
// same result on both; the CUDA versions are graph-safe kernels on exec.stream.
// Out-of-range values are never dereferenced: they produce -1 (see each function).
#pragma once

#include <cstdint>

#include "smla/ops.h"
#include "smla/tensor.h"

namespace smla {

// out[t] = the request r with query_start_loc[r] <= t < query_start_loc[r+1], or -1.
// query_start_loc [b+1] int32 (non-decreasing), out [T] int32.
void req_id_per_token(const TensorView& query_start_loc, const TensorView& out, const Exec& exec = {});

// SGLang's token map to a page table: block_table[i, p] = req_to_token[r, p*page_size] / page_size
// with r = req_pool_indices[i], for p < ceil(seq_lens[i] / page_size); every other entry -1
// (also for r or a token position outside req_to_token).
// req_to_token [max_reqs, max_ctx] int32, req_pool_indices [b] int32, seq_lens [b] int32,
// block_table [b, max_pages] int32.
void page_table_from_req_to_token(const TensorView& req_to_token, const TensorView& req_pool_indices,
                                  const TensorView& seq_lens, int page_size, const TensorView& block_table,
                                  const Exec& exec = {});

// Request-local positions to slots: slots[t, j] = block_table[req_id[t], p / page_size] * page_size
// + p % page_size for p = positions[t, j]; -1 when p < 0, the block is outside the table, the
// table entry is negative or req_id[t] is outside [0, b).
// block_table [b, max_blocks] int32, req_id [T] int32, positions [T, k] int32, slots [T, k] int32.
void positions_to_slots(const TensorView& block_table, int page_size, const TensorView& req_id,
                        const TensorView& positions, const TensorView& slots, const Exec& exec = {});

// Sliding-window positions of a decode token at position pos: [max(pos - W + 1, 0), pos]
// in ascending order, then -1 padding. positions [T] int32, out [T, W] int32. A negative
// pos gives a row of -1.
void sliding_window_indices(const TensorView& positions, int window, const TensorView& out,
                            const Exec& exec = {});

// Compressed-cache slot mapping (compress ratio R >= 1): the token at position pos writes
// compressed state c = pos / R only when (pos + 1) % R == 0; its slot is
// block_table[req, c / states_per_page] * states_per_page + c % states_per_page, else -1.
// positions [T] int64, req_id [T] int32, block_table [b, max_blocks] int32, out [T] int64.
void compressed_slot_mapping(const TensorView& positions, const TensorView& req_id,
                             const TensorView& block_table, int compress_ratio, int states_per_page,
                             const TensorView& out, const Exec& exec = {});

// Decode context parallelism: N ranks, interleave I.
struct DcpLayout {
  int world = 1;       // N
  int interleave = 1;  // I
};
// The rank holding token position p: (p / I) % N.
int dcp_owner_rank(int64_t p, DcpLayout d);
// Position of token p within its owner's shard: (p / (I*N)) * I + p % I.
int64_t dcp_local_position(int64_t p, DcpLayout d);
// Tokens of a length-L sequence on rank r: base = L / I / N * I,
// local = base + clamp(L - base*N - r*I, 0, I). Negative L counts as 0.
int64_t dcp_local_length(int64_t L, DcpLayout d, int rank);
// Elementwise over seqlens [b] int32 -> out [b] int32.
void dcp_local_seqlens(const TensorView& seqlens, DcpLayout d, int rank, const TensorView& out,
                       const Exec& exec = {});
// Rank-local top-k: for each query row (i, j), the global positions p of positions[i, j, :]
// that `rank` owns (p >= 0, dcp_owner_rank(p, d) == rank), in their order, mapped through this
// rank's block_table to slots block_table[i, lp / page_size] * page_size + lp % page_size with
// lp = dcp_local_position(p, d), packed to the front of slots[i, j, :], the rest -1;
// counts[i, j] = the number kept. An owned position whose local block is outside the table,
// whose table entry is negative or whose slot exceeds INT32_MAX is dropped (not counted);
// duplicates are kept as they are. topk_length (optional; absent: not written) receives
// max_j counts[i, j], which sparse_decode takes as its topk_length.
// positions [b, s_q, k] int32, block_table [b, max_blocks] int32 (this rank's), slots
// [b, s_q, k] int32, counts [b, s_q] int32, topk_length [b] int32.
void dcp_local_topk(const TensorView& positions, const TensorView& block_table, int page_size, DcpLayout d,
                    int rank, const TensorView& slots, const TensorView& counts,
                    const TensorView& topk_length = {}, const Exec& exec = {});

// Split-KV schedule for decode, computed where `lengths` lives. Request i has
// lengths[i] keys (clamped to [0, max_keys]) read in blocks of block_n. With
// blocks_i = ceil(len_i / block_n), total = sum_i (blocks_i + 1) and
// per_unit = max(1, ceil(total / num_units)), request i gets
// n_i = max(1, ceil(blocks_i / per_unit)) splits; split j of request i covers key blocks
// [j * c_i, min((j+1) * c_i, blocks_i)) with c_i = ceil(blocks_i / n_i).
// split_offsets [b+1] int32 receives the prefix sums of n_i (split_offsets[0] = 0).
// The total never exceeds max_total_splits(b, num_units), so buffers sized by it are
// enough whatever the lengths.
struct SplitSchedulePlan {
  int num_units = 132;  // work units to fill (e.g. SM count x CTAs per SM)
  int block_n = 64;
  int max_keys = 0;
};
int64_t max_total_splits(int64_t batch, int num_units);
void decode_split_schedule(const TensorView& lengths, const SplitSchedulePlan& plan,
                           const TensorView& split_offsets, const Exec& exec = {});

}  // namespace smla
