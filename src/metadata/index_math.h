// Per-element formulas of the index and metadata utilities (SPEC §4.6). The CPU loops and
// the CUDA kernels both call these, so the two backends agree on every input, including
// values that make no sense: every value read from a tensor is range-checked here, and an
// invalid one yields -1 instead of an access. All arithmetic is int64, so no int32 value
// (INT32_MIN, INT32_MAX) can overflow an intermediate.
#pragma once

#include <cstdint>

#include "smla/numeric.h"

namespace smla::meta {

inline constexpr int64_t kInt32Max = 2147483647;

SMLA_HD int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
SMLA_HD int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
SMLA_HD int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : (v > hi ? hi : v); }
SMLA_HD bool in_range(int64_t i, int64_t n) { return i >= 0 && i < n; }
// a >= 0, b >= 1.
SMLA_HD int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

// ------------------------------------------------------------------ req_id_per_token
// The rule for any query_start_loc: token t belongs to the FIRST r in [0, b) with
// qsl[r] <= t < qsl[r+1]; no such r gives -1. O(b) per token.
SMLA_HD int32_t req_of_token_scan(const int32_t* qsl, int64_t b, int64_t t) {
  for (int64_t r = 0; r < b; ++r)
    if (qsl[r] <= t && t < qsl[r + 1]) return static_cast<int32_t>(r);
  return -1;
}

// The same answer in O(log b) when qsl[0..b] is non-decreasing: the intervals are then
// disjoint, and the only candidate is the last r with qsl[r] <= t.
SMLA_HD int32_t req_of_token_sorted(const int32_t* qsl, int64_t b, int64_t t) {
  int64_t lo = 0, hi = b + 1;  // upper bound of t in qsl[0..b]
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (qsl[mid] <= t) lo = mid + 1; else hi = mid;
  }
  int64_t r = lo - 1;
  return (r >= 0 && r < b && t < qsl[r + 1]) ? static_cast<int32_t>(r) : -1;
}

SMLA_HD bool non_decreasing(const int32_t* a, int64_t n) {
  for (int64_t i = 1; i < n; ++i)
    if (a[i] < a[i - 1]) return false;
  return true;
}

// ------------------------------------------------------- page_table_from_req_to_token
// Pages a sequence of `len` tokens occupies; a negative length has none.
SMLA_HD int64_t pages_of_length(int64_t len, int64_t page_size) {
  return len <= 0 ? 0 : ceil_div(len, page_size);
}

// The req_to_token column holding page p's first token, or -1 when p is past the sequence
// or the column is past the map (max_ctx).
SMLA_HD int64_t page_first_token(int64_t p, int64_t seq_len, int64_t page_size, int64_t max_ctx) {
  if (!in_range(p, pages_of_length(seq_len, page_size))) return -1;
  int64_t tok = p * page_size;
  return tok < max_ctx ? tok : -1;
}

// Page of a token slot. A negative slot is "no page", not slot / page_size, which C++
// truncation would turn into page 0 for -page_size < slot < 0.
SMLA_HD int32_t page_of_token_slot(int64_t slot, int64_t page_size) {
  return slot < 0 ? -1 : static_cast<int32_t>(slot / page_size);
}

// ------------------------------------------- positions_to_slots, compressed_slot_mapping
// Slot of request-local position p through one block-table row:
// row[p / page_size] * page_size + p % page_size; -1 when row is null (no such request),
// p < 0, the block is past the row (max_blocks) or the entry is negative.
SMLA_HD int64_t paged_slot(const int32_t* row, int64_t max_blocks, int64_t p, int64_t page_size) {
  if (row == nullptr || p < 0) return -1;
  int64_t blk = p / page_size;
  if (blk >= max_blocks) return -1;
  int64_t entry = row[blk];
  if (entry < 0) return -1;
  return entry * page_size + p % page_size;
}

// An int32 output cannot hold a slot past INT32_MAX: such a slot is reported as -1 rather
// than wrapped into some other, valid-looking slot.
SMLA_HD int32_t narrow_slot(int64_t slot) {
  return (slot >= 0 && slot <= kInt32Max) ? static_cast<int32_t>(slot) : -1;
}

