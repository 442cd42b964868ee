// sparse_decode (SPEC §4.1) against a float64 computation written here from SPEC §2-§3:
// caches are built byte by byte from the §2 layouts, with garbage between pages, so the
// test depends on neither the library's writer nor its reader.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
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

// The SPEC §2 byte layouts, pinned here so a drift of the shared constants shows.
static_assert(DsMlaLayout::bytes_per_token == 656 && DsMlaLayout::scale_offset == 512 &&
              DsMlaLayout::rope_offset == 528 && DsMlaLayout::tile == 128);
static_assert(Model1Layout::data_bytes == 576 && Model1Layout::rope_offset == 448 &&
              Model1Layout::scale_bytes == 8 && Model1Layout::tile == 64 && Model1Layout::page_align == 576);

constexpr int32_t kIntMin = std::numeric_limits<int32_t>::min();
constexpr int32_t kIntMax = std::numeric_limits<int32_t>::max();
constexpr uint16_t kBf16Poison = 0x7fc0;
const double kInf = std::numeric_limits<double>::infinity();

using tu::Buffer;
using tu::expect_outside_untouched;
using tu::make_buffer;

std::vector<float> bf16_values(const Buffer<uint16_t>& b) { return tu::bf16_to_float(b.values()); }

// ------------------------------------------------------------------ caches (SPEC §2)

// A paged cache written byte by byte, with a garbage page before the first page, a gap
// of garbage after every page, and a garbage page after the last: a read of a skipped
// index or of a gap turns into NaN in the result.
struct TestCache {
  CacheFormat format = CacheFormat::bf16;
  int d_qk = 576;
  int page_size = 1;
  int64_t num_blocks = 0;
  bool four_d = false;
  int64_t page_stride_bytes = 0;
  std::vector<uint8_t> storage;
  std::vector<float> rows;  // [num_slots, d_qk]: what each slot holds, dequantized

  int64_t num_slots() const { return num_blocks * page_size; }
  const float* row(int64_t slot) const { return rows.data() + slot * d_qk; }

  PagedCache view() const {
    PagedCache c;
    c.format = format;
    TensorView& d = c.data;
    d.data = const_cast<uint8_t*>(storage.data()) + page_stride_bytes;
    const bool packed = format != CacheFormat::bf16;
    d.dtype = packed ? DType::u8 : DType::bf16;
    const int64_t es = packed ? 1 : 2;
    const int64_t row = format == CacheFormat::fp8_ds_mla   ? DsMlaLayout::bytes_per_token
                        : format == CacheFormat::fp8_model1 ? Model1Layout::bytes_per_token
                                                            : d_qk;
    if (four_d) {
      d.ndim = 4;
      d.shape = {num_blocks, page_size, 1, row};
      d.stride = {page_stride_bytes / es, row, row, 1};
    } else {
      d.ndim = 3;
      d.shape = {num_blocks, page_size, row};
      d.stride = {page_stride_bytes / es, row, 1};
    }
    return c;
  }
};

void store_bf16(uint8_t* p, float v, float* dequant) {
  const uint16_t bits = float_to_bf16_bits(v);
  std::memcpy(p, &bits, 2);
  *dequant = bf16_bits_to_float(bits);
}

