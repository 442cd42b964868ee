// sparse_prefill (SPEC §4.2) against a float64 computation written here from SPEC §3.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "common/strided_buffer.h"
#include "common/test_util.h"
#include "smla/formats.h"
#include "smla/numeric.h"
#include "smla/ops.h"

namespace smla {
namespace {

namespace tu = smla::test;

constexpr int32_t kIntMin = std::numeric_limits<int32_t>::min();
constexpr int32_t kIntMax = std::numeric_limits<int32_t>::max();
constexpr uint16_t kBf16Poison = 0x7fc0;
const double kInf = std::numeric_limits<double>::infinity();

using tu::Buffer;
using tu::expect_outside_untouched;
using tu::make_buffer;

std::vector<int32_t> invalid_values(int64_t s_kv) {
  return {-1, -2, kIntMin, static_cast<int32_t>(s_kv), static_cast<int32_t>(s_kv + 1), kIntMax, -1000000};
}

// Random kv rows with invalid entries and duplicates mixed into every row.
std::vector<int32_t> make_indices(int64_t rows, int topk, int64_t s_kv, float invalid_frac = 0.25f) {
  return tu::random_indices(rows, topk, s_kv, invalid_values(s_kv), 5, invalid_frac);
}

std::vector<int32_t> make_lengths(int s_q, int topk) { return tu::make_topk_lengths(s_q, topk); }

std::vector<float> make_sink(int h_q) { return tu::make_sink(h_q, 6.0f); }

// ------------------------------------------------------------------ one call, checked

struct Problem {
  int s_q = 4, h_q = 16, d_qk = 576, s_kv = 40, topk = 16;
  std::vector<int32_t> idx;  // [s_q, topk]
  std::vector<int32_t> len;  // [s_q]; empty = absent
  std::vector<float> sink;   // empty = absent
  std::optional<float> scale;
  bool kv_3d = false, idx_3d = false;
  bool strided = false;  // non-contiguous q, kv rows, indices, out, lse and max_logits
};

struct Inputs {
  Buffer<uint16_t> q, kv;
  Buffer<int32_t> idx, len;
  Buffer<float> sink;
};

struct Outputs {
  Buffer<uint16_t> out;
  Buffer<float> lse, max_logits;
};

Inputs make_inputs(const Problem& p) {
  Inputs in;
  const int64_t d = p.d_qk, qrow = d + 48, kvrow = p.strided ? d + 32 : d;
  in.q = p.strided ? make_buffer<uint16_t>(DType::bf16, {p.s_q, p.h_q, d}, {qrow, p.s_q * qrow, 1}, kBf16Poison)
                   : make_buffer<uint16_t>(DType::bf16, {p.s_q, p.h_q, d}, {}, kBf16Poison);
  for (int64_t o : in.q.offsets()) in.q.data[o] = float_to_bf16_bits(tu::uniform(-1.0f, 1.0f));
  // A NaN row before and after the kv rows: reading an invalid index would show.
  in.kv = p.kv_3d ? make_buffer<uint16_t>(DType::bf16, {p.s_kv, 1, d}, {kvrow, 7, 1}, kBf16Poison, kvrow)
                  : make_buffer<uint16_t>(DType::bf16, {p.s_kv, d}, {kvrow, 1}, kBf16Poison, kvrow);
  for (int64_t o : in.kv.offsets()) in.kv.data[o] = float_to_bf16_bits(tu::uniform(-1.0f, 1.0f));
  // Gaps of strided index rows hold row 0, a valid key: reading past topk would show.
  const int64_t irow = p.strided ? p.topk + 3 : p.topk;
  in.idx = p.idx_3d ? make_buffer<int32_t>(DType::i32, {p.s_q, 1, p.topk}, {irow, 5, 1}, 0)
                    : make_buffer<int32_t>(DType::i32, {p.s_q, p.topk}, {irow, 1}, 0);
  in.idx.fill_view(p.idx);
  if (!p.len.empty()) {
    in.len = make_buffer<int32_t>(DType::i32, {p.s_q}, {p.strided ? 3 : 1}, 0);
    in.len.fill_view(p.len);
  }
  if (!p.sink.empty()) {
    in.sink = make_buffer<float>(DType::f32, {p.h_q}, {}, 0.0f);
    in.sink.fill_view(p.sink);
  }
  return in;
}

Outputs make_outputs(const Problem& p) {
  Outputs o;
  const int64_t orow = kDv + 16;
  o.out = p.strided ? make_buffer<uint16_t>(DType::bf16, {p.s_q, p.h_q, kDv}, {p.h_q * orow, orow, 1}, kBf16Poison)
                    : make_buffer<uint16_t>(DType::bf16, {p.s_q, p.h_q, kDv}, {}, kBf16Poison);
  std::vector<int64_t> rs = p.strided ? std::vector<int64_t>{1, p.s_q} : std::vector<int64_t>{};
  o.lse = make_buffer<float>(DType::f32, {p.s_q, p.h_q}, rs, NAN);
  o.max_logits = make_buffer<float>(DType::f32, {p.s_q, p.h_q}, rs, NAN);
  return o;
}

SparsePrefillArgs args_for(const Problem& p, const Inputs& in, const Outputs& o) {
  SparsePrefillArgs a;
  a.q = in.q.view();
  a.kv = in.kv.view();
  a.indices = in.idx.view();
  if (!p.len.empty()) a.topk_length = in.len.view();
  if (!p.sink.empty()) a.attn_sink = in.sink.view();
  a.softmax_scale = p.scale;
  a.out = o.out.view();
  a.lse = o.lse.view();
  a.max_logits = o.max_logits.view();
  return a;
}

struct Reference {
  std::vector<double> out, lse, max_logits;
};

// SPEC §3 for every (token, head), written out plainly.
Reference reference(const Problem& p, const Inputs& in) {
  const std::vector<float> q = tu::bf16_to_float(in.q.values());
  const std::vector<float> kv = tu::bf16_to_float(in.kv.values());
  const double scale = p.scale ? double(*p.scale) : 1.0 / std::sqrt(double(p.d_qk));
  Reference r;
  r.out.assign(int64_t{p.s_q} * p.h_q * kDv, 0.0);
  r.lse.assign(int64_t{p.s_q} * p.h_q, -kInf);
  r.max_logits.assign(int64_t{p.s_q} * p.h_q, -kInf);
  for (int t = 0; t < p.s_q; ++t) {
    int64_t n = p.topk;
    if (!p.len.empty()) n = std::min<int64_t>(std::max<int64_t>(p.len[t], 0), p.topk);
    std::vector<const float*> keys;
    for (int64_t j = 0; j < n; ++j) {
      const int32_t v = p.idx[int64_t{t} * p.topk + j];
      if (v >= 0 && v < p.s_kv) keys.push_back(kv.data() + int64_t{v} * p.d_qk);
    }
    if (keys.empty()) continue;
    for (int h = 0; h < p.h_q; ++h) {
      const int64_t row = int64_t{t} * p.h_q + h;
      const float* qr = q.data() + row * p.d_qk;
      std::vector<double> s(keys.size());
      double m = -kInf;
      for (size_t j = 0; j < keys.size(); ++j) {
        double dot = 0;
        for (int k = 0; k < p.d_qk; ++k) dot += double(qr[k]) * keys[j][k];
        s[j] = scale * dot;
        m = std::max(m, s[j]);
      }
      double sum = 0;
      for (double v : s) sum += std::exp(v - m);
      const double lse = m + std::log(sum);
      const double f = p.sink.empty() ? 1.0 : tu::sink_factor(p.sink[h], lse);
      for (size_t j = 0; j < keys.size(); ++j) {
        const double w = std::exp(s[j] - lse) * f;
        for (int k = 0; k < kDv; ++k) r.out[row * kDv + k] += w * keys[j][k];
      }
      r.lse[row] = lse;
      r.max_logits[row] = m;
    }
  }
  return r;
}

struct Outcome {
  std::vector<float> out, lse, max_logits;
  Reference ref;
};

Outcome run(const Problem& p) {
  const Inputs in = make_inputs(p);
  const Outputs o = make_outputs(p);
  sparse_prefill(args_for(p, in, o));
  expect_outside_untouched(o.out, kBf16Poison, "out");
  return {tu::bf16_to_float(o.out.values()), o.lse.values(), o.max_logits.values(), reference(p, in)};
}

void check(const Outcome& r, const std::string& what) {
  tu::expect_out_close(r.out, r.ref.out, what + " out");
  tu::expect_lse_close(r.lse, r.ref.lse, what + " lse");
  tu::expect_lse_close(r.max_logits, r.ref.max_logits, what + " max_logits");
  tu::expect_empty_rows_zero(r.out, r.ref.lse, kDv, what + ": rows with no valid key must be exactly zero");
}

size_t count_empty_rows(const Outcome& r) { return std::count(r.ref.lse.begin(), r.ref.lse.end(), -kInf); }

// ------------------------------------------------------------------ tests

TEST(SparsePrefill, V32ShapesD576) {
  Problem p;
  p.s_q = 6, p.h_q = 16, p.d_qk = 576, p.s_kv = 50, p.topk = 32;
  p.idx = make_indices(p.s_q, p.topk, p.s_kv);
  p.len = make_lengths(p.s_q, p.topk);
  p.sink = make_sink(p.h_q);
  p.strided = true;
  check(run(p), "d_qk 576 strided");
  p.strided = false;
  p.sink.clear();
  check(run(p), "d_qk 576 contiguous, no sink");
}

TEST(SparsePrefill, V4ShapesD512With3DKvAndIndices) {
  Problem p;
  p.s_q = 4, p.h_q = 64, p.d_qk = 512, p.s_kv = 40, p.topk = 24;
  p.idx = make_indices(p.s_q, p.topk, p.s_kv);
  p.len = make_lengths(p.s_q, p.topk);
  p.sink = make_sink(p.h_q);
  p.kv_3d = p.idx_3d = true;
  p.strided = true;
  check(run(p), "d_qk 512, 3-D kv and indices");
  p.strided = false;
  check(run(p), "d_qk 512, 3-D kv and indices, packed");
}

TEST(SparsePrefill, Heads128) {
  // s_q = 1: one token, its heads spread over the cores.
  for (int s_q : {1, 3}) {
    Problem p;
    p.s_q = s_q, p.h_q = 128, p.d_qk = 576, p.s_kv = 64, p.topk = 48;
    p.idx = make_indices(p.s_q, p.topk, p.s_kv);
    p.len = make_lengths(p.s_q, p.topk);
    p.kv_3d = true;
    check(run(p), "h_q 128 s_q " + std::to_string(s_q));
  }
}

TEST(SparsePrefill, EmptyKeySetsGiveZeroAndMinusInf) {
  Problem p;
  p.s_q = 5, p.h_q = 4, p.d_qk = 512, p.s_kv = 12;
  const std::vector<int32_t> bad = invalid_values(p.s_kv);
  p.topk = static_cast<int>(bad.size());
  // Token 0: every kind of invalid index; 1: all -1; 2-4: valid keys cut to nothing by
  // topk_length 0, a negative one and INT32_MIN.
  p.idx = bad;
  p.idx.insert(p.idx.end(), p.topk, -1);
  for (int k = 0; k < 3 * p.topk; ++k) p.idx.push_back(k % p.s_kv);
  p.len = {p.topk, kIntMax, 0, -1, kIntMin};
  p.sink = {INFINITY, -INFINITY, 0.0f, 3.0f};
  const Outcome r = run(p);
  check(r, "empty key sets");
  EXPECT_EQ(count_empty_rows(r), r.ref.lse.size());
}

TEST(SparsePrefill, EmptyKvSkipsEveryIndex) {
  Problem p;
  p.s_q = 2, p.h_q = 4, p.d_qk = 576, p.s_kv = 0, p.topk = 3;
  p.idx = {0, 1, -1, 0, 0, 2};
  p.sink = {INFINITY, -INFINITY, 0.0f, 3.0f};
  const Outcome r = run(p);
  check(r, "s_kv 0");
  EXPECT_EQ(count_empty_rows(r), r.ref.lse.size());
}

TEST(SparsePrefill, DuplicatesCountTwice) {
  Problem p;
  p.s_q = 3, p.h_q = 8, p.d_qk = 576, p.s_kv = 10, p.topk = 5;
  const auto k = static_cast<int32_t>(tu::uniform_int(0, p.s_kv - 1)), m = (k + 3) % p.s_kv;
  p.idx = {k, -1, -1, -1, -1, k, -1, k, -2, kIntMin, k, m, m, m, p.s_kv};
  const Outcome r = run(p);
  check(r, "duplicates");
  // One distinct key, listed once or twice, has weight 1 whatever the logits.
  for (int row = 0; row < 2 * p.h_q; ++row) {
    EXPECT_NEAR(r.lse[row] - r.max_logits[row], row >= p.h_q ? std::log(2.0) : 0.0, 1e-4) << "row " << row;
  }
}

TEST(SparsePrefill, TopkLengthIsClampedPerToken) {
  Problem p;
  p.s_q = 8, p.h_q = 4, p.d_qk = 512, p.s_kv = 30, p.topk = 20;
  p.idx = make_indices(p.s_q, p.topk, p.s_kv, 0.0f);
  for (auto& v : p.idx) v = (v < 0 || v >= p.s_kv) ? 0 : v;
  p.len = make_lengths(p.s_q, p.topk);
  p.strided = true;
  const Outcome r = run(p);
  check(r, "topk_length cases");
  EXPECT_EQ(count_empty_rows(r), size_t(3 * p.h_q));  // lengths 0, -3 and INT32_MIN
}

TEST(SparsePrefill, SinkChangesOnlyOut) {
  Problem p;
  p.s_q = 3, p.h_q = 8, p.d_qk = 576, p.s_kv = 20, p.topk = 16;
  p.idx = make_indices(p.s_q, p.topk, p.s_kv);
  const Inputs in = make_inputs(p);
  Problem ps = p;
  ps.sink = make_sink(p.h_q);
  const Inputs in_sink = [&] {
    Inputs x = make_inputs(ps);
    x.q = in.q;
    x.kv = in.kv;
    return x;
  }();
  const Outputs plain = make_outputs(p), sunk = make_outputs(ps);
  sparse_prefill(args_for(p, in, plain));
  sparse_prefill(args_for(ps, in_sink, sunk));
  EXPECT_EQ(tu::snapshot(plain.lse.data), tu::snapshot(sunk.lse.data)) << "lse excludes the sink";
  EXPECT_EQ(tu::snapshot(plain.max_logits.data), tu::snapshot(sunk.max_logits.data)) << "max_logits excludes the sink";
  Outcome r{tu::bf16_to_float(sunk.out.values()), sunk.lse.values(), sunk.max_logits.values(), reference(ps, in_sink)};
  check(r, "sink");
  for (int t = 0; t < p.s_q; ++t)
    for (int k = 0; k < kDv; ++k) ASSERT_EQ(r.out[(t * p.h_q + 0) * kDv + k], 0.0f) << "a +inf sink gives out = 0";
  // A -inf sink changes nothing.
  for (int t = 0; t < p.s_q; ++t)
    for (int k = 0; k < kDv; ++k) {
      const int64_t o = (int64_t{t} * p.h_q + 1) * kDv + k;
      ASSERT_EQ(sunk.out.data[o], plain.out.data[o]);
    }
}

TEST(SparsePrefill, SoftmaxScaleOverridesDefault) {
  Problem p;
  p.s_q = 3, p.h_q = 8, p.d_qk = 512, p.s_kv = 20, p.topk = 16;
  p.idx = make_indices(p.s_q, p.topk, p.s_kv);
  p.scale = tu::uniform(0.01f, 0.2f);
  check(run(p), "softmax_scale");
}

TEST(SparsePrefill, NoQueryTokensDoesNothing) {
  Problem p;
  p.s_q = 0, p.h_q = 4, p.d_qk = 576, p.s_kv = 4, p.topk = 2;
  const Inputs in = make_inputs(p);
  const Outputs o = make_outputs(p);
  const auto before = tu::snapshot(o.out.data);
  sparse_prefill(args_for(p, in, o));
  EXPECT_EQ(tu::snapshot(o.out.data), before);
  EXPECT_EQ(sparse_prefill_workspace_size(args_for(p, in, o)), 0u);
}

// ------------------------------------------------------------------ validation

class SparsePrefillValidation : public ::testing::Test {
 protected:
  static constexpr int s_q = 3, h_q = 16, d = 576, s_kv = 10, topk = 4;
  std::vector<uint16_t> q = tu::random_bf16(s_q * h_q * d);
  std::vector<uint16_t> kv = tu::random_bf16(s_kv * d);
  std::vector<int32_t> idx = make_indices(s_q, topk, s_kv);
  std::vector<int32_t> len = {1, 4, 2};
  std::vector<float> sink = tu::random_f32(h_q, -1, 1);
  std::vector<uint16_t> out = std::vector<uint16_t>(s_q * h_q * kDv, kBf16Poison);
  std::vector<float> lse = std::vector<float>(s_q * h_q, NAN);
  std::vector<float> max_logits = std::vector<float>(s_q * h_q, NAN);