// Compressed state written by the token at position pos: pos / R when (pos + 1) % R == 0,
// else -1 (also for pos < 0). Written as pos % R == R - 1 so pos = INT64_MAX cannot overflow.
SMLA_HD int64_t compressed_state(int64_t pos, int64_t ratio) {
  if (pos < 0 || pos % ratio != ratio - 1) return -1;
  return pos / ratio;
}

// ------------------------------------------------------------ sliding_window_indices
// Entry j of the window of a token at position pos: positions max(pos - W + 1, 0) .. pos in
// ascending order, then -1.
SMLA_HD int32_t window_entry(int64_t pos, int64_t window, int64_t j) {
  if (pos < 0) return -1;
  int64_t v = max64(pos - window + 1, 0) + j;
  return v <= pos ? static_cast<int32_t>(v) : -1;
}

// ------------------------------------------------------------------------------- DCP
// Rank holding position p: (p / I) % N; -1 for p < 0.
SMLA_HD int64_t dcp_owner(int64_t p, int64_t world, int64_t interleave) {
  return p < 0 ? -1 : (p / interleave) % world;
}
// Index of p within its owner's shard: (p / (I*N)) * I + p % I; -1 for p < 0.
SMLA_HD int64_t dcp_local_pos(int64_t p, int64_t world, int64_t interleave) {
  return p < 0 ? -1 : (p / (interleave * world)) * interleave + p % interleave;
}
// Positions p < L owned by `rank`: base = L / I / N * I whole rounds, plus what rank gets of
// the last partial round. A negative L counts as 0. Never more than max(L, 0).
SMLA_HD int64_t dcp_local_len(int64_t len, int64_t world, int64_t interleave, int64_t rank) {
  if (len <= 0) return 0;
  int64_t base = len / interleave / world * interleave;
  return base + clamp64(len - base * world - rank * interleave, 0, interleave);
}
// Slot on `rank` of global position p through that rank's block-table row, or -1 when p is
// not the rank's (p < 0 included) or its local position has no slot (paged_slot, narrow_slot):
// dcp_local_topk keeps exactly the entries this gives a slot >= 0.
SMLA_HD int32_t dcp_rank_slot(const int32_t* row, int64_t max_blocks, int64_t p, int64_t page_size, int64_t world,
                              int64_t interleave, int64_t rank) {
  if (dcp_owner(p, world, interleave) != rank) return -1;
  return narrow_slot(paged_slot(row, max_blocks, dcp_local_pos(p, world, interleave), page_size));
}

