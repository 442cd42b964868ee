// FLOPs and bytes of one call, as SPEC §7 counts them. The one place the CLI counts work,
// so every table row and JSON record uses the same rules.
//
// - FLOPs of attention = sum over rows (query token x head) of |J| * 2 * (d_qk + d_v), where J
//   is the multiset of valid keys of the row.
// - Bytes = every input read once and every output written once. KV bytes are counted once per
//   distinct slot of a work unit: a query token's key list for sparse ops (one CTA group
//   gathers one token's keys for all its heads), a request's context for dense decode (all its
//   query tokens and heads share the pages, as docs/BENCHMARKS.md's FlashMLA GB/s figures count them).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "smla/formats.h"

namespace smla::cli {

struct PerfCount {
  double flops = 0;
  double bytes = 0;
  PerfCount& operator+=(const PerfCount& o) {
    flops += o.flops;
    bytes += o.bytes;
    return *this;
  }
};

inline double attention_flops(double keys, int64_t heads, int d_qk) {
  return keys * static_cast<double>(heads) * 2.0 * (d_qk + kDv);
}

// One list of key slots: entries valid iff 0 <= idx < num_slots, counted with multiplicity,
// and the number of distinct valid slots.
struct KeyCount {
  int64_t valid = 0;
  int64_t distinct = 0;
};
inline KeyCount count_keys(const int32_t* idx, int64_t n, int64_t num_slots, std::vector<int32_t>& scratch) {
  scratch.clear();
  for (int64_t j = 0; j < n; ++j)
    if (idx[j] >= 0 && idx[j] < num_slots) scratch.push_back(idx[j]);
  KeyCount k;
  k.valid = static_cast<int64_t>(scratch.size());
  std::sort(scratch.begin(), scratch.end());
  k.distinct = std::unique(scratch.begin(), scratch.end()) - scratch.begin();
  return k;
}

// A set of sparse key lists: `lists` lists of `topk` int32 entries, `stride` apart (0: topk); optional
// lengths (one per `lists_per_length` consecutive lists) cut each list to its first entries.
struct KeySet {
  const int32_t* indices = nullptr;
  int64_t lists = 0;
  int64_t topk = 0;
  int64_t stride = 0;
  const int32_t* lengths = nullptr;
  int64_t lists_per_length = 1;
  int64_t num_slots = 0;
  int64_t bytes_per_token = 0;
};

// Attention FLOPs, KV bytes and index/length bytes of the key sets; list l of every set
// belongs to the same query token (the sets join one softmax).
inline PerfCount count_sparse_keys(const std::vector<KeySet>& sets, int64_t heads, int d_qk) {
  PerfCount c;
  std::vector<int32_t> scratch;
  for (const KeySet& s : sets) {
    for (int64_t l = 0; l < s.lists; ++l) {
      int64_t n = s.topk;
      if (s.lengths) n = std::clamp<int64_t>(s.lengths[l / s.lists_per_length], 0, s.topk);
      const KeyCount k = count_keys(s.indices + l * (s.stride ? s.stride : s.topk), n, s.num_slots, scratch);
      c.flops += attention_flops(static_cast<double>(k.valid), heads, d_qk);
      c.bytes += static_cast<double>(k.distinct) * static_cast<double>(s.bytes_per_token);
    }
    c.bytes += static_cast<double>(s.lists) * s.topk * 4.0;
    if (s.lengths) c.bytes += static_cast<double>(s.lists / s.lists_per_length) * 4.0;
  }
  return c;
}

// q in, out + lse (+ max_logits) out, sink in: the per-row traffic every attention op has.
inline double attention_io_bytes(int64_t rows, int d_qk, int q_elem_bytes, int out_elem_bytes, int row_scalars_out,
                                 int64_t sink_heads) {
  return static_cast<double>(rows) * (static_cast<double>(d_qk) * q_elem_bytes +
                                      static_cast<double>(kDv) * out_elem_bytes + 4.0 * row_scalars_out) +
         4.0 * static_cast<double>(sink_heads);
}

// Dense decode: request i has seqlens[i] keys (negative counts as 0); query token t of s_q
// sees keys [0, L - s_q + t] when causal, else [0, L). The request's visible keys are read
// once, h_kv rows of row_bytes each, plus the block-table entries that address them.
inline PerfCount count_dense_decode(const int32_t* seqlens, int64_t b, int64_t s_q, int64_t h_q, int64_t h_kv,
                                    int d_qk, int64_t row_bytes, int page_size, bool causal) {
  PerfCount c;
  for (int64_t i = 0; i < b; ++i) {
    const int64_t L = std::max<int64_t>(seqlens[i], 0);
    int64_t read = 0;
    for (int64_t t = 0; t < s_q; ++t) {
      const int64_t n = causal ? std::clamp<int64_t>(L - s_q + t + 1, 0, L) : L;
      c.flops += attention_flops(static_cast<double>(n), h_q, d_qk);
      read = std::max(read, n);
    }
    c.bytes += static_cast<double>(read) * static_cast<double>(h_kv * row_bytes);
    c.bytes += static_cast<double>((read + page_size - 1) / page_size) * 4.0 + 4.0;
  }
  return c;
}

// merge_states: one multiply-add per part element; every part read, the result written.
inline PerfCount count_merge_states(int64_t parts, int64_t rows, int64_t d_v, int part_elem_bytes, int out_elem_bytes,
                                    int64_t sink_heads) {
  PerfCount c;
  const double pr = static_cast<double>(parts) * static_cast<double>(rows);
  c.flops = pr * static_cast<double>(d_v) * 2.0;
  c.bytes = pr * (static_cast<double>(d_v) * part_elem_bytes + 4.0) +
            static_cast<double>(rows) * (static_cast<double>(d_v) * out_elem_bytes + 4.0) +
            4.0 * static_cast<double>(sink_heads);
  return c;
}

}  // namespace smla::cli
