// dense_decode (SPEC §4.3) against a float64 computation written here: paged caches with gaps
// of garbage between pages, block tables and lengths that lie, causal masks, grouped kv heads,
// fp8 caches and fp8 queries, sinks; and every validation rule.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "smla/formats.h"
#include "smla/numeric.h"
#include "smla/ops.h"

namespace smla {
namespace {

constexpr int32_t kI32Min = std::numeric_limits<int32_t>::min();
constexpr int32_t kI32Max = std::numeric_limits<int32_t>::max();

struct Config {
  CacheFormat format = CacheFormat::bf16;
  DType q_dtype = DType::bf16;
  int d_qk = 576;
  int h_q = 8, h_kv = 1;
  int page_size = 16;
  int s_q = 1;
  bool causal = false;
  std::vector<int32_t> seqlens;
  int max_blocks = 4;
  int num_blocks = 6;
  bool sink = false;
  std::optional<float> softmax_scale;
  float k_scale = 1.0f;
  float q_scale = 1.0f;
  bool cache_3d = false;  // [num_blocks, page_size, d_qk] (h_kv = 1)
  std::string name() const {
    return std::string(format_name(format)) + " q " + dtype_name(q_dtype) + " d_qk " + std::to_string(d_qk) +
           " h_q " + std::to_string(h_q) + " h_kv " + std::to_string(h_kv) + " page " + std::to_string(page_size) +
           " s_q " + std::to_string(s_q) + (causal ? " causal" : "") + (sink ? " sink" : "");
  }
};

std::vector<uint8_t> garbage(size_t n) {
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(test::uniform_int(0, 255));
  return v;
}

int64_t elem_size(DType d) { return d == DType::fp8_e4m3 ? 1 : 2; }

// One element stored in `dtype` (fp8 scaled by `scale`), and the value it stands for.
void encode_value(DType dtype, float x, float scale, uint8_t* dst, double* value) {
  switch (dtype) {
    case DType::bf16: {
      const uint16_t b = float_to_bf16_bits(x);
      std::memcpy(dst, &b, 2);
      *value = bf16_bits_to_float(b);
      break;
    }
    case DType::f16: {
      const uint16_t h = float_to_fp16_bits(x);
      std::memcpy(dst, &h, 2);
      *value = fp16_bits_to_float(h);
      break;
    }
    default: {
      *dst = float_to_e4m3(x / scale);
      *value = static_cast<double>(e4m3_to_float(*dst)) * scale;
      break;
    }
  }
}

struct Problem {
  Config cfg;
  int64_t b = 0;
  // Cache: bytes with pages `page_stride` bytes apart; key values by [slot][head][d].
  std::vector<uint8_t> cache_bytes;
  std::vector<double> keys;
  // q: strided, with garbage between rows; values by [i][t][h][d].
  std::vector<uint8_t> q_bytes;
  std::vector<double> q_values;
  std::vector<int32_t> block_table;  // row stride max_blocks + 3
  std::vector<int32_t> seqlens;
  std::vector<float> sink;
  std::vector<uint16_t> out;  // strided: head stride 512 + 8
  std::vector<float> lse;     // strided: token stride h_q + 2
  DenseDecodeArgs args;