// --------------------------------------------------------------- decode split schedule
// Key blocks of one request: ceil(clamp(len, 0, max_keys) / block_n).
SMLA_HD int64_t split_key_blocks(int64_t len, int64_t max_keys, int64_t block_n) {
  return ceil_div(clamp64(len, 0, max_keys), block_n);
}
// Blocks per split target: max(1, ceil(total / num_units)), total = sum_i (blocks_i + 1).
SMLA_HD int64_t split_per_unit(int64_t total, int64_t num_units) {
  return max64(1, ceil_div(total, num_units));
}
// The same with a floor of min_blocks per split (dense decode on the sm_90a family: 4). A larger
// per_unit only shrinks each n_i, so the bound on sum_i n_i below still holds.
SMLA_HD int64_t split_per_unit_at_least(int64_t total, int64_t num_units, int64_t min_blocks) {
  return max64(min_blocks, split_per_unit(total, num_units));
}
// Splits of one request: max(1, ceil(blocks / per_unit)). Since each request contributes
// blocks_i + 1 to total, sum_i n_i <= b + total / per_unit <= b + num_units.
SMLA_HD int64_t split_count(int64_t blocks, int64_t per_unit) {
  return max64(1, ceil_div(blocks, per_unit));
}
// Blocks per split of one request: ceil(blocks / n). With n = split_count(blocks, per_unit)
// this is <= per_unit and (n - 1) * chunk < blocks, so no split is empty when blocks > 0.
SMLA_HD int64_t split_chunk(int64_t blocks, int64_t n) { return ceil_div(blocks, n); }
// Blocks per split where two consumer warpgroups take alternate blocks (the 16-row fp8_ds_mla
// decode tiles): a split whose chunk c is odd keeps warpgroup 0 busy one block longer than
// warpgroup 1, so from c = 5 on, splits of c - 1 blocks, one more split a request, end a block
// earlier; taken where they still fit the workspace (b splits each at most max_splits) and one
// wave of CTAs (ctas_per_split each, at most slots). c = 3 stays: two-block splits (16 against 11
// for 32 blocks) measured slower (docs/PERF.md, sixty-eighth pass, an H100: b1 h128 15.8 -> 16.3
// µs; b2 h128 and b1 s_q2 h128 with c 5 -> 4 19.2 -> 18.3 where both merge with four warps a head).
SMLA_HD int64_t split_per_unit_alternating(int64_t per_unit, int64_t blocks, int64_t b, int64_t max_splits,
                                           int64_t ctas_per_split, int64_t slots) {
  const int64_t c = split_chunk(blocks, split_count(blocks, per_unit));
  if (c < 5 || c % 2 == 0) return per_unit;
  const int64_t n = split_count(blocks, c - 1);
  return b * n <= max_splits && b * n * ctas_per_split <= slots ? c - 1 : per_unit;
}
// Work units of a decode launch's schedule: `units` (CTA slots / CTAs per split), or b when the b
// requests already cover all but a sixteenth of them: one split each, no partials, no combine
// (splitting a few requests to fill the last SMs cost more than those SMs gave: dense fp8 b128
// h16 191 -> 181 µs on 132 SMs, docs/PERF.md twelfth pass).
SMLA_HD int64_t split_units(int64_t b, int64_t units) {
  return b >= 1 && b <= units && 16 * (units - b) <= units ? b : units;
}
// Split j covers key blocks [split_begin, split_end).
SMLA_HD int64_t split_begin(int64_t j, int64_t chunk, int64_t blocks) { return min64(j * chunk, blocks); }
SMLA_HD int64_t split_end(int64_t j, int64_t chunk, int64_t blocks) { return min64((j + 1) * chunk, blocks); }

// ------------------------------------------------- persistent walk's last round (prefill)
// A persistent walk of `units` equal units over `slots` CTAs (unit u on CTA u % slots) leaves
// tail = units % slots of them to a last round that most CTAs sit out. The parts each tail unit
// runs as instead (split_begin / split_end of its blocks, on CTAs that would idle): as many as
// those CTAs hold, at most the unit's `blocks`. 0 (no split) where there is no partial last
// round, where it spans head tiles (tail > tokens: the walk's units are tokens within a head
// tile, tile after tile) or where fewer than two parts result.
SMLA_HD int64_t tail_split_parts(int64_t units, int64_t slots, int64_t tokens, int64_t blocks) {
  if (slots < 1 || units <= slots) return 0;
  const int64_t tail = units % slots;
  if (tail == 0 || tail > tokens) return 0;
  const int64_t parts = min64(slots / tail, blocks);
  return parts >= 2 ? parts : 0;
}

// The walk with its tail split (`ctas` CTAs, CTA c taking walk steps c, c + ctas, ...): the
// first `whole` steps are the complete rounds' units as they are, each step after them a part of
// a tail unit. Templates so that the kernel keeps its 32-bit arithmetic.
template <class I>
SMLA_HD I tail_walk_whole(I grid_units, I ctas) { return grid_units / ctas * ctas; }
template <class I>
SMLA_HD I tail_walk_steps(I grid_units, I ctas, I parts) {
  const I whole = tail_walk_whole(grid_units, ctas);
  return whole + (grid_units - whole) * parts;
}
// Step u of the walk: its unit, its part (-1: the whole unit) and the part's split slot, which
// names its partial rows: tail unit slot / parts (the combine's request), part slot % parts.
template <class I>
struct TailStep {
  I unit, part, slot;
};
template <class I>
SMLA_HD TailStep<I> tail_step(I u, I whole, I parts) {
  if (u < whole) return {u, I(-1), I(0)};
  const I slot = u - whole;
  return {whole + slot / parts, slot % parts, slot};
}

}  // namespace smla::meta