  SparsePrefillArgs valid() {
    SparsePrefillArgs a;
    a.q = make_view(q.data(), DType::bf16, {s_q, h_q, d});
    a.kv = make_view(kv.data(), DType::bf16, {s_kv, d});
    a.indices = make_view(idx.data(), DType::i32, {s_q, topk});
    a.topk_length = make_view(len.data(), DType::i32, {s_q});
    a.attn_sink = make_view(sink.data(), DType::f32, {h_q});
    a.out = make_view(out.data(), DType::bf16, {s_q, h_q, kDv});
    a.lse = make_view(lse.data(), DType::f32, {s_q, h_q});
    a.max_logits = make_view(max_logits.data(), DType::f32, {s_q, h_q});
    return a;
  }
  void expect_rejected(const SparsePrefillArgs& a, const std::vector<std::string>& fragments) {
    tu::expect_rejected_untouched({[&] { sparse_prefill(a); }, [&] { (void)sparse_prefill_workspace_size(a); }},
                                  fragments,
                                  {tu::watch("out", out), tu::watch("lse", lse), tu::watch("max_logits", max_logits)});
  }
};

TEST_F(SparsePrefillValidation, ValidArgumentsRun) {
  EXPECT_EQ(sparse_prefill_workspace_size(valid()), 0u);
  sparse_prefill(valid());
  for (float v : lse) EXPECT_FALSE(std::isnan(v));
}

TEST_F(SparsePrefillValidation, Q) {
  auto a = valid();
  a.q.data = nullptr;
  expect_rejected(a, {"q must be bfloat16 of shape (*, *, *), got nothing"});
  a = valid();
  a.q.dtype = DType::f16;
  expect_rejected(a, {"q must be bfloat16 of shape (*, *, *), got float16 (3, 16, 576)"});
  a = valid();
  a.q = make_view(q.data(), DType::bf16, {1, s_q, h_q, d});
  expect_rejected(a, {"q must be bfloat16 of shape (*, *, *), got bfloat16 (1, 3, 16, 576)"});
  a = valid();
  a.q.shape[2] = 500;
  expect_rejected(a, {"q must be", "d_qk = 576 or 512", "got bfloat16 (3, 16, 500)"});
  a = valid();
  a.q.shape[1] = 0;
  expect_rejected(a, {"q must be", "h_q >= 1", "got bfloat16 (3, 0, 576)"});
  a = valid();
  a.q.stride = {h_q * d, d, 2};
  expect_rejected(a, {"q must be", "last dimension contiguous", "strides (9216, 576, 2)"});
}

TEST_F(SparsePrefillValidation, Kv) {
  auto a = valid();
  a.kv.data = nullptr;
  expect_rejected(a, {"kv must be bfloat16 of shape (*, 576), got nothing"});
  a = valid();
  a.kv.dtype = DType::f16;
  expect_rejected(a, {"kv must be bfloat16 of shape (*, 576), got float16 (10, 576)"});
  a = valid();
  a.kv = make_view(kv.data(), DType::bf16, {s_kv * 576 / 512, 512});
  expect_rejected(a, {"kv must be bfloat16 of shape (*, 576), got bfloat16 (11, 512)"});
  a = valid();
  a.kv = make_view(kv.data(), DType::bf16, {s_kv / 2, 2, d});
  expect_rejected(a, {"kv must be bfloat16 of shape (*, 1, 576), got bfloat16 (5, 2, 576)"});
  a = valid();
  a.kv = make_view(kv.data(), DType::bf16, {s_kv, 1, 1, d});
  expect_rejected(a, {"kv must be bfloat16 of shape (*, 576), got bfloat16 (10, 1, 1, 576)"});
  a = valid();
  a.kv = make_strided_view(kv.data(), DType::bf16, {s_kv / 2, d}, {2 * d, 2});
  expect_rejected(a, {"kv must be", "last dimension contiguous"});
  a = valid();
  a.kv.device = cuda_device(0);
  expect_rejected(a, {"kv must be on cpu like q, got on cuda:0"});
}

// Keys from a paged cache in place of kv (SPEC §4.2): exactly one of the two, a sparse format,
// one KV head, and q's d_qk equal to the cache's.
TEST_F(SparsePrefillValidation, PagedCache) {
  std::vector<uint8_t> ds(2 * 64 * 656, 0), m1(2 * 64 * 584, 0), e4(2 * 64 * 576, 0);
  PagedCache ds_cache, m1_cache, e4_cache;
  ds_cache.format = CacheFormat::fp8_ds_mla;
  ds_cache.data = make_view(ds.data(), DType::u8, {2, 64, 656});
  m1_cache.format = CacheFormat::fp8_model1;
  m1_cache.data = make_strided_view(m1.data(), DType::u8, {2, 64, 584}, {64 * 584, 584, 1});
  e4_cache.format = CacheFormat::fp8_e4m3;
  e4_cache.data = make_view(e4.data(), DType::fp8_e4m3, {2, 64, 576});

  auto a = valid();
  a.kv = {};
  a.cache = ds_cache;
  EXPECT_EQ(sparse_prefill_workspace_size(a), 0u);
  sparse_prefill(a);
  for (float v : lse) EXPECT_FALSE(std::isnan(v));
  for (float v : max_logits) EXPECT_FALSE(std::isnan(v));

  std::fill(lse.begin(), lse.end(), NAN);
  std::fill(max_logits.begin(), max_logits.end(), NAN);
  std::fill(out.begin(), out.end(), kBf16Poison);
  a = valid();
  a.cache = ds_cache;
  expect_rejected(a, {"kv must be nothing when cache is given", "got bfloat16 (10, 576)"});
  a = valid();
  a.kv = {};
  a.cache = e4_cache;
  expect_rejected(a, {"cache.format must be fp8_ds_mla, fp8_model1 or bf16, got fp8_e4m3"});
  a = valid();
  a.kv = {};
  a.cache = m1_cache;
  expect_rejected(a, {"q must be bfloat16 of shape (*, *, 512), the d_qk of the fp8_model1 cache",
                      "got bfloat16 (3, 16, 576)"});
  a = valid();
  a.kv = {};
  a.cache = ds_cache;
  a.cache.data.device = cuda_device(0);
  expect_rejected(a, {"cache must be on cpu like q, got on cuda:0"});
}

TEST_F(SparsePrefillValidation, IndicesAndLengths) {
  auto a = valid();
  a.indices.dtype = DType::i64;
  expect_rejected(a, {"indices must be int32 of shape (3, *), got int64 (3, 4)"});
  a = valid();
  a.indices = make_view(idx.data(), DType::i32, {2, topk});
  expect_rejected(a, {"indices must be int32 of shape (3, *), got int32 (2, 4)"});
  a = valid();
  a.indices = make_view(idx.data(), DType::i32, {s_q, 2, 2});
  expect_rejected(a, {"indices must be int32 of shape (3, 1, *), got int32 (3, 2, 2)"});
  a = valid();
  a.indices.shape[1] = 0;
  expect_rejected(a, {"indices must be", "topk >= 1", "got int32 (3, 0)"});
  a = valid();
  a.indices = make_strided_view(idx.data(), DType::i32, {s_q, 2}, {4, 2});
  expect_rejected(a, {"indices must be", "last dimension contiguous", "strides (4, 2)"});
  a = valid();
  a.indices.device = cuda_device(0);
  expect_rejected(a, {"indices must be on cpu like q"});
  a = valid();
  a.topk_length.shape[0] = 2;
  expect_rejected(a, {"topk_length must be int32 of shape (3,), got int32 (2,)"});
  a = valid();
  a.topk_length.dtype = DType::i64;
  expect_rejected(a, {"topk_length must be int32 of shape (3,), got int64 (3,)"});
  a = valid();
  a.topk_length.device = cuda_device(0);
  expect_rejected(a, {"topk_length must be on cpu like q"});
  a = valid();
  a.topk_length.stride[0] = -1;
  expect_rejected(a, {"topk_length must be", "non-negative strides"});
}

TEST_F(SparsePrefillValidation, SinkAndScale) {
  auto a = valid();
  a.attn_sink.dtype = DType::bf16;
  expect_rejected(a, {"attn_sink must be float32 of shape (16,), got bfloat16 (16,)"});
  a = valid();
  a.attn_sink = make_view(sink.data(), DType::f32, {1, h_q});
  expect_rejected(a, {"attn_sink must be float32 of shape (16,), got float32 (1, 16)"});
  a = valid();
  a.attn_sink.device = cuda_device(0);
  expect_rejected(a, {"attn_sink must be on cpu like q"});
  a = valid();
  a.attn_sink.stride[0] = -2;
  expect_rejected(a, {"attn_sink must be", "non-negative strides"});
  for (float s : {0.0f, -1.0f, NAN, -INFINITY, INFINITY}) {
    a = valid();
    a.softmax_scale = s;
    expect_rejected(a, {"softmax_scale must be a positive finite float, got"});
  }
  a = valid();
  a.softmax_scale = NAN;
  expect_rejected(a, {"got nan"});
}

TEST_F(SparsePrefillValidation, Outputs) {
  auto a = valid();
  a.out.dtype = DType::f32;
  expect_rejected(a, {"out must be bfloat16 of shape (3, 16, 512), got float32 (3, 16, 512)"});
  a = valid();
  a.out.shape[2] = 576;
  expect_rejected(a, {"out must be bfloat16 of shape (3, 16, 512), got bfloat16 (3, 16, 576)"});
  a = valid();
  a.out.data = nullptr;
  expect_rejected(a, {"out must be", "got nothing"});
  a = valid();
  a.out.stride[2] = 2;
  expect_rejected(a, {"out must be", "last dimension contiguous"});
  a = valid();
  a.out.device = cuda_device(0);
  expect_rejected(a, {"out must be on cpu like q"});
  a = valid();
  a.lse.dtype = DType::f64;
  expect_rejected(a, {"lse must be float32 of shape (3, 16), got float64 (3, 16)"});
  a = valid();
  a.lse.shape[1] = 8;
  expect_rejected(a, {"lse must be float32 of shape (3, 16), got float32 (3, 8)"});
  a = valid();
  a.lse.device = cuda_device(0);
  expect_rejected(a, {"lse must be on cpu like q"});
  a = valid();
  a.max_logits.data = nullptr;
  expect_rejected(a, {"max_logits must be float32 of shape (3, 16), got nothing"});
  a = valid();
  a.max_logits = make_view(max_logits.data(), DType::f32, {s_q * h_q});
  expect_rejected(a, {"max_logits must be float32 of shape (3, 16), got float32 (48,)"});
  a = valid();
  a.max_logits.stride[0] = -16;
  expect_rejected(a, {"max_logits must be", "non-negative strides"});
  a = valid();
  a.max_logits.device = cuda_device(0);
  expect_rejected(a, {"max_logits must be on cpu like q"});
}

TEST_F(SparsePrefillValidation, OutputsMustNotAliasInputs) {
  // An output larger than the input it aliases starts a buffer that holds it (tu::with_room), so
  // that it meets that input alone, whatever the allocator put next to it.
  std::vector<uint16_t> kv_room = tu::with_room(kv, out.size());
  auto a = valid();
  a.kv = make_view(kv_room.data(), DType::bf16, {s_kv, d});
  a.out.data = kv_room.data();
  expect_rejected(a, {"out must be a buffer distinct from kv"});
  a = valid();
  a.lse.data = q.data();
  expect_rejected(a, {"lse must be a buffer distinct from q"});
  a = valid();
  a.max_logits.data = lse.data();
  expect_rejected(a, {"max_logits must be a buffer distinct from lse"});
  a = valid();
  a.max_logits.data = out.data();
  expect_rejected(a, {"max_logits must be a buffer distinct from out"});
  // Every input counts, the optional ones too.
  std::vector<int32_t> len_room = tu::with_room(len, lse.size());
  std::vector<float> sink_room = tu::with_room(sink, max_logits.size());
  a = valid();
  a.topk_length = make_view(len_room.data(), DType::i32, {s_q});
  a.lse.data = len_room.data();
  expect_rejected(a, {"lse must be a buffer distinct from topk_length"});
  a = valid();
  a.attn_sink = make_view(sink_room.data(), DType::f32, {h_q});
  a.max_logits.data = sink_room.data();
  expect_rejected(a, {"max_logits must be a buffer distinct from attn_sink"});
}

// CUDA tensors are checked on the host too; nothing here is dereferenced.
TEST_F(SparsePrefillValidation, CudaAlignmentAndBackend) {
  auto on_cuda = [&] {
    auto a = valid();
    for (TensorView* t : {&a.q, &a.kv, &a.indices, &a.topk_length, &a.attn_sink, &a.out, &a.lse, &a.max_logits})
      t->device = cuda_device(0);
    return a;
  };
  auto a = on_cuda();
  a.kv.stride[0] = d + 4;
  expect_rejected(a, {"kv must be aligned to 16 bytes", "strides (580, 1)"});
  a = on_cuda();
  a.q.data = reinterpret_cast<uint8_t*>(q.data()) + 8;
  expect_rejected(a, {"q must be aligned to 16 bytes", "address % 16 = 8"});
  a = on_cuda();
  a.out.stride = {h_q * 516, 516, 1};
  expect_rejected(a, {"out must be aligned to 16 bytes"});
  a = on_cuda();
  a.topk_length.data = reinterpret_cast<uint8_t*>(len.data()) + 2;
  expect_rejected(a, {"topk_length must be aligned to 4 bytes", "address % 4 = 2"});
  a = on_cuda();
  a.max_logits.data = reinterpret_cast<uint8_t*>(max_logits.data()) + 1;
  expect_rejected(a, {"max_logits must be aligned to 4 bytes"});
#if !SMLA_WITH_CUDA
  a = on_cuda();
  EXPECT_THROW(sparse_prefill(a), RuntimeError);
  EXPECT_THROW((void)sparse_prefill_workspace_size(a), RuntimeError);
#endif
}

}  // namespace
}  // namespace smla