  int64_t bt_stride() const { return cfg.max_blocks + 3; }
  int64_t out_head_stride() const { return kDv + 8; }
  int64_t out_token_stride() const { return cfg.h_q * out_head_stride() + 16; }
  int64_t lse_token_stride() const { return cfg.h_q + 2; }
};

Problem build(const Config& cfg) {
  Problem p;
  p.cfg = cfg;
  p.b = static_cast<int64_t>(cfg.seqlens.size());
  const int64_t b = p.b, d = cfg.d_qk, ps = cfg.page_size, nb = cfg.num_blocks;
  const DType cache_dtype = cfg.format == CacheFormat::bf16 ? DType::bf16
                            : cfg.format == CacheFormat::fp16 ? DType::f16 : DType::fp8_e4m3;
  const int64_t es = elem_size(cache_dtype);
  const int64_t page_elems = ps * cfg.h_kv * d, gap_elems = 40;
  const int64_t page_stride = page_elems + gap_elems;  // elements
  p.cache_bytes = garbage(nb * page_stride * es);
  p.keys.resize(nb * ps * cfg.h_kv * d);
  for (int64_t slot = 0; slot < nb * ps; ++slot)
    for (int64_t g = 0; g < cfg.h_kv; ++g)
      for (int64_t k = 0; k < d; ++k) {
        const int64_t at = (slot / ps) * page_stride + ((slot % ps) * cfg.h_kv + g) * d + k;
        encode_value(cache_dtype, test::uniform(-1.0f, 1.0f), cfg.k_scale, &p.cache_bytes[at * es],
                     &p.keys[(slot * cfg.h_kv + g) * d + k]);
      }
  PagedCache cache;
  cache.format = cfg.format;
  cache.k_scale = cfg.k_scale;
  if (cfg.cache_3d)
    cache.data = make_strided_view(p.cache_bytes.data(), cache_dtype, {nb, ps, d}, {page_stride, d, 1});
  else
    cache.data = make_strided_view(p.cache_bytes.data(), cache_dtype, {nb, ps, cfg.h_kv, d},
                                   {page_stride, cfg.h_kv * d, d, 1});

  const int64_t s_q = cfg.s_q, h_q = cfg.h_q, qes = elem_size(cfg.q_dtype);
  const int64_t q_hs = d + 16, q_ts = h_q * q_hs + 8, q_bs = s_q * q_ts + 24;
  p.q_bytes = garbage(std::max<int64_t>(b, 1) * q_bs * qes);
  p.q_values.resize(b * s_q * h_q * d);
  for (int64_t i = 0; i < b; ++i)
    for (int64_t t = 0; t < s_q; ++t)
      for (int64_t h = 0; h < h_q; ++h)
        for (int64_t k = 0; k < d; ++k)
          encode_value(cfg.q_dtype, test::uniform(-2.0f, 2.0f), cfg.q_scale,
                       &p.q_bytes[(i * q_bs + t * q_ts + h * q_hs + k) * qes],
                       &p.q_values[((i * s_q + t) * h_q + h) * d + k]);

  // Block table: mostly real blocks (repeats allowed), some ids outside the cache; the
  // padding after each row is garbage.
  const int32_t bad_ids[] = {-1, -2, kI32Min, static_cast<int32_t>(nb), static_cast<int32_t>(nb + 100), kI32Max};
  p.block_table.resize(std::max<int64_t>(b, 1) * p.bt_stride());
  for (auto& e : p.block_table) {
    if (test::uniform(0, 1) < 0.2f) e = bad_ids[test::uniform_int(0, 5)];
    else e = static_cast<int32_t>(test::uniform_int(0, nb - 1));
  }
  p.seqlens = cfg.seqlens;
  p.seqlens.push_back(0);  // never viewed: keeps the pointer of an empty batch non-null
  if (cfg.sink) {
    const float specials[] = {INFINITY, -INFINITY};
    for (int64_t h = 0; h < h_q; ++h)
      p.sink.push_back(h % 4 == 1 ? specials[(h / 4) % 2] : test::uniform(-3.0f, 3.0f));
  }
  p.out.assign(std::max<int64_t>(b * s_q, 1) * p.out_token_stride(), cfg.q_dtype == DType::f16 ? 0x7e00 : test::bf16_nan());
  p.lse.assign(std::max<int64_t>(b * s_q, 1) * p.lse_token_stride(), test::f32_nan());

  DenseDecodeArgs& a = p.args;
  a.q = make_strided_view(p.q_bytes.data(), cfg.q_dtype, {b, s_q, h_q, d}, {q_bs, q_ts, q_hs, 1});
  a.cache = cache;
  a.block_table = make_strided_view(p.block_table.data(), DType::i32, {b, cfg.max_blocks}, {p.bt_stride(), 1});
  a.seqlens = make_view(p.seqlens.data(), DType::i32, {b});
  a.causal = cfg.causal;
  a.q_scale = cfg.q_scale;
  if (cfg.sink) a.attn_sink = make_view(p.sink.data(), DType::f32, {h_q});
  a.softmax_scale = cfg.softmax_scale;
  a.out = make_strided_view(p.out.data(), cfg.q_dtype == DType::f16 ? DType::f16 : DType::bf16, {b, s_q, h_q, kDv},
                            {s_q * p.out_token_stride(), p.out_token_stride(), p.out_head_stride(), 1});
  a.lse = make_strided_view(p.lse.data(), DType::f32, {b, s_q, h_q}, {s_q * p.lse_token_stride(), p.lse_token_stride(), 1});
  return p;
}

// SPEC §3 in float64, from the key values the test stored.
void reference(const Problem& p, std::vector<double>& out, std::vector<double>& lse) {
  const Config& c = p.cfg;
  const int64_t d = c.d_qk, ps = c.page_size, group = c.h_q / c.h_kv;
  const double scale = c.softmax_scale ? *c.softmax_scale : 1.0 / std::sqrt(static_cast<double>(d));
  out.assign(p.b * c.s_q * c.h_q * kDv, 0.0);
  lse.assign(p.b * c.s_q * c.h_q, -std::numeric_limits<double>::infinity());
  for (int64_t i = 0; i < p.b; ++i) {
    const int64_t len = std::min<int64_t>(std::max<int64_t>(p.seqlens[i], 0), int64_t{c.max_blocks} * ps);
    for (int64_t t = 0; t < c.s_q; ++t) {
      const int64_t end = c.causal ? len - c.s_q + t + 1 : len;  // keys [0, end)
      for (int64_t h = 0; h < c.h_q; ++h) {
        const double* q = &p.q_values[((i * c.s_q + t) * c.h_q + h) * d];
        std::vector<const double*> K;
        for (int64_t pos = 0; pos < end; ++pos) {
          const int32_t blk = p.block_table[i * p.bt_stride() + pos / ps];
          if (blk < 0 || blk >= c.num_blocks) continue;
          K.push_back(&p.keys[((blk * ps + pos % ps) * c.h_kv + h / group) * d]);
        }
        const int64_t row = (i * c.s_q + t) * c.h_q + h;
        if (K.empty()) continue;
        std::vector<double> s;
        double m = -std::numeric_limits<double>::infinity();
        for (const double* k : K) {
          double dot = 0;
          for (int64_t e = 0; e < d; ++e) dot += q[e] * k[e];
          s.push_back(dot * scale);
          m = std::max(m, s.back());
        }
        double sum = 0;
        for (double v : s) sum += std::exp(v - m);
        const double l = m + std::log(sum);
        lse[row] = l;
        double factor = 1.0;
        if (c.sink) {
          const double sk = p.sink[h];
          factor = sk == INFINITY ? 0.0 : sk == -INFINITY ? 1.0 : 1.0 / (1.0 + std::exp(sk - l));
        }
        for (size_t j = 0; j < K.size(); ++j) {
          const double w = std::exp(s[j] - l) * factor;
          for (int64_t e = 0; e < kDv; ++e) out[row * kDv + e] += w * K[j][e];
        }
      }
    }
  }
}

void run_and_check(const Config& cfg) {
  SCOPED_TRACE(cfg.name());
  Problem p = build(cfg);
  const std::vector<uint16_t> out_before = p.out;
  const std::vector<float> lse_before = p.lse;
  dense_decode(p.args);
  std::vector<double> ref_out, ref_lse;
  reference(p, ref_out, ref_lse);

  const Config& c = p.cfg;
  std::vector<float> got_lse;
  for (int64_t i = 0; i < p.b; ++i)
    for (int64_t t = 0; t < c.s_q; ++t) {
      const int64_t tok = i * c.s_q + t;
      for (int64_t h = 0; h < c.h_q; ++h) {
        const uint16_t* o = &p.out[tok * p.out_token_stride() + h * p.out_head_stride()];
        std::vector<float> got(kDv);
        for (int e = 0; e < kDv; ++e) got[e] = c.q_dtype == DType::f16 ? fp16_bits_to_float(o[e]) : bf16_bits_to_float(o[e]);
        const int64_t row = tok * c.h_q + h;
        test::expect_out_close(got, std::vector<double>(ref_out.begin() + row * kDv, ref_out.begin() + (row + 1) * kDv),
                               "out of request " + std::to_string(i) + " token " + std::to_string(t) + " head " +
                                   std::to_string(h));
        got_lse.push_back(p.lse[tok * p.lse_token_stride() + h]);
      }
    }
  test::expect_lse_close(got_lse, ref_lse, "lse");
  // Padding between output rows is not the op's to write.
  for (size_t k = 0; k < p.out.size(); ++k) {
    const int64_t in_token = static_cast<int64_t>(k % p.out_token_stride());
    const bool padding = k / p.out_token_stride() >= static_cast<size_t>(p.b * c.s_q) ||
                         in_token >= c.h_q * p.out_head_stride() || in_token % p.out_head_stride() >= kDv;
    if (padding) {
      ASSERT_EQ(p.out[k], out_before[k]) << "out padding written at " << k;
    }
  }
  for (size_t k = 0; k < p.lse.size(); ++k) {
    const bool padding = k / p.lse_token_stride() >= static_cast<size_t>(p.b * c.s_q) ||
                         static_cast<int64_t>(k % p.lse_token_stride()) >= c.h_q;
    if (padding) {
      ASSERT_TRUE(std::isnan(p.lse[k])) << "lse padding written at " << k;
    }
  }
}

TEST(DenseDecode, Bf16PageSizes) {
  for (int ps : {1, 16, 64, 256}) {
    Config c;
    c.page_size = ps;
    c.max_blocks = std::max(2, 300 / ps);
    c.num_blocks = c.max_blocks + 2;
    const int32_t cap = c.max_blocks * ps;
    c.seqlens = {cap / 2 + 1, 0, cap, cap + 7, -3};
    c.cache_3d = ps == 64;
    run_and_check(c);
  }
}

TEST(DenseDecode, CausalSpeculativeTokens) {
  for (int s_q = 1; s_q <= 4; ++s_q) {
    Config c;
    c.d_qk = 512;
    c.page_size = 16;
    c.s_q = s_q;
    c.causal = true;
    c.max_blocks = 5;
    c.num_blocks = 7;
    c.seqlens = {70, s_q - 1, 1, 0, 80};  // short ones leave early tokens with no key
    run_and_check(c);
  }
}

TEST(DenseDecode, NonCausalSeveralTokens) {
  Config c;
  c.s_q = 3;
  c.page_size = 16;
  c.seqlens = {50, 2};
  run_and_check(c);
}

TEST(DenseDecode, GroupedKvHeads) {
  Config c;
  c.h_q = 8;
  c.h_kv = 2;
  c.page_size = 16;
  c.s_q = 2;
  c.causal = true;
  c.seqlens = {60, 17, 0};
  c.sink = true;
  run_and_check(c);
  c.h_kv = 4;
  c.format = CacheFormat::fp16;
  c.q_dtype = DType::f16;
  c.d_qk = 512;
  run_and_check(c);
}

TEST(DenseDecode, Fp16) {
  Config c;
  c.format = CacheFormat::fp16;
  c.q_dtype = DType::f16;
  c.h_q = 16;
  c.page_size = 64;
  c.s_q = 2;
  c.causal = true;
  c.max_blocks = 3;
  c.num_blocks = 4;
  c.seqlens = {130, 1, 1000, kI32Min};
  c.sink = true;
  run_and_check(c);
}

TEST(DenseDecode, Fp8CacheBf16Query) {
  Config c;
  c.format = CacheFormat::fp8_e4m3;
  c.k_scale = 0.0173f;
  c.page_size = 256;
  c.max_blocks = 2;
  c.num_blocks = 3;
  c.seqlens = {300, kI32Max, 5};
  run_and_check(c);
  c.d_qk = 512;
  c.page_size = 1;
  c.max_blocks = 40;
  c.num_blocks = 50;
  c.seqlens = {33, 40};
  c.causal = true;
  c.s_q = 2;
  run_and_check(c);
}

TEST(DenseDecode, Fp8CacheFp8Query) {
  Config c;
  c.format = CacheFormat::fp8_e4m3;
  c.q_dtype = DType::fp8_e4m3;
  c.k_scale = 0.0091f;
  c.q_scale = 0.021f;
  c.h_q = 8;
  c.h_kv = 2;
  c.page_size = 16;
  c.s_q = 4;
  c.causal = true;
  c.softmax_scale = 0.15f;
  c.sink = true;
  c.seqlens = {50, 3, 74};
  run_and_check(c);
  c.d_qk = 512;
  c.h_kv = 1;
  c.page_size = 64;
  c.s_q = 1;
  c.causal = false;
  c.seqlens = {100, 0};
  run_and_check(c);
}

TEST(DenseDecode, SinksAndExplicitScale) {
  Config c;
  c.sink = true;
  c.h_q = 16;
  c.softmax_scale = 0.3f;  // a sharp softmax
  c.seqlens = {40, 0, -1};  // empty rows stay zero with any sink, lse -inf
  run_and_check(c);
}

TEST(DenseDecode, EmptyBatch) {
  Config c;
  c.seqlens = {};
  run_and_check(c);
}

TEST(DenseDecode, EmptyBlockTable) {
  Config c;
  c.max_blocks = 0;  // every length clamps to 0
  c.seqlens = {5, 0};
  c.sink = true;
  run_and_check(c);
}

TEST(DenseDecode, WorkspaceSize) {
  Problem p = build([] { Config c; c.seqlens = {5}; return c; }());
  EXPECT_EQ(dense_decode_workspace_size(p.args), 0u);
}

// ------------------------------------------------------------------ validation

struct Rejects {
  Problem p;
  Rejects() : p(build([] {
    Config c;
    c.page_size = 4;
    c.max_blocks = 3;
    c.num_blocks = 4;
    c.seqlens = {5, 9};
    c.sink = true;
    return c;
  }())) {}
  explicit Rejects(const Config& c) : p(build(c)) {}
  DenseDecodeArgs& a() { return p.args; }
  void expect(const std::vector<std::string>& fragments) {
    const auto out = test::snapshot(p.out), lse = test::snapshot(p.lse);
    test::expect_error([&] { dense_decode(p.args); }, fragments);
    EXPECT_EQ(test::snapshot(p.out), out) << "a rejected call wrote to out";
    EXPECT_EQ(test::snapshot(p.lse), lse) << "a rejected call wrote to lse";
  }
};

Config fp8_config(DType q_dtype) {
  Config c;
  c.format = CacheFormat::fp8_e4m3;
  c.q_dtype = q_dtype;
  c.k_scale = 0.01f;
  c.q_scale = 0.02f;
  c.page_size = 4;
  c.max_blocks = 2;
  c.num_blocks = 3;
  c.seqlens = {5};
  return c;
}

TEST(DenseDecodeRejects, Q) {
  { Rejects r; r.a().q.data = nullptr; r.expect({"q", "nothing"}); }
  { Rejects r; r.a().q.dtype = DType::f32; r.expect({"q", "bfloat16, float16 or float8_e4m3fn", "float32 (2, 1, 8, 576)"}); }
  { Rejects r; r.a().q.ndim = 3; r.expect({"q", "(*, *, *, *)", "bfloat16 (2, 1, 8)"}); }
  { Rejects r; r.a().q.shape[3] = 512; r.expect({"q", "bfloat16 of shape (2, 1, 8, 576)", "bfloat16 (2, 1, 8, 512)"}); }
  { Rejects r; r.a().q.stride[3] = 2; r.expect({"q", "last dimension contiguous", "strides"}); }
  { Rejects r; r.a().q.stride[1] = -1; r.expect({"q", "non-negative strides", "strides"}); }
  { Rejects r; r.a().q.dtype = DType::f16; r.expect({"q", "bfloat16 for cache format bf16", "float16 (2, 1, 8, 576)"}); }
  { Rejects r; r.a().q.dtype = DType::fp8_e4m3; r.expect({"q", "bfloat16 for cache format bf16", "float8_e4m3fn"}); }
  {
    Config c = fp8_config(DType::bf16);
    c.format = CacheFormat::fp16;
    c.k_scale = 1.0f;
    Rejects r(c);
    r.expect({"q", "float16 for cache format fp16", "bfloat16 (1, 1, 8, 576)"});
  }
  { Rejects r(fp8_config(DType::bf16)); r.a().q.dtype = DType::f16;
    r.expect({"q", "bfloat16 or float8_e4m3fn for cache format fp8_e4m3", "float16"}); }
}

TEST(DenseDecodeRejects, QScale) {
  for (float bad : {0.0f, -1.0f, NAN, INFINITY}) {
    Rejects r(fp8_config(DType::fp8_e4m3));
    r.a().q_scale = bad;
    r.expect({"q_scale", "a positive finite float"});
  }
  // q_scale only matters for an fp8 q.
  Rejects r(fp8_config(DType::bf16));
  r.a().q_scale = NAN;
  dense_decode(r.a());
  EXPECT_FALSE(std::isnan(r.p.lse[0]));
}

TEST(DenseDecodeRejects, Cache) {
  { Rejects r; r.a().cache.format = CacheFormat::fp8_ds_mla; r.expect({"cache.format", "bf16, fp16 or fp8_e4m3", "fp8_ds_mla"}); }
  { Rejects r; r.a().cache.format = CacheFormat::fp8_model1; r.expect({"cache.format", "fp8_model1"}); }
  { Rejects r; r.a().cache.data.dtype = DType::f16; r.expect({"cache", "bfloat16 for format bf16", "float16 (4, 4, 1, 576)"}); }
  { Rejects r; r.a().cache.data.data = nullptr; r.expect({"cache", "nothing"}); }
  { Rejects r; r.a().cache.data.shape[3] = 448; r.expect({"cache", "d_qk = 576 or 512", "(4, 4, 1, 448)"}); }
  { Rejects r; r.a().cache.data.shape[1] = 0; r.expect({"cache", "page_size >= 1", "(4, 0, 1, 576)"}); }
  { Rejects r; r.a().cache.data.stride[0] = 2000; r.expect({"cache", "page stride of at least 2304", "2000"}); }
  { Rejects r; r.a().cache.data.stride[1] = 580; r.expect({"cache", "packed row-major", "strides"}); }
  { Rejects r; r.a().cache.data.ndim = 2; r.expect({"cache", "(num_blocks, page_size, [h_kv,] row)", "bfloat16 (4, 4)"}); }
  { Rejects r; r.a().cache.data.shape[0] = -1; r.expect({"cache", "num_blocks >= 0", "(-1, 4, 1, 576)"}); }
  { Rejects r; r.a().cache.data.ndim = 3; r.a().cache.data.shape[2] = 448; r.a().cache.data.stride[2] = 1;
    r.expect({"cache", "d_qk = 576 or 512", "bfloat16 (4, 4, 448)"}); }
  { Rejects r(fp8_config(DType::bf16)); r.a().cache.k_scale = 0.0f; r.expect({"cache.k_scale", "positive finite"}); }
  { Rejects r(fp8_config(DType::bf16)); r.a().cache.k_scale = NAN; r.expect({"cache.k_scale", "nan"}); }
}

TEST(DenseDecodeRejects, HeadGrouping) {
  Config c;
  c.h_q = 6;
  c.h_kv = 4;
  c.page_size = 4;
  c.max_blocks = 2;
  c.num_blocks = 3;
  c.seqlens = {3};
  Rejects r(c);
  r.expect({"h_q", "a multiple of h_kv = 4", "got 6"});
  Rejects r0;
  r0.a().cache.data.shape[2] = 0;
  r0.a().cache.data.stride[1] = 0;  // packed for zero heads
  r0.expect({"cache", "h_kv >= 1", "bfloat16 (4, 4, 0, 576)"});
}

TEST(DenseDecodeRejects, BlockTableAndSeqlens) {
  { Rejects r; r.a().block_table.dtype = DType::i64; r.expect({"block_table", "int32 of shape (2, *)", "int64 (2, 3)"}); }
  { Rejects r; r.a().block_table.shape[0] = 3; r.expect({"block_table", "(2, *)", "int32 (3, 3)"}); }
  { Rejects r; r.a().block_table.ndim = 1; r.expect({"block_table", "(2, *)", "int32 (2,)"}); }
  { Rejects r; r.a().block_table.stride[1] = 2; r.expect({"block_table", "contiguous", "strides (6, 2)"}); }
  { Rejects r; r.a().block_table.data = nullptr; r.expect({"block_table", "nothing"}); }
  { Rejects r; r.a().seqlens.dtype = DType::i64; r.expect({"seqlens", "int32 of shape (2,)", "int64 (2,)"}); }
  { Rejects r; r.a().seqlens.shape[0] = 1; r.expect({"seqlens", "(2,)", "int32 (1,)"}); }
  { Rejects r; r.a().seqlens.stride[0] = 2; r.expect({"seqlens", "contiguous", "strides (2,)"}); }
  { Rejects r; r.a().seqlens.data = nullptr; r.expect({"seqlens", "nothing"}); }
}

TEST(DenseDecodeRejects, SinkAndScale) {
  { Rejects r; r.a().attn_sink.dtype = DType::bf16; r.expect({"attn_sink must be float32 of shape (8,), got bfloat16 (8,)"}); }
  { Rejects r; r.a().attn_sink.shape[0] = 16; r.expect({"attn_sink", "(8,)", "float32 (16,)"}); }
  { Rejects r; r.a().attn_sink.stride[0] = 2; r.expect({"attn_sink", "contiguous", "strides (2,)"}); }
  for (float bad : {0.0f, -0.5f, NAN, INFINITY, -INFINITY}) {
    Rejects r;
    r.a().softmax_scale = bad;
    r.expect({"softmax_scale", "a positive finite float"});
  }
}

TEST(DenseDecodeRejects, Outputs) {
  { Rejects r; r.a().out.dtype = DType::f32; r.expect({"out", "bfloat16 of shape (2, 1, 8, 512)", "float32 (2, 1, 8, 512)"}); }
  { Rejects r; r.a().out.shape[3] = 576; r.expect({"out", "(2, 1, 8, 512)", "bfloat16 (2, 1, 8, 576)"}); }
  { Rejects r; r.a().out.shape[2] = 4; r.expect({"out", "(2, 1, 8, 512)", "(2, 1, 4, 512)"}); }
  { Rejects r; r.a().out.stride[3] = 2; r.expect({"out", "contiguous", "strides"}); }
  { Rejects r; r.a().out.data = nullptr; r.expect({"out", "nothing"}); }
  {
    Config c = fp8_config(DType::bf16);
    c.format = CacheFormat::fp16;
    c.q_dtype = DType::f16;
    c.k_scale = 1.0f;
    Rejects r(c);
    r.a().out.dtype = DType::bf16;  // fp16 q writes fp16 out
    r.expect({"out", "float16 of shape (1, 1, 8, 512)", "bfloat16 (1, 1, 8, 512)"});
  }
  { Rejects r; r.a().lse.dtype = DType::f64; r.expect({"lse", "float32 of shape (2, 1, 8)", "float64 (2, 1, 8)"}); }
  { Rejects r; r.a().lse.shape[1] = 2; r.expect({"lse", "(2, 1, 8)", "float32 (2, 2, 8)"}); }
  { Rejects r; r.a().lse.stride[2] = 2; r.expect({"lse", "contiguous", "strides"}); }
  { Rejects r; r.a().lse.data = nullptr; r.expect({"lse", "nothing"}); }
  { Rejects r; r.a().out.data = r.a().q.data; r.expect({"out", "distinct from q"}); }
  { Rejects r; r.a().out.data = r.a().cache.data.data; r.expect({"out", "distinct from cache"}); }
  { Rejects r; r.a().lse.data = r.a().out.data; r.a().lse.dtype = DType::f32; r.expect({"lse", "distinct from out"}); }
  // Every input counts: the block table, the lengths and the sink are read while the outputs are written.
  { Rejects r; r.a().lse.data = r.a().block_table.data; r.expect({"lse", "distinct from block_table"}); }
  { Rejects r; r.a().lse.data = r.a().seqlens.data; r.expect({"lse", "distinct from seqlens"}); }
  { Rejects r; r.a().lse.data = r.a().attn_sink.data; r.expect({"lse", "distinct from attn_sink"}); }
  { Rejects r; r.a().lse.data = r.a().q.data; r.expect({"lse", "distinct from q"}); }
  { Rejects r; r.a().out.stride[0] = 0; r.expect({"out", "elements do not overlap", "strides (0, "}); }
  { Rejects r; r.a().lse.stride[0] = 0; r.expect({"lse", "elements do not overlap"}); }
}

TEST(DenseDecodeRejects, Devices) {
  { Rejects r; r.a().cache.data.device = cuda_device(0); r.expect({"cache", "on cpu like q", "on cuda:0"}); }
  { Rejects r; r.a().block_table.device = cuda_device(0); r.expect({"block_table", "on cpu like q", "on cuda:0"}); }
  { Rejects r; r.a().seqlens.device = cuda_device(0); r.expect({"seqlens", "on cpu like q", "on cuda:0"}); }
  { Rejects r; r.a().attn_sink.device = cuda_device(0); r.expect({"attn_sink", "on cpu like q", "on cuda:0"}); }
  { Rejects r; r.a().out.device = cuda_device(0); r.expect({"out", "on cpu like q", "on cuda:0"}); }
  { Rejects r; r.a().lse.device = cuda_device(1); r.expect({"lse", "on cpu like q", "on cuda:1"}); }
  {
    Rejects r;
    r.a().q.device = cuda_device(0);
    r.expect({"cache", "on cuda:0 like q", "on cpu"});
  }
}

void all_on_cuda(DenseDecodeArgs& a) {
  for (TensorView* t : {&a.q, &a.cache.data, &a.block_table, &a.seqlens, &a.attn_sink, &a.out, &a.lse})
    t->device = cuda_device(0);
}

TEST(DenseDecodeRejects, MisalignedDeviceTensors) {
  Rejects r;
  all_on_cuda(r.a());
  r.a().out.data = reinterpret_cast<uint8_t*>(r.a().out.data) + 2;
  r.expect({"aligned to 16 bytes"});
  Rejects r2;
  all_on_cuda(r2.a());
  r2.a().q.stride[2] = 577;  // a head stride of 1154 bytes
  r2.expect({"q", "aligned to 16 bytes", "strides"});
}

#if !SMLA_WITH_CUDA
TEST(DenseDecodeRejects, CudaTensorsNeedACudaBuild) {
  // Shapes and strides that pass every check; nothing is dereferenced.
  Config c;
  c.page_size = 4;
  c.max_blocks = 2;
  c.num_blocks = 2;
  c.seqlens = {3};
  Problem p = build(c);
  alignas(16) static uint8_t q[1 * 8 * 576 * 2], cache[2 * 4 * 576 * 2], out[8 * 512 * 2];
  p.args.q = make_view(q, DType::bf16, {1, 1, 8, 576});
  p.args.cache.data = make_view(cache, DType::bf16, {2, 4, 1, 576});
  p.args.out = make_view(out, DType::bf16, {1, 1, 8, 512});
  p.args.lse = make_view(p.lse.data(), DType::f32, {1, 1, 8});
  all_on_cuda(p.args);
  EXPECT_THROW(dense_decode(p.args), RuntimeError);
  EXPECT_THROW(dense_decode_workspace_size(p.args), RuntimeError);
}
#endif

}  // namespace
}  // namespace smla