// Random tile values, of a random magnitude so that the tile scales differ.
std::vector<float> random_tile(int n) {
  const float mag = tu::uniform(0.0f, 1.0f) < 0.1f ? 1e-5f : tu::uniform(0.05f, 3.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = tu::uniform(-1.0f, 1.0f) * mag;
  return x;
}

float amax_of(const std::vector<float>& x) {
  float a = 0;
  for (float v : x) a = std::max(a, std::fabs(v));
  return a;
}

void write_ds_mla_token(uint8_t* tok, int64_t slot, float* dst) {
  using L = DsMlaLayout;
  for (int k = 0; k < L::num_scales; ++k) {
    const std::vector<float> x = random_tile(L::tile);
    const float amax = amax_of(x);
    // vLLM's V3.2 writer stores amax / 448 unrounded; FlashMLA's rounds to a power of two.
    const float scale = (slot + k) % 3 == 0 ? std::max(amax, 1e-4f) / 448.0f
                                            : std::ldexp(1.0f, pow2_scale_exponent(amax));
    for (int i = 0; i < L::tile; ++i) {
      const uint8_t q = float_to_e4m3(x[i] / scale);
      tok[L::latent_offset + k * L::tile + i] = q;
      dst[k * L::tile + i] = e4m3_to_float(q) * scale;
    }
    std::memcpy(tok + L::scale_offset + 4 * k, &scale, 4);
  }
  for (int i = 0; i < kDRope; ++i) store_bf16(tok + L::rope_offset + 2 * i, tu::uniform(-1, 1), dst + L::d_latent + i);
}

void write_model1_token(uint8_t* page, int page_size, int64_t off, float* dst) {
  using L = Model1Layout;
  uint8_t* tok = page + off * L::data_bytes;
  uint8_t* scales = page + static_cast<int64_t>(page_size) * L::data_bytes + off * L::scale_bytes;
  for (int k = 0; k < L::num_scales; ++k) {
    const std::vector<float> x = random_tile(L::tile);
    const int e = pow2_scale_exponent(amax_of(x));
    const float scale = std::ldexp(1.0f, e);
    scales[k] = static_cast<uint8_t>(e + 127);
    for (int i = 0; i < L::tile; ++i) {
      const uint8_t q = float_to_e4m3(x[i] / scale);
      tok[k * L::tile + i] = q;
      dst[k * L::tile + i] = e4m3_to_float(q) * scale;
    }
  }
  scales[L::num_scales] = 0;
  for (int i = 0; i < kDRope; ++i) store_bf16(tok + L::rope_offset + 2 * i, tu::uniform(-1, 1), dst + L::d_latent + i);
}

TestCache make_cache(CacheFormat format, int d_qk, int page_size, int64_t num_blocks, bool four_d = false) {
  TestCache c;
  c.format = format;
  c.d_qk = format == CacheFormat::fp8_ds_mla ? 576 : format == CacheFormat::fp8_model1 ? 512 : d_qk;
  c.page_size = page_size;
  c.num_blocks = num_blocks;
  c.four_d = four_d;
  int64_t page_bytes = 0;
  switch (format) {
    case CacheFormat::fp8_ds_mla: page_bytes = int64_t{page_size} * 656; break;
    case CacheFormat::fp8_model1: page_bytes = (int64_t{page_size} * 584 + 575) / 576 * 576; break;
    default: page_bytes = int64_t{page_size} * c.d_qk * 2; break;
  }
  c.page_stride_bytes = page_bytes + 16 * tu::uniform_int(1, 4);
  // 0xff everywhere unwritten: NaN as e4m3, bf16, float32 scale and UE8M0 scale alike.
  c.storage.assign((num_blocks + 2) * c.page_stride_bytes, 0xff);
  c.rows.assign(c.num_slots() * c.d_qk, 0.0f);
  for (int64_t s = 0; s < c.num_slots(); ++s) {
    uint8_t* page = c.storage.data() + (1 + s / page_size) * c.page_stride_bytes;
    const int64_t off = s % page_size;
    float* dst = c.rows.data() + s * c.d_qk;
    switch (format) {
      case CacheFormat::fp8_ds_mla: write_ds_mla_token(page + off * 656, s, dst); break;
      case CacheFormat::fp8_model1: write_model1_token(page, page_size, off, dst); break;
      default:
        for (int i = 0; i < c.d_qk; ++i) store_bf16(page + (off * c.d_qk + i) * 2, tu::uniform(-1, 1), dst + i);
        break;
    }
  }
  return c;
}

// ------------------------------------------------------------------ indices and lengths

// Every kind of invalid index the SPEC names: padding, other negatives, past the cache.
std::vector<int32_t> invalid_values(int64_t num_slots) {
  return {-1, -2, kIntMin, static_cast<int32_t>(num_slots), static_cast<int32_t>(num_slots + 1), kIntMax,
          static_cast<int32_t>(-num_slots - 1), -1000000};
}

// Random rows of slots with invalid entries and duplicates mixed in; every row holds at
// least one invalid entry and, when long enough, one duplicate.
std::vector<int32_t> make_indices(int64_t rows, int topk, int64_t num_slots, float invalid_frac = 0.25f) {
  return tu::random_indices(rows, topk, num_slots, invalid_values(num_slots), 7, invalid_frac);
}

// topk_length values covering every clamp case: partial, past topk, zero, negative, exact.
std::vector<int32_t> make_lengths(int b, int topk) { return tu::make_topk_lengths(b, topk); }

// Per-head sinks: +inf, -inf, then finite values near typical lse magnitudes.
std::vector<float> make_sink(int h_q) { return tu::make_sink(h_q, 6.0f); }

// ------------------------------------------------------------------ float64 reference

struct KeySet {
  const TestCache* cache = nullptr;
  std::vector<int32_t> idx;  // [b, s_q, topk]
  int topk = 0;
  std::vector<int32_t> len;  // [b]; empty = absent
};

void add_valid_keys(const KeySet& ks, int s_q, int64_t i, int64_t t, std::vector<const float*>& keys) {
  if (!ks.cache) return;
  int64_t n = ks.topk;
  if (!ks.len.empty()) n = std::min<int64_t>(std::max<int64_t>(ks.len[i], 0), ks.topk);
  const int32_t* row = ks.idx.data() + (i * s_q + t) * ks.topk;
  for (int64_t j = 0; j < n; ++j)
    if (row[j] >= 0 && row[j] < ks.cache->num_slots()) keys.push_back(ks.cache->row(row[j]));
}

// SPEC §3 for one query row, written out plainly.
void attend(const float* q, const std::vector<const float*>& keys, int d_qk, double scale, const float* sink,
            double* out, double* lse) {
  std::fill(out, out + kDv, 0.0);
  if (keys.empty()) {
    *lse = -kInf;
    return;
  }
  std::vector<double> s(keys.size());
  double m = -kInf;
  for (size_t j = 0; j < keys.size(); ++j) {
    double dot = 0;
    for (int k = 0; k < d_qk; ++k) dot += double(q[k]) * keys[j][k];
    s[j] = scale * dot;
    m = std::max(m, s[j]);
  }
  double sum = 0;
  for (double v : s) sum += std::exp(v - m);
  *lse = m + std::log(sum);
  const double factor = sink ? tu::sink_factor(*sink, *lse) : 1.0;
  for (size_t j = 0; j < keys.size(); ++j) {
    const double p = std::exp(s[j] - *lse) * factor;
    for (int k = 0; k < kDv; ++k) out[k] += p * keys[j][k];
  }
}

// ------------------------------------------------------------------ one call, checked

struct Problem {
  int b = 1, s_q = 1, h_q = 16;
  KeySet main, extra;
  std::vector<float> sink;  // empty = absent
  std::optional<float> scale;
  bool strided = false;  // non-contiguous q, indices, lengths, out and lse
};

struct Outcome {
  std::vector<float> out, lse;
  std::vector<double> ref_out, ref_lse;
};

Buffer<uint16_t> make_q(int b, int s_q, int h_q, int d_qk, bool strided) {
  // Strided: s_q outermost and padded rows, so no two dims are packed with each other.
  const int64_t row = d_qk + 48;
  auto q = strided ? make_buffer<uint16_t>(DType::bf16, {b, s_q, h_q, d_qk},
                                           {h_q * row, int64_t{b} * h_q * row, row, 1}, kBf16Poison)
                   : make_buffer<uint16_t>(DType::bf16, {b, s_q, h_q, d_qk}, {}, kBf16Poison);
  for (int64_t o : q.offsets()) q.data[o] = float_to_bf16_bits(tu::uniform(-1.0f, 1.0f));
  return q;
}

// The gaps of strided index rows hold slot 0, a valid key: reading past topk would show.
Buffer<int32_t> index_buffer(const KeySet& ks, int b, int s_q, bool strided) {
  auto buf = strided ? make_buffer<int32_t>(DType::i32, {b, s_q, ks.topk},
                                            {int64_t{s_q} * (ks.topk + 3), ks.topk + 3, 1}, 0)
                     : make_buffer<int32_t>(DType::i32, {b, s_q, ks.topk}, {}, 0);
  const auto offs = buf.offsets();
  for (size_t k = 0; k < offs.size(); ++k) buf.data[offs[k]] = ks.idx[k];
  return buf;
}

Buffer<int32_t> length_buffer(const std::vector<int32_t>& len, bool strided) {
  const int64_t b = static_cast<int64_t>(len.size());
  auto buf = make_buffer<int32_t>(DType::i32, {b}, {strided ? 2 : 1}, 0);
  const auto offs = buf.offsets();
  for (size_t k = 0; k < offs.size(); ++k) buf.data[offs[k]] = len[k];
  return buf;
}

Buffer<uint16_t> make_out(int b, int s_q, int h_q, bool strided) {
  return strided ? make_buffer<uint16_t>(DType::bf16, {b, s_q, h_q, kDv},
                                         {int64_t{s_q} * h_q * (kDv + 16), int64_t{h_q} * (kDv + 16), kDv + 16, 1},
                                         kBf16Poison)
                 : make_buffer<uint16_t>(DType::bf16, {b, s_q, h_q, kDv}, {}, kBf16Poison);
}

Buffer<float> make_lse(int b, int s_q, int h_q, bool strided) {
  return strided ? make_buffer<float>(DType::f32, {b, s_q, h_q}, {1, b, int64_t{b} * s_q}, NAN)
                 : make_buffer<float>(DType::f32, {b, s_q, h_q}, {}, NAN);
}

Outcome reference(const Problem& p, const std::vector<float>& q) {
  const int d_qk = p.main.cache->d_qk;
  const double scale = p.scale ? double(*p.scale) : 1.0 / std::sqrt(double(d_qk));
  Outcome r;
  r.ref_out.resize(int64_t{p.b} * p.s_q * p.h_q * kDv);
  r.ref_lse.resize(int64_t{p.b} * p.s_q * p.h_q);
  for (int64_t i = 0; i < p.b; ++i)
    for (int64_t t = 0; t < p.s_q; ++t) {
      std::vector<const float*> keys;
      add_valid_keys(p.main, p.s_q, i, t, keys);
      add_valid_keys(p.extra, p.s_q, i, t, keys);
      for (int64_t h = 0; h < p.h_q; ++h) {
        const int64_t row = (i * p.s_q + t) * p.h_q + h;
        attend(q.data() + row * d_qk, keys, d_qk, scale, p.sink.empty() ? nullptr : &p.sink[h],
               r.ref_out.data() + row * kDv, &r.ref_lse[row]);
      }
    }
  return r;
}

Outcome run(const Problem& p) {
  const int d_qk = p.main.cache->d_qk;
  auto q = make_q(p.b, p.s_q, p.h_q, d_qk, p.strided);
  auto idx = index_buffer(p.main, p.b, p.s_q, p.strided);
  auto out = make_out(p.b, p.s_q, p.h_q, p.strided);
  auto lse = make_lse(p.b, p.s_q, p.h_q, p.strided);
  Buffer<int32_t> len, xidx, xlen;
  Buffer<float> sink;

  SparseDecodeArgs a;
  a.q = q.view();
  a.cache = p.main.cache->view();
  a.indices = idx.view();
  if (!p.main.len.empty()) {
    len = length_buffer(p.main.len, p.strided);
    a.topk_length = len.view();
  }
  if (p.extra.cache) {
    a.extra_cache = p.extra.cache->view();
    xidx = index_buffer(p.extra, p.b, p.s_q, p.strided);
    a.extra_indices = xidx.view();
    if (!p.extra.len.empty()) {
      xlen = length_buffer(p.extra.len, p.strided);
      a.extra_topk_length = xlen.view();
    }
  }
  if (!p.sink.empty()) {
    sink = make_buffer<float>(DType::f32, {p.h_q}, {}, 0.0f);
    sink.data = p.sink;
    a.attn_sink = sink.view();
  }
  a.softmax_scale = p.scale;
  a.out = out.view();
  a.lse = lse.view();
  sparse_decode(a);

  Outcome r = reference(p, bf16_values(q));
  r.out = bf16_values(out);
  r.lse = lse.values();
  expect_outside_untouched(out, kBf16Poison, "out");
  return r;
}

// SPEC §6, plus: an empty key set gives exactly 0 and -inf, whatever the sink.
void check(const Outcome& r, const std::string& what) {
  tu::expect_out_close(r.out, r.ref_out, what + " out");
  tu::expect_lse_close(r.lse, r.ref_lse, what + " lse");
  tu::expect_empty_rows_zero(r.out, r.ref_lse, kDv, what + ": rows with no valid key must be exactly zero");
}

size_t count_empty_rows(const Outcome& r) {
  return std::count(r.ref_lse.begin(), r.ref_lse.end(), -kInf);
}

// ------------------------------------------------------------------ sparse_prefill from a paged cache
// SPEC §4.2 "from the paged cache": the decode problem's b requests are the s_q query tokens of
// one prefill call (its own s_q must be 1), read from this file's byte-written caches.

// The view without its dimension 1 (of size 1): [b, 1, ...] -> [b, ...].
TensorView drop_dim1(TensorView v) {
  for (int d = 1; d + 1 < v.ndim; ++d) {
    v.shape[d] = v.shape[d + 1];
    v.stride[d] = v.stride[d + 1];
  }
  --v.ndim;
  return v;
}

struct PrefillOutcome {
  Outcome o;
  std::vector<float> max_logits;
  std::vector<double> ref_max_logits;
};

PrefillOutcome run_prefill(const Problem& p) {
  EXPECT_EQ(p.s_q, 1);
  EXPECT_EQ(p.extra.cache, nullptr);
  const int d_qk = p.main.cache->d_qk;
  auto q = make_q(p.b, 1, p.h_q, d_qk, p.strided);
  auto idx = index_buffer(p.main, p.b, 1, p.strided);
  auto out = make_out(p.b, 1, p.h_q, p.strided);
  auto lse = make_lse(p.b, 1, p.h_q, p.strided);
  auto max_logits = make_lse(p.b, 1, p.h_q, p.strided);
  Buffer<int32_t> len;
  Buffer<float> sink;

  SparsePrefillArgs a;
  a.q = drop_dim1(q.view());
  a.cache = p.main.cache->view();
  a.indices = idx.view();  // [s_q, 1, topk], as engines hand over one KV head
  if (!p.main.len.empty()) {
    len = length_buffer(p.main.len, p.strided);
    a.topk_length = len.view();
  }
  if (!p.sink.empty()) {
    sink = make_buffer<float>(DType::f32, {p.h_q}, {}, 0.0f);
    sink.data = p.sink;
    a.attn_sink = sink.view();
  }
  a.softmax_scale = p.scale;
  a.out = drop_dim1(out.view());
  a.lse = drop_dim1(lse.view());
  a.max_logits = drop_dim1(max_logits.view());
  EXPECT_EQ(sparse_prefill_workspace_size(a), 0u);
  sparse_prefill(a);

  PrefillOutcome r;
  const std::vector<float> qv = bf16_values(q);
  r.o = reference(p, qv);
  r.o.out = bf16_values(out);
  r.o.lse = lse.values();
  r.max_logits = max_logits.values();
  // Each (token, head)'s largest scaled logit over its valid keys (-inf: none).
  const double scale = p.scale ? double(*p.scale) : 1.0 / std::sqrt(double(d_qk));
  for (int64_t i = 0; i < p.b; ++i) {
    std::vector<const float*> keys;
    add_valid_keys(p.main, 1, i, 0, keys);
    for (int64_t h = 0; h < p.h_q; ++h) {
      double m = -kInf;
      const float* qr = qv.data() + (i * p.h_q + h) * d_qk;
      for (const float* k : keys) {
        double dot = 0;
        for (int c = 0; c < d_qk; ++c) dot += double(qr[c]) * k[c];
        m = std::max(m, scale * dot);
      }
      r.ref_max_logits.push_back(m);
    }
  }
  expect_outside_untouched(out, kBf16Poison, "out");
  return r;
}

// Every packed format and a bf16 cache, hostile and duplicate slots, lengths, sink, strided
// views, page sizes that are not the decode kernels' 64.
TEST(SparsePrefillPaged, MatchesReferenceInEveryFormat) {
  struct Case {
    CacheFormat format;
    int d_qk, page_size, blocks, h_q;
  };
  for (const Case& c : {Case{CacheFormat::fp8_ds_mla, 576, 64, 3, 16}, Case{CacheFormat::fp8_ds_mla, 576, 16, 9, 128},
                        Case{CacheFormat::fp8_model1, 512, 64, 3, 20}, Case{CacheFormat::fp8_model1, 512, 48, 4, 64},
                        Case{CacheFormat::bf16, 576, 1, 150, 8}, Case{CacheFormat::bf16, 512, 16, 8, 32}}) {
    for (bool strided : {false, true}) {
      SCOPED_TRACE(std::string(format_name(c.format)) + " page " + std::to_string(c.page_size) + " h_q " +
                   std::to_string(c.h_q) + (strided ? " strided" : ""));
      const TestCache cache = make_cache(c.format, c.d_qk, c.page_size, c.blocks);
      Problem p;
      p.b = 5;
      p.h_q = c.h_q;
      p.main.cache = &cache;
      p.main.topk = 40;
      p.main.idx = make_indices(int64_t{p.b} * p.main.topk, p.main.topk, cache.num_slots());
      p.main.len = make_lengths(p.b, p.main.topk);
      p.sink = make_sink(p.h_q);
      p.strided = strided;
      if (strided) p.scale = 0.07f;
      const PrefillOutcome r = run_prefill(p);
      check(r.o, "paged prefill");
      tu::expect_lse_close(r.max_logits, r.ref_max_logits, "paged prefill max_logits");
    }
  }
}

// A token with no valid slot: zeros, lse -inf, max_logits -inf.
TEST(SparsePrefillPaged, TokensWithoutKeys) {
  const TestCache cache = make_cache(CacheFormat::fp8_ds_mla, 576, 64, 2);
  Problem p;
  p.b = 3;
  p.main.cache = &cache;
  p.main.topk = 8;
  p.main.idx.assign(int64_t{p.b} * p.main.topk, -1);
  p.main.idx[2 * p.main.topk] = 5;  // token 2: one key, token 1: only past its length
  p.main.idx[1 * p.main.topk + 3] = 7;
  p.main.len = {8, 2, 8};
  const PrefillOutcome r = run_prefill(p);
  check(r.o, "paged prefill, empty tokens");
  EXPECT_EQ(count_empty_rows(r.o), 2u * p.h_q);
  for (int64_t k = 0; k < 2 * p.h_q; ++k) EXPECT_EQ(r.max_logits[k], -std::numeric_limits<float>::infinity());
  tu::expect_lse_close(r.max_logits, r.ref_max_logits, "max_logits");
}

// ------------------------------------------------------------------ tests

TEST(SparseDecode, V32Fp8DsMlaHeads16) {
  const TestCache cache = make_cache(CacheFormat::fp8_ds_mla, 576, 64, 4);
  Problem p;
  p.b = 3, p.s_q = 2, p.h_q = 16;
  p.main = {&cache, make_indices(p.b * p.s_q, 64, cache.num_slots()), 64, make_lengths(p.b, 64)};
  p.sink = make_sink(p.h_q);
  p.strided = true;
  check(run(p), "fp8_ds_mla h_q 16");
}

TEST(SparseDecode, V32Fp8DsMlaHeads128) {
  const TestCache cache = make_cache(CacheFormat::fp8_ds_mla, 576, 64, 3);
  // b = 1 is the latency case: one row, its heads spread over the cores.
  for (int b : {1, 2}) {
    Problem p;
    p.b = b, p.s_q = 1, p.h_q = 128;
    p.main = {&cache, make_indices(p.b * p.s_q, 40, cache.num_slots()), 40, {}};
    check(run(p), "fp8_ds_mla h_q 128 b " + std::to_string(b));
    p.sink = make_sink(p.h_q);
    check(run(p), "fp8_ds_mla h_q 128 with sink b " + std::to_string(b));
  }
}

TEST(SparseDecode, PageSizesWithGappedPages) {
  for (CacheFormat f : {CacheFormat::fp8_ds_mla, CacheFormat::fp8_model1, CacheFormat::bf16}) {
    for (int ps : {1, 16, 64, 256}) {
      const TestCache cache = make_cache(f, 576, ps, std::max(2, 320 / ps));
      Problem p;
      p.b = 2, p.s_q = 2, p.h_q = 8;
      p.main = {&cache, make_indices(p.b * p.s_q, 48, cache.num_slots()), 48, {}};
      check(run(p), std::string(format_name(f)) + " page " + std::to_string(ps));
    }
  }
}

TEST(SparseDecode, Bf16CacheAt576And512) {
  for (int d_qk : {576, 512}) {
    for (bool four_d : {false, true}) {
      const TestCache cache = make_cache(CacheFormat::bf16, d_qk, 16, 6, four_d);
      Problem p;
      p.b = 2, p.s_q = four_d ? 3 : 1, p.h_q = 16;
      p.main = {&cache, make_indices(p.b * p.s_q, 32, cache.num_slots()), 32, make_lengths(p.b, 32)};
      p.sink = make_sink(p.h_q);
      p.strided = four_d;
      check(run(p), "bf16 d_qk " + std::to_string(d_qk) + (four_d ? " 4-D" : " 3-D"));
    }
  }
}

// V4: a sliding window from a page-256 fp8_model1 cache joined with a compressed cache
// of another page size in one softmax.
std::vector<int32_t> window_indices(int rows, int topk, int64_t num_slots) {
  std::vector<int32_t> idx(rows * topk, -1);
  for (int r = 0; r < rows; ++r) {
    const int64_t end = tu::uniform_int(0, num_slots - 1);
    const int64_t w = tu::uniform_int(1, topk);
    for (int64_t j = 0; j < w; ++j) idx[r * topk + j] = static_cast<int32_t>(std::max<int64_t>(end - j, -1));
  }
  return idx;
}

TEST(SparseDecode, V4Model1WithExtraBf16Cache) {
  const TestCache swa = make_cache(CacheFormat::fp8_model1, 512, 256, 2);
  const TestCache compressed = make_cache(CacheFormat::bf16, 512, 64, 5);
  Problem p;
  p.b = 2, p.s_q = 2, p.h_q = 64;
  p.main = {&swa, window_indices(p.b * p.s_q, 32, swa.num_slots()), 32, make_lengths(p.b, 32)};
  p.extra = {&compressed, make_indices(p.b * p.s_q, 48, compressed.num_slots()), 48, {}};
  p.sink = make_sink(p.h_q);
  check(run(p), "fp8_model1 + bf16 extra");
}

TEST(SparseDecode, V4Model1WithExtraModel1Cache) {
  const TestCache swa = make_cache(CacheFormat::fp8_model1, 512, 256, 2);
  const TestCache compressed = make_cache(CacheFormat::fp8_model1, 512, 64, 4);
  Problem p;
  p.b = 8, p.s_q = 1, p.h_q = 8;
  p.main = {&swa, window_indices(p.b * p.s_q, 16, swa.num_slots()), 16, {}};
  p.extra = {&compressed, make_indices(p.b * p.s_q, 40, compressed.num_slots()), 40, make_lengths(p.b, 40)};
  // Rotate so that each request meets a different pair of main and extra lengths.
  std::rotate(p.extra.len.begin(), p.extra.len.begin() + 3, p.extra.len.end());
  p.main.len = make_lengths(p.b, 16);
  p.sink = make_sink(p.h_q);
  p.strided = true;
  const Outcome r = run(p);
  check(r, "fp8_model1 + fp8_model1 extra");
  EXPECT_GT(count_empty_rows(r), 0u);
}

TEST(SparseDecode, EmptyKeySetsGiveZeroAndMinusInf) {
  const TestCache cache = make_cache(CacheFormat::fp8_ds_mla, 576, 16, 2);
  const std::vector<int32_t> bad = invalid_values(cache.num_slots());
  Problem p;
  p.b = 4, p.s_q = 2, p.h_q = 4;
  const int topk = static_cast<int>(bad.size());
  // Request 0: every kind of invalid index; 1: all -1; 2: valid keys but topk_length 0;
  // 3: valid keys but a negative topk_length.
  std::vector<int32_t> idx;
  for (int t = 0; t < p.s_q; ++t) idx.insert(idx.end(), bad.begin(), bad.end());
  idx.insert(idx.end(), topk * p.s_q, -1);
  for (int r = 0; r < 2 * p.s_q * topk; ++r) idx.push_back(static_cast<int32_t>(r % cache.num_slots()));
  p.main = {&cache, idx, topk, {topk, topk, 0, -7}};
  p.sink = {INFINITY, -INFINITY, 0.5f, -3.0f};
  const Outcome r = run(p);
  check(r, "empty key sets");
  EXPECT_EQ(count_empty_rows(r), r.ref_lse.size());
}

TEST(SparseDecode, EmptyCacheSkipsEveryIndex) {
  const TestCache cache = make_cache(CacheFormat::bf16, 512, 64, 0);
  Problem p;
  p.b = 2, p.s_q = 1, p.h_q = 4;
  p.main = {&cache, {0, 1, 63, -1, 0, 0, 5, 64}, 4, {}};
  p.sink = {INFINITY, -INFINITY, 0.0f, 2.0f};
  const Outcome r = run(p);
  check(r, "num_blocks 0");
  EXPECT_EQ(count_empty_rows(r), r.ref_lse.size());
}

TEST(SparseDecode, InvalidIndicesAreSkippedOneKindAtATime) {
  const TestCache cache = make_cache(CacheFormat::fp8_model1, 512, 16, 3);
  const std::vector<int32_t> bad = invalid_values(cache.num_slots());
  Problem p;
  p.b = static_cast<int>(bad.size()), p.s_q = 1, p.h_q = 8;
  // Each request: two valid keys with one kind of invalid entry around them.
  std::vector<int32_t> idx;
  for (int32_t v : bad) {
    const auto k0 = static_cast<int32_t>(tu::uniform_int(0, cache.num_slots() - 1));
    const auto k1 = static_cast<int32_t>(tu::uniform_int(0, cache.num_slots() - 1));
    idx.insert(idx.end(), {v, k0, v, v, k1, v});
  }
  p.main = {&cache, idx, 6, {}};
  check(run(p), "invalid kinds");
}

TEST(SparseDecode, DuplicateKeysCountTwice) {
  const TestCache cache = make_cache(CacheFormat::fp8_ds_mla, 576, 16, 2);
  Problem p;
  p.b = 3, p.s_q = 1, p.h_q = 4;
  const auto k = static_cast<int32_t>(tu::uniform_int(0, cache.num_slots() - 1));
  const auto m = static_cast<int32_t>((k + 1) % cache.num_slots());
  // One key listed once, twice, and next to another key listed three times.
  p.main = {&cache, {k, -1, -1, -1, k, k, -1, -1, k, m, m, m}, 4, {}};
  const Outcome r = run(p);
  check(r, "duplicates");
  // A single distinct key, listed once or twice, gives its value row whatever the weights;
  // the lse of the twice-listed key carries the extra ln 2 (checked against the reference).
  for (int i = 0; i < 2; ++i)
    for (int h = 0; h < p.h_q; ++h)
      for (int c = 0; c < kDv; ++c)
        ASSERT_EQ(r.out[(i * p.h_q + h) * kDv + c], round_to_bf16(cache.row(k)[c])) << "request " << i;
}

TEST(SparseDecode, TopkLengthIsClampedPerRequest) {
  const TestCache cache = make_cache(CacheFormat::bf16, 576, 16, 4);
  Problem p;
  p.b = 8, p.s_q = 2, p.h_q = 4;
  // Only valid keys, so every clamp case changes the result.
  p.main = {&cache, make_indices(p.b * p.s_q, 24, cache.num_slots(), 0.0f), 24, make_lengths(p.b, 24)};
  for (auto& v : p.main.idx) v = std::max(v, 0);
  for (auto& v : p.main.idx) v = v >= cache.num_slots() ? 0 : v;
  const Outcome r = run(p);
  check(r, "topk_length cases");
  EXPECT_EQ(count_empty_rows(r), size_t(3 * p.s_q * p.h_q));  // lengths 0, -3 and INT32_MIN
}

TEST(SparseDecode, SinkScalesOutAndLeavesLse) {
  const TestCache cache = make_cache(CacheFormat::fp8_ds_mla, 576, 64, 2);
  Problem p;
  p.b = 2, p.s_q = 2, p.h_q = 8;
  p.main = {&cache, make_indices(p.b * p.s_q, 32, cache.num_slots()), 32, {}};
  p.sink = make_sink(p.h_q);
  const Outcome with = run(p);
  check(with, "sink");
  for (size_t row = 0; row < with.ref_lse.size(); ++row) {
    const int h = static_cast<int>(row % p.h_q);
    if (h != 0 || with.ref_lse[row] == -kInf) continue;
    for (int k = 0; k < kDv; ++k) ASSERT_EQ(with.out[row * kDv + k], 0.0f) << "a +inf sink gives out = 0";
    EXPECT_TRUE(std::isfinite(with.lse[row])) << "the lse excludes the sink";
  }
}

TEST(SparseDecode, SoftmaxScaleOverridesDefault) {
  const TestCache cache = make_cache(CacheFormat::fp8_model1, 512, 64, 2);
  Problem p;
  p.b = 2, p.s_q = 1, p.h_q = 8;
  p.main = {&cache, make_indices(p.b * p.s_q, 32, cache.num_slots()), 32, {}};
  p.scale = tu::uniform(0.01f, 0.2f);
  check(run(p), "softmax_scale");
}

TEST(SparseDecode, EmptyBatchDoesNothing) {
  const TestCache cache = make_cache(CacheFormat::fp8_ds_mla, 576, 16, 1);
  uint16_t q = 0, out = kBf16Poison;
  int32_t idx = 0;
  float lse = NAN;
  SparseDecodeArgs a;
  a.q = make_view(&q, DType::bf16, {0, 1, 16, 576});
  a.cache = cache.view();
  a.indices = make_view(&idx, DType::i32, {0, 1, 8});
  a.out = make_view(&out, DType::bf16, {0, 1, 16, 512});
  a.lse = make_view(&lse, DType::f32, {0, 1, 16});
  sparse_decode(a);
  EXPECT_EQ(out, kBf16Poison);
  EXPECT_TRUE(std::isnan(lse));
  EXPECT_EQ(sparse_decode_workspace_size(a), 0u);
}

// ------------------------------------------------------------------ splits + merge_states

// Runs sparse_decode of one key set into part `part` of [2, b*s_q, h_q, ...] buffers.
void decode_into(const TensorView& q, const KeySet& ks, int b, int s_q, int h_q, Buffer<uint16_t>& out_parts,
                 Buffer<float>& lse_parts, int part) {
  auto idx = index_buffer(ks, b, s_q, false);
  Buffer<int32_t> len;
  SparseDecodeArgs a;
  a.q = q;
  a.cache = ks.cache->view();
  a.indices = idx.view();
  if (!ks.len.empty()) {
    len = length_buffer(ks.len, false);
    a.topk_length = len.view();
  }
  const int64_t rows = int64_t{b} * s_q * h_q;
  a.out = make_view(out_parts.data.data() + part * rows * kDv, DType::bf16, {b, s_q, h_q, kDv});
  a.lse = make_view(lse_parts.data.data() + part * rows, DType::f32, {b, s_q, h_q});
  sparse_decode(a);
}

// Splits, merged with the sink applied once, against the unsplit call and the reference.
void check_split_merge(const Problem& whole, const KeySet& part0, const KeySet& part1, const std::string& what) {
  const int b = whole.b, s_q = whole.s_q, h_q = whole.h_q;
  const int64_t T = int64_t{b} * s_q;
  auto q = make_q(b, s_q, h_q, whole.main.cache->d_qk, false);
  auto out_parts = make_buffer<uint16_t>(DType::bf16, {2, T, h_q, kDv}, {}, kBf16Poison);
  auto lse_parts = make_buffer<float>(DType::f32, {2, T, h_q}, {}, NAN);
  decode_into(q.view(), part0, b, s_q, h_q, out_parts, lse_parts, 0);
  decode_into(q.view(), part1, b, s_q, h_q, out_parts, lse_parts, 1);

  auto sink = make_buffer<float>(DType::f32, {h_q}, {}, 0.0f);
  sink.data = whole.sink;
  auto merged = make_buffer<uint16_t>(DType::bf16, {T, h_q, kDv}, {}, kBf16Poison);
  auto merged_lse = make_buffer<float>(DType::f32, {T, h_q}, {}, NAN);
  MergeStatesArgs m;
  m.out_parts = out_parts.view();
  m.lse_parts = lse_parts.view();
  m.attn_sink = sink.view();
  m.out = merged.view();
  m.lse = merged_lse.view();
  merge_states(m);

  // The unsplit call, on the same q.
  auto idx = index_buffer(whole.main, b, s_q, false);
  auto xidx = whole.extra.cache ? index_buffer(whole.extra, b, s_q, false) : Buffer<int32_t>{};
  Buffer<int32_t> len, xlen;
  auto out = make_out(b, s_q, h_q, false);
  auto lse = make_lse(b, s_q, h_q, false);
  SparseDecodeArgs a;
  a.q = q.view();
  a.cache = whole.main.cache->view();
  a.indices = idx.view();
  if (!whole.main.len.empty()) {
    len = length_buffer(whole.main.len, false);
    a.topk_length = len.view();
  }
  if (whole.extra.cache) {
    a.extra_cache = whole.extra.cache->view();
    a.extra_indices = xidx.view();
    if (!whole.extra.len.empty()) {
      xlen = length_buffer(whole.extra.len, false);
      a.extra_topk_length = xlen.view();
    }
  }
  a.attn_sink = sink.view();
  a.out = out.view();
  a.lse = lse.view();
  sparse_decode(a);

  Outcome ref = reference(whole, bf16_values(q));
  ref.out = bf16_values(merged);
  ref.lse = merged_lse.values();
  check(ref, what + ": merged splits vs reference");
  const std::vector<float> unsplit = bf16_values(out);
  tu::expect_out_close(ref.out, std::vector<double>(unsplit.begin(), unsplit.end()), what + ": merged vs unsplit");
  const std::vector<float> unsplit_lse = lse.values();
  tu::expect_lse_close(ref.lse, std::vector<double>(unsplit_lse.begin(), unsplit_lse.end()),
                       what + ": merged lse vs unsplit");
}

TEST(SparseDecode, MergeOfTopkSplitsEqualsUnsplit) {
  const TestCache cache = make_cache(CacheFormat::fp8_ds_mla, 576, 64, 3);
  Problem whole;
  whole.b = 3, whole.s_q = 2, whole.h_q = 16;
  const int topk = 40;
  whole.main = {&cache, make_indices(whole.b * whole.s_q, topk, cache.num_slots()), topk, make_lengths(whole.b, topk)};
  whole.sink = make_sink(whole.h_q);
  // Disjoint parts of each list: entry j goes to part (j / 7) % 2, the other part holds -1.
  KeySet parts[2] = {whole.main, whole.main};
  for (size_t k = 0; k < whole.main.idx.size(); ++k) {
    const int j = static_cast<int>(k % topk);
    parts[(j / 7) % 2 == 0 ? 1 : 0].idx[k] = -1;
  }
  check_split_merge(whole, parts[0], parts[1], "topk split");
}

TEST(SparseDecode, MergeOfMainAndExtraEqualsJointCall) {
  const TestCache swa = make_cache(CacheFormat::fp8_model1, 512, 256, 1);
  const TestCache compressed = make_cache(CacheFormat::fp8_model1, 512, 64, 3);
  Problem whole;
  whole.b = 4, whole.s_q = 2, whole.h_q = 8;
  whole.main = {&swa, window_indices(whole.b * whole.s_q, 24, swa.num_slots()), 24, make_lengths(whole.b, 24)};
  whole.extra = {&compressed, make_indices(whole.b * whole.s_q, 32, compressed.num_slots()), 32, {}};
  std::vector<int32_t> xlen = make_lengths(whole.b + 2, 32);
  whole.extra.len.assign(xlen.begin() + 2, xlen.end());
  whole.sink = make_sink(whole.h_q);
  check_split_merge(whole, whole.main, whole.extra, "main + extra split");
}

// ------------------------------------------------------------------ validation

class SparseDecodeValidation : public ::testing::Test {
 protected:
  static constexpr int b = 2, s_q = 1, h_q = 16, topk = 8;
  TestCache cache = make_cache(CacheFormat::fp8_ds_mla, 576, 16, 2);
  TestCache model1 = make_cache(CacheFormat::fp8_model1, 512, 16, 2);
  std::vector<uint16_t> q = tu::random_bf16(b * s_q * h_q * 576);
  std::vector<int32_t> idx = make_indices(b * s_q, topk, 32);
  std::vector<int32_t> len = {3, 8};
  std::vector<float> sink = tu::random_f32(h_q, -1, 1);
  std::vector<uint16_t> out = std::vector<uint16_t>(b * s_q * h_q * kDv, kBf16Poison);
  std::vector<float> lse = std::vector<float>(b * s_q * h_q, NAN);
  std::vector<uint8_t> scratch = std::vector<uint8_t>(1 << 16, 0);

  SparseDecodeArgs valid() {
    SparseDecodeArgs a;
    a.q = make_view(q.data(), DType::bf16, {b, s_q, h_q, 576});
    a.cache = cache.view();
    a.indices = make_view(idx.data(), DType::i32, {b, s_q, topk});
    a.topk_length = make_view(len.data(), DType::i32, {b});
    a.attn_sink = make_view(sink.data(), DType::f32, {h_q});
    a.out = make_view(out.data(), DType::bf16, {b, s_q, h_q, kDv});
    a.lse = make_view(lse.data(), DType::f32, {b, s_q, h_q});
    return a;
  }
  SparseDecodeArgs with_extra() {
    SparseDecodeArgs a = valid();
    a.extra_cache = cache.view();
    a.extra_indices = make_view(idx.data(), DType::i32, {b, s_q, topk});
    return a;
  }
  // Rejected with every fragment in the message, and neither output written.
  void expect_rejected(const SparseDecodeArgs& a, const std::vector<std::string>& fragments) {
    tu::expect_rejected_untouched({[&] { sparse_decode(a); }, [&] { (void)sparse_decode_workspace_size(a); }},
                                  fragments, {tu::watch("out", out), tu::watch("lse", lse)});
  }
};

TEST_F(SparseDecodeValidation, ValidArgumentsRun) {
  EXPECT_EQ(sparse_decode_workspace_size(valid()), 0u);
  sparse_decode(valid());
  sparse_decode(with_extra());
  for (float v : lse) EXPECT_FALSE(std::isnan(v));
}

TEST_F(SparseDecodeValidation, Q) {
  auto a = valid();
  a.q.data = nullptr;
  expect_rejected(a, {"q must be bfloat16 of shape (*, *, *, *), got nothing"});
  a = valid();
  a.q.dtype = DType::f32;
  expect_rejected(a, {"q must be bfloat16", "got float32 (2, 1, 16, 576)"});
  a = valid();
  a.q = make_view(q.data(), DType::bf16, {b, h_q, 576});
  expect_rejected(a, {"q must be bfloat16 of shape (*, *, *, *)", "got bfloat16 (2, 16, 576)"});
  a = valid();
  a.q = make_strided_view(q.data(), DType::bf16, {b, s_q, h_q, 288}, {h_q * 576, h_q * 576, 576, 2});
  a.q.shape[3] = 576;
  expect_rejected(a, {"q must be", "last dimension contiguous", "strides (9216, 9216, 576, 2)"});
  a = valid();
  a.q.stride[0] = -a.q.stride[0];
  expect_rejected(a, {"q must be", "non-negative strides"});
  a = valid();
  a.q.shape[1] = 0;
  expect_rejected(a, {"q must be", "s_q >= 1 and h_q >= 1", "got bfloat16 (2, 0, 16, 576)"});
  a = valid();
  a.q.shape[2] = 0;
  expect_rejected(a, {"q must be", "h_q >= 1", "got bfloat16 (2, 1, 0, 576)"});
  a = valid();
  a.q.shape[3] = 512;
  expect_rejected(a, {"q must be bfloat16 of shape (*, *, *, 576)", "got bfloat16 (2, 1, 16, 512)"});
  a = valid();
  a.cache = model1.view();
  expect_rejected(a, {"q must be bfloat16 of shape (*, *, *, 512)", "got bfloat16 (2, 1, 16, 576)"});
}

TEST_F(SparseDecodeValidation, Cache) {
  auto a = valid();
  a.cache.format = CacheFormat::fp8_e4m3;
  expect_rejected(a, {"cache.format must be fp8_ds_mla, fp8_model1 or bf16, got fp8_e4m3"});
  a.cache.format = CacheFormat::fp16;
  expect_rejected(a, {"cache.format must be", "got fp16"});
  a = valid();
  a.cache.data.data = nullptr;
  expect_rejected(a, {"cache must be", "got nothing"});
  a = valid();
  a.cache.data.shape[2] = 584;
  expect_rejected(a, {"cache must be uint8 rows of 656 bytes for format fp8_ds_mla", "got uint8 (2, 16, 584)"});
  a = valid();
  a.cache.data.dtype = DType::bf16;
  expect_rejected(a, {"cache must be uint8 rows of 656 bytes", "got bfloat16"});
  a = valid();
  a.cache.format = CacheFormat::bf16;
  a.cache.data = make_view(scratch.data(), DType::f16, {2, 16, 576});
  expect_rejected(a, {"cache must be bfloat16 for format bf16", "got float16 (2, 16, 576)"});
  a.cache.data = make_view(scratch.data(), DType::bf16, {2, 4, 2, 576});
  expect_rejected(a, {"cache must be", "h_kv = 1", "got bfloat16 (2, 4, 2, 576)"});
  a.cache.data = make_view(scratch.data(), DType::bf16, {2, 4, 576, 1});
  expect_rejected(a, {"cache must be", "got bfloat16 (2, 4, 576, 1)"});
  a = valid();
  a.cache.data.stride[0] = 16 * 656 - 1;
  expect_rejected(a, {"cache must be a page stride of at least 10496 elements", "got 10495"});
  a = valid();
  a.cache.data.stride[1] = 700;
  expect_rejected(a, {"cache must be", "packed row-major"});
  a = valid();
  a.cache.data.shape[1] = 0;
  expect_rejected(a, {"cache must be", "page_size >= 1"});
  a = valid();
  a.cache.data.device = cuda_device(0);
  expect_rejected(a, {"cache must be on cpu like q, got on cuda:0"});
  a = valid();
  a.cache.data = make_view(scratch.data(), DType::u8, {32, 656});
  expect_rejected(a, {"cache must be a tensor of shape (num_blocks, page_size, [h_kv,] row)", "got uint8 (32, 656)"});
  a = valid();
  a.cache.data = make_view(scratch.data(), DType::u8, {2, 8, 2, 656});
  expect_rejected(a, {"cache must be h_kv = 1 for format fp8_ds_mla", "got uint8 (2, 8, 2, 656)"});
}

TEST_F(SparseDecodeValidation, IndicesAndLengths) {
  auto a = valid();
  a.indices.dtype = DType::i64;
  expect_rejected(a, {"indices must be int32 of shape (2, 1, *), got int64 (2, 1, 8)"});
  a = valid();
  a.indices = make_view(idx.data(), DType::i32, {1, s_q, topk});
  expect_rejected(a, {"indices must be int32 of shape (2, 1, *), got int32 (1, 1, 8)"});
  a = valid();
  a.indices = make_view(idx.data(), DType::i32, {b, topk});
  expect_rejected(a, {"indices must be int32 of shape (2, 1, *), got int32 (2, 8)"});
  a = valid();
  a.indices.shape[2] = 0;
  expect_rejected(a, {"indices must be", "topk >= 1", "got int32 (2, 1, 0)"});
  a = valid();
  a.indices = make_strided_view(idx.data(), DType::i32, {b, s_q, 4}, {8, 8, 2});
  expect_rejected(a, {"indices must be", "last dimension contiguous", "strides (8, 8, 2)"});
  a = valid();
  a.indices.data = nullptr;
  expect_rejected(a, {"indices must be int32", "got nothing"});
  a = valid();
  a.indices.device = cuda_device(1);
  expect_rejected(a, {"indices must be on cpu like q, got on cuda:1"});
  a = valid();
  a.topk_length.dtype = DType::i64;
  expect_rejected(a, {"topk_length must be int32 of shape (2,), got int64 (2,)"});
  a = valid();
  a.topk_length.shape[0] = 3;
  expect_rejected(a, {"topk_length must be int32 of shape (2,), got int32 (3,)"});
  a = valid();
  a.topk_length.device = cuda_device(0);
  expect_rejected(a, {"topk_length must be on cpu like q"});
  a = valid();
  a.topk_length.stride[0] = -1;
  expect_rejected(a, {"topk_length must be", "non-negative strides"});
}

TEST_F(SparseDecodeValidation, ExtraKeySet) {
  auto a = with_extra();
  a.extra_indices = {};
  expect_rejected(a, {"extra_indices must be int32 of shape (2, 1, *), got nothing"});
  a = with_extra();
  a.extra_indices.shape[0] = 1;
  expect_rejected(a, {"extra_indices must be int32 of shape (2, 1, *), got int32 (1, 1, 8)"});
  a = with_extra();
  a.extra_indices.shape[2] = 0;
  expect_rejected(a, {"extra_indices must be", "extra_topk >= 1"});
  a = with_extra();
  a.extra_cache = model1.view();
  expect_rejected(a, {"extra_cache must be a cache of d_qk = 576 like cache, got fp8_model1 of d_qk = 512"});
  a = with_extra();
  a.extra_cache.format = CacheFormat::fp16;
  expect_rejected(a, {"extra_cache.format must be fp8_ds_mla, fp8_model1 or bf16, got fp16"});
  a = with_extra();
  a.extra_cache.data.device = cuda_device(0);
  expect_rejected(a, {"extra_cache must be on cpu like q"});
  a = with_extra();
  a.extra_indices.stride = {topk, topk, 2};
  a.extra_indices.shape[2] = topk / 2;
  expect_rejected(a, {"extra_indices must be", "last dimension contiguous"});
  a = with_extra();
  a.extra_indices.device = cuda_device(0);
  expect_rejected(a, {"extra_indices must be on cpu like q"});
  a = with_extra();
  a.extra_topk_length = make_view(len.data(), DType::i32, {b});
  a.extra_topk_length.device = cuda_device(0);
  expect_rejected(a, {"extra_topk_length must be on cpu like q"});
  a = with_extra();
  a.extra_topk_length = make_view(len.data(), DType::f32, {b});
  expect_rejected(a, {"extra_topk_length must be int32 of shape (2,), got float32 (2,)"});
  a = valid();
  a.extra_indices = make_view(idx.data(), DType::i32, {b, s_q, topk});
  expect_rejected(a, {"extra_indices must be nothing when extra_cache is absent, got int32 (2, 1, 8)"});
  a = valid();
  a.extra_topk_length = make_view(len.data(), DType::i32, {b});
  expect_rejected(a, {"extra_topk_length must be nothing when extra_cache is absent, got int32 (2,)"});
}

TEST_F(SparseDecodeValidation, SinkAndScale) {
  auto a = valid();
  a.attn_sink.dtype = DType::bf16;
  expect_rejected(a, {"attn_sink must be float32 of shape (16,), got bfloat16 (16,)"});
  a = valid();
  a.attn_sink.shape[0] = 8;
  expect_rejected(a, {"attn_sink must be float32 of shape (16,), got float32 (8,)"});
  a = valid();
  a.attn_sink.device = cuda_device(0);
  expect_rejected(a, {"attn_sink must be on cpu like q"});
  a = valid();
  a.attn_sink.stride[0] = -1;
  expect_rejected(a, {"attn_sink must be", "non-negative strides"});
  for (float s : {0.0f, -0.5f, NAN, INFINITY}) {
    a = valid();
    a.softmax_scale = s;
    expect_rejected(a, {"softmax_scale must be a positive finite float, got"});
  }
  a = valid();
  a.softmax_scale = -0.5f;
  expect_rejected(a, {"got -0.5"});
}

TEST_F(SparseDecodeValidation, Outputs) {
  auto a = valid();
  a.out.dtype = DType::f32;
  expect_rejected(a, {"out must be bfloat16 of shape (2, 1, 16, 512), got float32 (2, 1, 16, 512)"});
  a = valid();
  a.out.shape[3] = 576;
  expect_rejected(a, {"out must be bfloat16 of shape (2, 1, 16, 512), got bfloat16 (2, 1, 16, 576)"});
  a = valid();
  a.out.shape[2] = 8;
  expect_rejected(a, {"out must be", "got bfloat16 (2, 1, 8, 512)"});
  a = valid();
  a.out.data = nullptr;
  expect_rejected(a, {"out must be", "got nothing"});
  a = valid();
  a.out.stride = {16 * 1024, 16 * 1024, 1024, 2};
  expect_rejected(a, {"out must be", "last dimension contiguous"});
  a = valid();
  a.out.device = cuda_device(0);
  expect_rejected(a, {"out must be on cpu like q, got on cuda:0"});
  a = valid();
  a.lse.dtype = DType::bf16;
  expect_rejected(a, {"lse must be float32 of shape (2, 1, 16), got bfloat16 (2, 1, 16)"});
  a = valid();
  a.lse = make_view(lse.data(), DType::f32, {b, h_q});
  expect_rejected(a, {"lse must be float32 of shape (2, 1, 16), got float32 (2, 16)"});
  a = valid();
  a.lse.data = nullptr;
  expect_rejected(a, {"lse must be", "got nothing"});
  a = valid();
  a.lse.device = cuda_device(0);
  expect_rejected(a, {"lse must be on cpu like q"});
  a = valid();
  a.lse.stride[2] = -1;
  expect_rejected(a, {"lse must be", "non-negative strides"});
}

TEST_F(SparseDecodeValidation, OutputsMustNotAliasInputs) {
  auto a = valid();
  a.out.data = q.data();
  expect_rejected(a, {"out must be a buffer distinct from q"});
  // An output larger than the input it aliases starts a buffer that holds it (tu::with_room), so
  // that it meets that input alone, whatever the allocator put next to it.
  std::vector<int32_t> idx_room = tu::with_room(idx, lse.size());
  a = valid();
  a.indices = make_view(idx_room.data(), DType::i32, {b, s_q, topk});
  a.lse.data = idx_room.data();
  expect_rejected(a, {"lse must be a buffer distinct from indices"});
  a = valid();
  a.lse.data = out.data();
  expect_rejected(a, {"lse must be a buffer distinct from out"});
  // Every input counts, the optional ones too: the kernels read them while the outputs are written.
  std::vector<int32_t> len_room = tu::with_room(len, lse.size());
  std::vector<float> sink_room = tu::with_room(sink, lse.size());
  a = valid();
  a.topk_length = make_view(len_room.data(), DType::i32, {b});
  a.lse.data = len_room.data();
  expect_rejected(a, {"lse must be a buffer distinct from topk_length"});
  a = valid();
  a.attn_sink = make_view(sink_room.data(), DType::f32, {h_q});
  a.lse.data = sink_room.data();
  expect_rejected(a, {"lse must be a buffer distinct from attn_sink"});
  a = with_extra();
  a.topk_length = {};
  a.extra_topk_length = make_view(len_room.data(), DType::i32, {b});
  a.lse.data = len_room.data();
  expect_rejected(a, {"lse must be a buffer distinct from extra_topk_length"});
  // Dense views whose bytes meet share elements, wherever they start.
  a = valid();
  a.out.data = q.data() + 1000;
  expect_rejected(a, {"out must be a buffer distinct from q, got memory overlapping it"});
  a = valid();
  a.lse.data = out.data() + out.size() - 4;  // lse's first two floats are out's last four bf16s
  expect_rejected(a, {"lse must be a buffer distinct from out, got memory overlapping it"});
}

TEST_F(SparseDecodeValidation, OutputsMustNotOverlapThemselves) {
  auto a = valid();
  a.out = make_strided_view(out.data(), DType::bf16, {b, s_q, h_q, kDv}, {0, 0, kDv, 1});  // every request one row
  expect_rejected(a, {"out must be a tensor whose elements do not overlap", "strides (0, 0, 512, 1)"});
  a = valid();
  a.lse = make_strided_view(lse.data(), DType::f32, {b, s_q, h_q}, {h_q, h_q, 0});
  expect_rejected(a, {"lse must be a tensor whose elements do not overlap"});
}

// Views of one buffer that do not share an element run: out with a padded head stride and
// lse in the padding between its rows (not dense: the extents are not judged), and both
// packed side by side.
TEST_F(SparseDecodeValidation, DisjointViewsOfOneBufferRun) {
  constexpr int kPad = 2 * 8;  // bf16 elements of padding per head row: room for 8 floats
  std::vector<uint16_t> buf(b * s_q * h_q * (kDv + kPad), kBf16Poison);
  auto a = valid();
  a.out = make_strided_view(buf.data(), DType::bf16, {b, s_q, h_q, kDv},
                            {s_q * h_q * (kDv + kPad), h_q * (kDv + kPad), kDv + kPad, 1});
  // lse[r, 0, h] = the first float of head row (r, h)'s padding
  a.lse = make_strided_view(reinterpret_cast<float*>(buf.data() + kDv), DType::f32, {b, s_q, h_q},
                            {s_q * h_q * (kDv + kPad) / 2, h_q * (kDv + kPad) / 2, (kDv + kPad) / 2});
  sparse_decode(a);
  std::vector<uint16_t> packed(b * s_q * h_q * kDv + 2 * b * s_q * h_q, kBf16Poison);
  auto c = valid();
  c.out = make_view(packed.data(), DType::bf16, {b, s_q, h_q, kDv});
  c.lse = make_view(reinterpret_cast<float*>(packed.data() + b * s_q * h_q * kDv), DType::f32, {b, s_q, h_q});
  sparse_decode(c);
  sparse_decode(valid());
  for (int r = 0; r < b * s_q * h_q; ++r) {
    EXPECT_EQ(std::memcmp(buf.data() + r * (kDv + kPad), out.data() + r * kDv, kDv * 2), 0) << r;
    EXPECT_EQ(std::memcmp(packed.data() + r * kDv, out.data() + r * kDv, kDv * 2), 0) << r;
    float strided_lse, packed_lse;
    std::memcpy(&strided_lse, buf.data() + r * (kDv + kPad) + kDv, 4);
    std::memcpy(&packed_lse, packed.data() + b * s_q * h_q * kDv + 2 * r, 4);
    EXPECT_EQ(strided_lse, lse[r]) << r;
    EXPECT_EQ(packed_lse, lse[r]) << r;
  }
}

// CUDA tensors are checked on the host too; nothing here is dereferenced.
TEST_F(SparseDecodeValidation, CudaAlignmentAndBackend) {
  auto on_cuda = [&] {
    auto a = valid();
    for (TensorView* t : {&a.q, &a.cache.data, &a.indices, &a.topk_length, &a.attn_sink, &a.out, &a.lse})
      t->device = cuda_device(0);
    return a;
  };
  auto a = on_cuda();
  a.q.data = reinterpret_cast<uint8_t*>(q.data()) + 2;
  expect_rejected(a, {"q must be aligned to 16 bytes", "address % 16 = "});
  a = on_cuda();
  a.q.stride = {h_q * 580, h_q * 580, 580, 1};
  expect_rejected(a, {"q must be aligned to 16 bytes", "strides (9280, 9280, 580, 1)"});
  a = on_cuda();
  a.cache.data.stride[0] += 8;
  expect_rejected(a, {"cache must be aligned to 16 bytes"});
  a = on_cuda();
  a.out.data = reinterpret_cast<uint8_t*>(out.data()) + 4;
  expect_rejected(a, {"out must be aligned to 16 bytes"});
  a = on_cuda();
  a.indices.data = reinterpret_cast<uint8_t*>(idx.data()) + 2;
  expect_rejected(a, {"indices must be aligned to 4 bytes", "address % 4 = 2"});
  a = on_cuda();
  a.lse.data = reinterpret_cast<uint8_t*>(lse.data()) + 1;
  expect_rejected(a, {"lse must be aligned to 4 bytes", "address % 4 = 1"});
#if !SMLA_WITH_CUDA
  a = on_cuda();
  a.cache = model1.view();  // fp8_model1's 584-byte rows are not a stride anyone loads by
  a.cache.data.device = cuda_device(0);
  a.q.shape[3] = 512;
  EXPECT_THROW(sparse_decode(a), RuntimeError);
  EXPECT_THROW((void)sparse_decode_workspace_size(a), RuntimeError);
#endif
}

}  // namespace
}  // namespace smla
