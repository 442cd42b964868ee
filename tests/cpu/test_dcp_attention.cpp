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
#include "smla/dcp.h"
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

  // The engine's combine: every rank rescales its partial against the all-gathered LSEs
  // (dcp_rescale); the reduce-scatter sums the contributions, each rank receiving h / N heads.
  if (h % world != 0) return;
  const int hr = h / world;
  std::vector<float> received(static_cast<size_t>(world) * b * hr * kDv, 0.f);  // [dest, T, hr, d_v]
  std::vector<float> lse_mine(static_cast<size_t>(world) * b * hr, NAN);         // [dest, T, hr]
  for (int r = 0; r < world; ++r) {
    std::vector<float> scaled(static_cast<size_t>(world) * b * hr * kDv, NAN);
    DcpRescaleArgs rs;
    rs.out_local = make_view(&parts[static_cast<size_t>(r) * b * h * kDv], DType::f32, {b, h, kDv});
    rs.lse_all = make_view(lse_parts.data(), DType::f32, {world, b, h});
    rs.rank = r;
    rs.attn_sink = make_view(sink.data(), DType::f32, {h});
    rs.scaled = make_view(scaled.data(), DType::f32, {world, b, hr, kDv});
    rs.lse = make_view(&lse_mine[static_cast<size_t>(r) * b * hr], DType::f32, {b, hr});
    dcp_rescale(rs);
    for (size_t e = 0; e < scaled.size(); ++e) received[e] += scaled[e];
  }
  for (int d = 0; d < world; ++d) {
    std::vector<float> got_out, got_lse;
    std::vector<double> want_out, want_lse;
    for (int t = 0; t < b; ++t)
      for (int j = 0; j < hr; ++j) {
        const int head = d * hr + j;
        got_lse.push_back(lse_mine[(static_cast<size_t>(d) * b + t) * hr + j]);
        want_lse.push_back(lse_ref[static_cast<size_t>(t) * h + head]);
        for (int k = 0; k < kDv; ++k) {
          got_out.push_back(received[((static_cast<size_t>(d) * b + t) * hr + j) * kDv + k]);
          want_out.push_back(bf16_bits_to_float(out_ref[(static_cast<size_t>(t) * h + head) * kDv + k]));
        }
      }
    tu::expect_out_close(got_out, want_out, "rank " + std::to_string(d) + " after the reduce-scatter");
    tu::expect_lse_close(got_lse, want_lse, "rank " + std::to_string(d) + " lse");
  }
}

TEST(DcpAttention, ShardedDenseDecodeMergesToUnsharded) {
  run_dcp(2, 1);
  run_dcp(4, 8);
  run_dcp(3, 16);
  run_dcp(8, 64);
}

TEST(DcpRescale, RejectsBadArgumentsAndWritesNothing) {
  const int N = 2, T = 3, h = 4, d_v = 8;
  std::vector<float> out_local(T * h * d_v, 1.f), lse_all(N * T * h, 0.5f), sink(h, 0.f);
  std::vector<float> scaled(N * T * (h / N) * d_v, 7.f), lse(T * (h / N), 7.f);
  auto args = [&] {
    DcpRescaleArgs a;
    a.out_local = make_view(out_local.data(), DType::f32, {T, h, d_v});
    a.lse_all = make_view(lse_all.data(), DType::f32, {N, T, h});
    a.rank = 1;
    a.attn_sink = make_view(sink.data(), DType::f32, {h});
    a.scaled = make_view(scaled.data(), DType::f32, {N, T, h / N, d_v});
    a.lse = make_view(lse.data(), DType::f32, {T, h / N});
    return a;
  };
  const auto before_scaled = tu::snapshot(scaled), before_lse = tu::snapshot(lse);
  auto expect = [&](DcpRescaleArgs a, const std::vector<std::string>& fragments) {
    tu::expect_error([&] { dcp_rescale(a); }, fragments);
    EXPECT_EQ(tu::snapshot(scaled), before_scaled);
    EXPECT_EQ(tu::snapshot(lse), before_lse);
  };
  { auto a = args(); a.rank = 2; expect(a, {"rank", "between 0 and 1", "got 2"}); }
  { auto a = args(); a.rank = -1; expect(a, {"rank", "got -1"}); }
  { auto a = args(); a.out_local.shape[1] = 3; a.lse_all.shape[2] = 3; expect(a, {"out_local", "multiple of the world size 2", "(3, 3, 8)"}); }
  { auto a = args(); a.lse_all.dtype = DType::bf16; expect(a, {"lse_all", "float32", "bfloat16"}); }
  { auto a = args(); a.scaled.shape[2] = 4; expect(a, {"scaled", "(2, 3, 2, 8)", "(2, 3, 4, 8)"}); }
  { auto a = args(); a.lse.shape[1] = 4; expect(a, {"lse", "(3, 2)", "(3, 4)"}); }
  { auto a = args(); a.attn_sink.shape[0] = 3; expect(a, {"attn_sink", "(4,)", "(3,)"}); }
  { auto a = args(); a.scaled.data = out_local.data(); expect(a, {"scaled", "distinct from out_local"}); }
}

TEST(DcpCombine, RejectsHostTensorsAndBadRanks) {
  const int T = 2, h = 4, d_v = 8;
  std::vector<float> out_local(T * h * d_v, 1.f), lse_local(T * h, 0.f), out(T * h * d_v, 7.f), lse(T * h, 7.f);
  DcpCombineArgs a;
  a.out_local = make_view(out_local.data(), DType::f32, {T, h, d_v});
  a.lse_local = make_view(lse_local.data(), DType::f32, {T, h});
  a.world = 1;
  a.out = make_view(out.data(), DType::f32, {T, h, d_v});
  a.lse = make_view(lse.data(), DType::f32, {T, h});
  const auto before = tu::snapshot(out);
  int fake_comm = 0;
  tu::expect_error([&] { dcp_combine(a, &fake_comm, {}); }, {"out_local", "on cuda", "cpu"});
  DcpCombineArgs b = a;
  b.rank = 1;
  tu::expect_error([&] { dcp_combine(b, &fake_comm, {}); }, {"rank", "between 0 and 0", "got 1"});
  b = a;
  b.world = 0;
  tu::expect_error([&] { dcp_combine(b, &fake_comm, {}); }, {"world", "at least 1", "got 0"});
  b = a;
  b.method = static_cast<DcpCombineMethod>(7);
  tu::expect_error([&] { dcp_combine(b, &fake_comm, {}); }, {"method", "reduce_scatter or all_to_all", "got 7"});
  EXPECT_EQ(tu::snapshot(out), before);
}

}  // namespace
}  // namespace smla
