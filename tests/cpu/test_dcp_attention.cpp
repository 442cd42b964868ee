// Decode context parallelism simulated on one machine (SPEC §4.6, §3): the cache of each
// request is dealt to N ranks by dcp_owner_rank, every rank attends over its shard with its
// local lengths (dcp_local_seqlens) and positions (dcp_local_position), and merge_states of the
// partial (out, lse) with the sink applied once equals the unsharded result.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "common/test_util.h"
#include "smla/metadata.h"
#include "smla/ops.h"

namespace smla {
namespace {

namespace tu = smla::test;

constexpr int kD = 576, kPage = 16;

struct Paged {
  std::vector<uint16_t> rows;   // [pages, kPage, kD]
  std::vector<int32_t> table;   // [b, max_blocks]
  int max_blocks = 0;
  PagedCache cache() {
    PagedCache c;
    c.format = CacheFormat::bf16;
    const int64_t pages = static_cast<int64_t>(rows.size()) / (kPage * kD);
    c.data = make_view(rows.data(), DType::bf16, {pages, kPage, 1, kD});
    return c;
  }
};

// Request i's positions 0 .. len[i]-1 written to consecutive pages, table row i pointing at them.
Paged build_paged(int b, int max_blocks, const std::vector<int32_t>& len,
                  const std::function<const uint16_t*(int req, int64_t pos)>& row_of) {
  Paged p;
  p.max_blocks = max_blocks;
  p.rows.assign(static_cast<size_t>(b) * max_blocks * kPage * kD, 0x7fc0);  // NaN where unused
  p.table.assign(static_cast<size_t>(b) * max_blocks, -1);
  for (int i = 0; i < b; ++i) {
    for (int blk = 0; blk < max_blocks; ++blk) p.table[i * max_blocks + blk] = i * max_blocks + blk;
    for (int64_t pos = 0; pos < len[i]; ++pos) {
      const int64_t slot = static_cast<int64_t>(p.table[i * max_blocks + pos / kPage]) * kPage + pos % kPage;
      std::copy(row_of(i, pos), row_of(i, pos) + kD, p.rows.begin() + slot * kD);
    }
  }
  return p;
}

void run_dcp(int world, int interleave) {
  SCOPED_TRACE("N=" + std::to_string(world) + " I=" + std::to_string(interleave));
  const int b = 3, h = 16, max_ctx = 300;
  const DcpLayout dcp{world, interleave};
  std::vector<int32_t> len = {static_cast<int32_t>(tu::uniform_int(1, max_ctx)), 0,
                              static_cast<int32_t>(tu::uniform_int(1, max_ctx))};
  len[1] = static_cast<int32_t>(tu::uniform_int(0, std::min(world * interleave - 1, max_ctx)));  // within one round
  std::vector<std::vector<uint16_t>> keys(b);
  for (int i = 0; i < b; ++i) keys[i] = tu::random_bf16(static_cast<size_t>(max_ctx) * kD);
  auto q = tu::random_bf16(static_cast<size_t>(b) * h * kD);
  std::vector<float> sink(h);
  for (auto& s : sink) s = tu::uniform(-1.f, 2.f);

  // Unsharded reference: the whole context on one device, sink applied.
  const int max_blocks = (max_ctx + kPage - 1) / kPage;
  Paged full = build_paged(b, max_blocks, len, [&](int i, int64_t pos) { return &keys[i][pos * kD]; });
  std::vector<uint16_t> out_ref(static_cast<size_t>(b) * h * kDv);
  std::vector<float> lse_ref(static_cast<size_t>(b) * h);
  DenseDecodeArgs a;
  a.q = make_view(q.data(), DType::bf16, {b, 1, h, kD});
  a.cache = full.cache();
  a.block_table = make_view(full.table.data(), DType::i32, {b, max_blocks});
  a.seqlens = make_view(len.data(), DType::i32, {b});
  a.attn_sink = make_view(sink.data(), DType::f32, {h});
  a.out = make_view(out_ref.data(), DType::bf16, {b, 1, h, kDv});
  a.lse = make_view(lse_ref.data(), DType::f32, {b, 1, h});
  dense_decode(a);

  // Each rank: its shard, its local lengths, no sink; partials stacked for the merge.
  std::vector<float> parts(static_cast<size_t>(world) * b * h * kDv, NAN), lse_parts(static_cast<size_t>(world) * b * h, NAN);
  for (int r = 0; r < world; ++r) {
    std::vector<int32_t> local_len(b);
    dcp_local_seqlens(make_view(len.data(), DType::i32, {b}), dcp, r, make_view(local_len.data(), DType::i32, {b}));
    // Local position -> global position, from the ownership rule.
    std::vector<std::vector<int64_t>> global_of(b);
    for (int i = 0; i < b; ++i) {
      global_of[i].assign(local_len[i], -1);
      for (int64_t pos = 0; pos < len[i]; ++pos)
        if (dcp_owner_rank(pos, dcp) == r) global_of[i].at(dcp_local_position(pos, dcp)) = pos;
      for (int64_t lp = 0; lp < local_len[i]; ++lp) ASSERT_GE(global_of[i][lp], 0) << "local position without owner";
    }
    Paged shard = build_paged(b, max_blocks, local_len,
                              [&](int i, int64_t lp) { return &keys[i][global_of[i][lp] * kD]; });
    std::vector<uint16_t> out_r(static_cast<size_t>(b) * h * kDv);
    DenseDecodeArgs s = a;
    s.cache = shard.cache();
    s.block_table = make_view(shard.table.data(), DType::i32, {b, max_blocks});
    s.seqlens = make_view(local_len.data(), DType::i32, {b});
    s.attn_sink = {};
    s.out = make_view(out_r.data(), DType::bf16, {b, 1, h, kDv});
    s.lse = make_view(&lse_parts[static_cast<size_t>(r) * b * h], DType::f32, {b, 1, h});
    dense_decode(s);
    for (size_t e = 0; e < out_r.size(); ++e) parts[static_cast<size_t>(r) * b * h * kDv + e] = bf16_bits_to_float(out_r[e]);
  }
  std::vector<float> out(static_cast<size_t>(b) * h * kDv, NAN), lse(static_cast<size_t>(b) * h, NAN);
  MergeStatesArgs m;
  m.out_parts = make_view(parts.data(), DType::f32, {world, b, h, kDv});
  m.lse_parts = make_view(lse_parts.data(), DType::f32, {world, b, h});
  m.attn_sink = make_view(sink.data(), DType::f32, {h});
  m.out = make_view(out.data(), DType::f32, {b, h, kDv});
  m.lse = make_view(lse.data(), DType::f32, {b, h});
  merge_states(m);

  std::vector<double> ref_out(out_ref.size()), ref_lse(lse_ref.begin(), lse_ref.end());
  for (size_t e = 0; e < out_ref.size(); ++e) ref_out[e] = bf16_bits_to_float(out_ref[e]);
  tu::expect_out_close(out, ref_out, "sharded + merged out");
  tu::expect_lse_close(lse, ref_lse, "sharded + merged lse");
}

TEST(DcpAttention, ShardedDenseDecodeMergesToUnsharded) {
  run_dcp(2, 1);
  run_dcp(4, 8);
  run_dcp(3, 16);
  run_dcp(8, 64);
}

}  // namespace
}  // namespace smla
