// write_cache and gather_cache (SPEC §2, §4.5): bytes written in every format, checked against
// bytes worked out by hand and against an encoder written again here; skipped slots; round
// trips; every validation rule.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "common/test_util.h"
#include "smla/formats.h"
#include "smla/numeric.h"
#include "smla/ops.h"

namespace smla {
namespace {

constexpr CacheFormat kFormats[] = {CacheFormat::bf16, CacheFormat::fp16, CacheFormat::fp8_e4m3,
                                    CacheFormat::fp8_ds_mla, CacheFormat::fp8_model1};

int d_qk_of(CacheFormat f, int element_d_qk) {
  if (f == CacheFormat::fp8_ds_mla) return 576;
  if (f == CacheFormat::fp8_model1) return 512;
  return element_d_qk;
}

// Bytes of one token row (element formats) or one token's entry (packed formats).
int row_bytes(CacheFormat f, int d_qk) {
  switch (f) {
    case CacheFormat::bf16: case CacheFormat::fp16: return 2 * d_qk;
    case CacheFormat::fp8_e4m3: return d_qk;
    case CacheFormat::fp8_ds_mla: return 656;
    case CacheFormat::fp8_model1: return 584;
  }
  return 0;
}

// A cache of garbage bytes whose pages are `gap` bytes further apart than a page needs.
struct CacheBuf {
  std::vector<uint8_t> bytes;
  PagedCache cache;
  int64_t page_stride = 0;  // bytes
};

CacheBuf make_cache(CacheFormat f, int d_qk, int64_t num_blocks, int64_t page_size, float k_scale = 1.0f,
                    int64_t gap = 32) {
  CacheBuf c;
  const int64_t rb = row_bytes(f, d_qk);
  const int64_t page = f == CacheFormat::fp8_model1 ? (page_size * 584 + 575) / 576 * 576 : page_size * rb;
  c.page_stride = page + gap;
  c.bytes.resize(num_blocks * c.page_stride);
  for (auto& b : c.bytes) b = static_cast<uint8_t>(test::uniform_int(0, 255));
  c.cache.format = f;
  c.cache.k_scale = k_scale;
  switch (f) {
    case CacheFormat::bf16: case CacheFormat::fp16: case CacheFormat::fp8_e4m3: {
      const DType dt = f == CacheFormat::bf16 ? DType::bf16 : f == CacheFormat::fp16 ? DType::f16 : DType::fp8_e4m3;
      const int64_t es = f == CacheFormat::fp8_e4m3 ? 1 : 2;
      c.cache.data = make_strided_view(c.bytes.data(), dt, {num_blocks, page_size, 1, d_qk},
                                       {c.page_stride / es, d_qk, d_qk, 1});
      break;
    }
    default:
      c.cache.data = make_strided_view(c.bytes.data(), DType::u8, {num_blocks, page_size, rb}, {c.page_stride, rb, 1});
  }
  return c;
}

int scale_exponent(float amax) {
  const double t = std::max(static_cast<double>(amax), static_cast<double>(1e-4f)) / 448.0;
  return static_cast<int>(std::ceil(std::log2(t)));
}

// Where each byte of a token goes, and what it is, written from the SPEC table.
struct TokenBytes {
  std::vector<std::pair<int64_t, uint8_t>> at;  // (offset from the page start, byte)
};

TokenBytes encode(CacheFormat f, int d_qk, int page_size, int64_t offset, float k_scale,
                  const std::vector<uint16_t>& row) {
  TokenBytes t;
  auto put16 = [&](int64_t at, uint16_t v) {
    t.at.push_back({at, static_cast<uint8_t>(v & 0xff)});
    t.at.push_back({at + 1, static_cast<uint8_t>(v >> 8)});
  };
  auto val = [&](int i) { return bf16_bits_to_float(row[i]); };
  auto amax = [&](int from, int n) {
    float m = 0;
    for (int i = from; i < from + n; ++i) m = std::max(m, std::fabs(val(i)));
    return m;
  };
  switch (f) {
    case CacheFormat::bf16:
      for (int i = 0; i < d_qk; ++i) put16(offset * 2 * d_qk + 2 * i, row[i]);
      break;
    case CacheFormat::fp16:
      for (int i = 0; i < d_qk; ++i) put16(offset * 2 * d_qk + 2 * i, float_to_fp16_bits(val(i)));
      break;
    case CacheFormat::fp8_e4m3:
      for (int i = 0; i < d_qk; ++i) t.at.push_back({offset * d_qk + i, float_to_e4m3(val(i) / k_scale)});
      break;
    case CacheFormat::fp8_ds_mla: {
      const int64_t base = offset * 656;
      for (int s = 0; s < 4; ++s) {
        const float scale = std::ldexp(1.0f, scale_exponent(amax(128 * s, 128)));
        uint8_t sb[4];
        std::memcpy(sb, &scale, 4);
        for (int k = 0; k < 4; ++k) t.at.push_back({base + 512 + 4 * s + k, sb[k]});
        for (int i = 128 * s; i < 128 * (s + 1); ++i) t.at.push_back({base + i, float_to_e4m3(val(i) / scale)});
      }
      for (int i = 0; i < 64; ++i) put16(base + 528 + 2 * i, row[512 + i]);
      break;
    }
    case CacheFormat::fp8_model1: {
      const int64_t data = offset * 576, scales = int64_t{page_size} * 576 + offset * 8;
      for (int s = 0; s < 7; ++s) {
        const int e = scale_exponent(amax(64 * s, 64));
        t.at.push_back({scales + s, static_cast<uint8_t>(127 + e)});
        for (int i = 64 * s; i < 64 * (s + 1); ++i)
          t.at.push_back({data + i, float_to_e4m3(val(i) / std::ldexp(1.0f, e))});
      }
      t.at.push_back({scales + 7, 0});
      for (int i = 0; i < 64; ++i) put16(data + 448 + 2 * i, row[448 + i]);
      break;
    }
  }
  return t;
}

void apply(std::vector<uint8_t>& bytes, const CacheBuf& c, int64_t slot, const TokenBytes& t) {
  const int64_t page = (slot / c.cache.page_size()) * c.page_stride;
  for (auto [at, b] : t.at) bytes[page + at] = b;
}

std::vector<uint16_t> key_row(const std::vector<uint16_t>& kv_c, const std::vector<uint16_t>& k_pe, int64_t t,
                              int d_latent) {
  std::vector<uint16_t> row(kv_c.begin() + t * d_latent, kv_c.begin() + (t + 1) * d_latent);
  row.insert(row.end(), k_pe.begin() + t * 64, k_pe.begin() + (t + 1) * 64);
  return row;
}

struct Inputs {
  std::vector<uint16_t> kv_c, k_pe;
  std::vector<int64_t> slots;
};

WriteCacheArgs write_args(Inputs& in, const PagedCache& cache, int d_latent) {
  const int64_t T = static_cast<int64_t>(in.slots.size());
  WriteCacheArgs a;
  a.kv_c = make_view(in.kv_c.data(), DType::bf16, {T, d_latent});
  a.k_pe = make_view(in.k_pe.data(), DType::bf16, {T, 64});
  a.slot_mapping = make_view(in.slots.data(), DType::i64, {T});
  a.cache = cache;
  return a;
}

// ------------------------------------------------------------------ bytes by hand

// One token: latent all 1.0 but [1] = -3.5 and [130] = 0.30078125 (bf16 0x3e9a); RoPE all
// 2.0 but [0] = -0.5. Written to slot 3 (block 1, offset 1) of a page-2 cache.
std::vector<uint8_t> write_hand_token(CacheFormat f, int d_qk, float k_scale, CacheBuf& c,
                                      const std::vector<std::pair<int, uint16_t>>& extra = {}) {
  const int d_latent = d_qk - 64;
  Inputs in;
  in.kv_c.assign(d_latent, 0x3f80);
  in.kv_c[1] = 0xc060;
  in.kv_c[130] = 0x3e9a;
  for (auto [i, v] : extra) in.kv_c[i] = v;
  in.k_pe.assign(64, 0x4000);
  in.k_pe[0] = 0xbf00;
  in.slots = {3};
  c = make_cache(f, d_qk, 2, 2, k_scale);
  write_cache(write_args(in, c.cache, d_latent));
  return std::vector<uint8_t>(c.bytes.begin() + c.page_stride, c.bytes.begin() + 2 * c.page_stride);
}

TEST(WriteCache, HandBytesBf16) {
  CacheBuf c;
  const auto page = write_hand_token(CacheFormat::bf16, 576, 1.0f, c);
  const int64_t tok = 1152;  // offset 1 of the page
  EXPECT_EQ(page[tok + 0], 0x80);
  EXPECT_EQ(page[tok + 1], 0x3f);
  EXPECT_EQ(page[tok + 2], 0x60);
  EXPECT_EQ(page[tok + 3], 0xc0);
  EXPECT_EQ(page[tok + 260], 0x9a);
  EXPECT_EQ(page[tok + 261], 0x3e);
  EXPECT_EQ(page[tok + 1024], 0x00);  // RoPE[0] = -0.5
  EXPECT_EQ(page[tok + 1025], 0xbf);
  EXPECT_EQ(page[tok + 1026], 0x00);
  EXPECT_EQ(page[tok + 1027], 0x40);
}

TEST(WriteCache, HandBytesFp16) {
  CacheBuf c;
  // [2] = 70144 (bf16 0x4789) overflows fp16 to inf; [3] = 2^-26 (bf16 0x3280) rounds to 0.
  const auto page = write_hand_token(CacheFormat::fp16, 512, 1.0f, c, {{2, 0x4789}, {3, 0x3280}});
  const int64_t tok = 1024;
  const std::vector<std::pair<int64_t, uint8_t>> want = {
      {0, 0x00}, {1, 0x3c},      // 1.0
      {2, 0x00}, {3, 0xc3},      // -3.5
      {4, 0x00}, {5, 0x7c},      // inf
      {6, 0x00}, {7, 0x00},      // 0
      {260, 0xd0}, {261, 0x34},  // 0.30078125
      {896, 0x00}, {897, 0xb8},  // RoPE -0.5
      {898, 0x00}, {899, 0x40},  // RoPE 2.0
  };
  for (auto [at, b] : want) EXPECT_EQ(page[tok + at], b) << "byte " << at;
}

TEST(WriteCache, HandBytesFp8E4m3) {
  CacheBuf c;
  const auto page = write_hand_token(CacheFormat::fp8_e4m3, 576, 0.5f, c);
  const int64_t tok = 576;
  EXPECT_EQ(page[tok + 0], 0x40);    // 1.0 / 0.5 = 2
  EXPECT_EQ(page[tok + 1], 0xce);    // -7
  EXPECT_EQ(page[tok + 130], 0x32);  // 0.6015625 -> 0.625
  EXPECT_EQ(page[tok + 512], 0xb8);  // RoPE -1
  EXPECT_EQ(page[tok + 513], 0x48);  // RoPE 4
}

TEST(WriteCache, HandBytesDsMla) {
  CacheBuf c;
  const auto page = write_hand_token(CacheFormat::fp8_ds_mla, 576, 1.0f, c);
  const int64_t tok = 656;
  EXPECT_EQ(page[tok + 0], 0x70);    // 1.0 / 2^-7 = 128
  EXPECT_EQ(page[tok + 1], 0xfe);    // -3.5 / 2^-7 = -448
  EXPECT_EQ(page[tok + 128], 0x78);  // 1.0 / 2^-8 = 256
  EXPECT_EQ(page[tok + 130], 0x6a);  // 0.30078125 / 2^-8 = 77 -> 80
  const std::vector<uint8_t> scales = {0x00, 0x00, 0x00, 0x3c,   // tile 0: amax 3.5 -> 2^-7
                                       0x00, 0x00, 0x80, 0x3b,   // tiles 1-3: amax 1 -> 2^-8
                                       0x00, 0x00, 0x80, 0x3b, 0x00, 0x00, 0x80, 0x3b};
  for (int k = 0; k < 16; ++k) EXPECT_EQ(page[tok + 512 + k], scales[k]) << "scale byte " << k;
  EXPECT_EQ(page[tok + 528], 0x00);
  EXPECT_EQ(page[tok + 529], 0xbf);
  EXPECT_EQ(page[tok + 530], 0x00);
  EXPECT_EQ(page[tok + 531], 0x40);
}

TEST(WriteCache, HandBytesModel1) {
  CacheBuf c;
  const auto page = write_hand_token(CacheFormat::fp8_model1, 512, 1.0f, c);
  const int64_t data = 576, scales = 2 * 576 + 8;
  EXPECT_EQ(page[data + 0], 0x70);
  EXPECT_EQ(page[data + 1], 0xfe);
  EXPECT_EQ(page[data + 64], 0x78);
  EXPECT_EQ(page[data + 130], 0x6a);
  EXPECT_EQ(page[data + 448], 0x00);  // RoPE -0.5
  EXPECT_EQ(page[data + 449], 0xbf);
  const std::vector<uint8_t> want = {120, 119, 119, 119, 119, 119, 119, 0};  // 127 - 7, 127 - 8, pad
  for (int k = 0; k < 8; ++k) EXPECT_EQ(page[scales + k], want[k]) << "scale byte " << k;
}

// ------------------------------------------------------------------ random rows

// Random rows to valid, invalid and duplicate slots; every byte of the cache checked.
void check_random_write(CacheFormat f, int element_d_qk, int64_t page_size, float k_scale) {
  SCOPED_TRACE(format_name(f));
  const int d_qk = d_qk_of(f, element_d_qk), d_latent = d_qk - 64;
  const int64_t num_blocks = 3;
  CacheBuf c = make_cache(f, d_qk, num_blocks, page_size, k_scale, 48);
  const int64_t num_slots = num_blocks * page_size;
  Inputs in;
  std::vector<int64_t> perm(num_slots);
  for (int64_t i = 0; i < num_slots; ++i) perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), test::rng());
  const int64_t n_valid = std::min<int64_t>(num_slots - 1, 6);
  for (int64_t i = 0; i < n_valid; ++i) in.slots.push_back(perm[i]);
  const int64_t dup = in.slots[0];
  for (int64_t bad : {int64_t{-1}, int64_t{-7}, std::numeric_limits<int64_t>::min(), num_slots, num_slots + 5,
                      std::numeric_limits<int64_t>::max()})
    in.slots.push_back(bad);
  in.slots.push_back(dup);
  std::shuffle(in.slots.begin(), in.slots.end(), test::rng());
  const int64_t T = static_cast<int64_t>(in.slots.size());
  // Magnitudes differ by tile so the scales differ.
  in.kv_c.resize(T * d_latent);
  for (int64_t t = 0; t < T; ++t)
    for (int i = 0; i < d_latent; ++i) {
      const float mag = std::ldexp(1.0f, static_cast<int>((t * 7 + i / 64) % 9) - 4);
      in.kv_c[t * d_latent + i] = float_to_bf16_bits(test::uniform(-mag, mag));
    }
  in.k_pe = test::random_bf16(T * 64, -3.0f, 3.0f);

  std::vector<uint8_t> want_a = c.bytes, want_b = c.bytes;
  std::vector<int64_t> dup_tokens;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t s = in.slots[t];
    if (s < 0 || s >= num_slots) continue;
    const TokenBytes tb = encode(f, d_qk, static_cast<int>(page_size), s % page_size, k_scale,
                                 key_row(in.kv_c, in.k_pe, t, d_latent));
    if (s == dup) {
      dup_tokens.push_back(t);
      apply(dup_tokens.size() == 1 ? want_a : want_b, c, s, tb);
    } else {
      apply(want_a, c, s, tb);
      apply(want_b, c, s, tb);
    }
  }
  ASSERT_EQ(dup_tokens.size(), 2u);
  write_cache(write_args(in, c.cache, d_latent));
  // Duplicate slots: one of the two writes wins, whole.
  EXPECT_TRUE(c.bytes == want_a || c.bytes == want_b) << "cache bytes differ from the expected encoding";
  if (!(c.bytes == want_a || c.bytes == want_b)) {
    for (size_t i = 0; i < c.bytes.size(); ++i)
      if (c.bytes[i] != want_a[i] && c.bytes[i] != want_b[i]) {
        ADD_FAILURE() << "first bad byte " << i << " (page " << i / c.page_stride << ", offset "
                      << i % c.page_stride << "): got " << int(c.bytes[i]) << " want " << int(want_a[i]);
        break;
      }
  }
}

TEST(WriteCache, RandomRowsEveryFormat) {
  for (int64_t page_size : {1, 4, 64}) {
    check_random_write(CacheFormat::bf16, 576, page_size, 1.0f);
    check_random_write(CacheFormat::bf16, 512, page_size, 1.0f);
    check_random_write(CacheFormat::fp16, 576, page_size, 1.0f);
    check_random_write(CacheFormat::fp8_e4m3, 576, page_size, 0.0123f);  // not a power of two
    check_random_write(CacheFormat::fp8_e4m3, 512, page_size, 0.75f);
    check_random_write(CacheFormat::fp8_ds_mla, 576, page_size, 1.0f);
    check_random_write(CacheFormat::fp8_model1, 512, page_size, 1.0f);
  }
}

TEST(WriteCache, OnlyInvalidSlotsWriteNothing) {
  for (CacheFormat f : kFormats) {
    const int d_qk = d_qk_of(f, 576);
    CacheBuf c = make_cache(f, d_qk, 2, 4, 0.5f);
    Inputs in;
    in.slots = {-1, 8, -8, std::numeric_limits<int64_t>::min(), 1000};
    in.kv_c = test::random_bf16(in.slots.size() * (d_qk - 64));
    in.k_pe = test::random_bf16(in.slots.size() * 64);
    const auto before = test::snapshot(c.bytes);
    write_cache(write_args(in, c.cache, d_qk - 64));
    EXPECT_EQ(test::snapshot(c.bytes), before) << format_name(f);
  }
}

TEST(WriteCache, StridedInputRows) {
  const int d_qk = 576, d_latent = 512, T = 3;
  CacheBuf c = make_cache(CacheFormat::fp8_ds_mla, d_qk, 2, 4);
  std::vector<uint16_t> kv_c = test::random_bf16(T * (d_latent + 24)), k_pe = test::random_bf16(T * 80);
  std::vector<int64_t> slots = {5, 0, 7};
  WriteCacheArgs a;
  a.kv_c = make_strided_view(kv_c.data(), DType::bf16, {T, d_latent}, {d_latent + 24, 1});
  a.k_pe = make_strided_view(k_pe.data(), DType::bf16, {T, 64}, {80, 1});
  a.slot_mapping = make_view(slots.data(), DType::i64, {T});
  a.cache = c.cache;
  std::vector<uint8_t> want = c.bytes;
  for (int t = 0; t < T; ++t) {
    std::vector<uint16_t> row(kv_c.begin() + t * (d_latent + 24), kv_c.begin() + t * (d_latent + 24) + d_latent);
    row.insert(row.end(), k_pe.begin() + t * 80, k_pe.begin() + t * 80 + 64);
    apply(want, c, slots[t], encode(CacheFormat::fp8_ds_mla, d_qk, 4, slots[t] % 4, 1.0f, row));
  }
  write_cache(a);
  EXPECT_TRUE(c.bytes == want);
}

// ------------------------------------------------------------------ round trips

// e4m3 spacing at magnitude v.
double e4m3_step(double v) {
  if (v < std::ldexp(1.0, -6)) return std::ldexp(1.0, -9);
  return std::ldexp(1.0, static_cast<int>(std::floor(std::log2(v))) - 3);
}

template <typename Slot>
void check_round_trip(CacheFormat f, int element_d_qk, float k_scale) {
  SCOPED_TRACE(format_name(f));
  const int d_qk = d_qk_of(f, element_d_qk), d_latent = d_qk - 64;
  const int64_t num_blocks = 4, page_size = 16, num_slots = num_blocks * page_size;
  CacheBuf c = make_cache(f, d_qk, num_blocks, page_size, k_scale);
  Inputs in;
  for (int64_t s : {int64_t{17}, int64_t{0}, int64_t{63}, int64_t{40}, int64_t{5}}) in.slots.push_back(s);
  const int64_t T = static_cast<int64_t>(in.slots.size());
  in.kv_c = test::random_bf16(T * d_latent, -2.0f, 2.0f);
  in.k_pe = test::random_bf16(T * 64, -2.0f, 2.0f);
  write_cache(write_args(in, c.cache, d_latent));

  std::vector<Slot> gslots;
  std::vector<int64_t> src;  // token each gathered row came from, -1 for an invalid slot
  for (int64_t t = 0; t < T; ++t) {
    gslots.push_back(static_cast<Slot>(in.slots[t]));
    src.push_back(t);
  }
  for (int64_t bad : {int64_t{-1}, num_slots, int64_t{std::numeric_limits<Slot>::min()}, int64_t{-2}}) {
    gslots.push_back(static_cast<Slot>(bad));
    src.push_back(-1);
  }
  const Slot again = gslots[0];  // a slot gathered twice
  const int64_t again_src = src[0];
  gslots.insert(gslots.begin() + 2, again);
  src.insert(src.begin() + 2, again_src);
  const int64_t N = static_cast<int64_t>(gslots.size());
  std::vector<uint16_t> out(N * d_qk, test::bf16_nan());
  GatherCacheArgs g;
  g.cache = c.cache;
  g.slots = make_view(gslots.data(), sizeof(Slot) == 4 ? DType::i32 : DType::i64, {N});
  g.out = make_view(out.data(), DType::bf16, {N, d_qk});
  gather_cache(g);

  for (int64_t n = 0; n < N; ++n) {
    if (src[n] < 0) {
      for (int i = 0; i < d_qk; ++i) ASSERT_EQ(out[n * d_qk + i], 0u) << "invalid slot row " << n;
      continue;
    }
    const std::vector<uint16_t> row = key_row(in.kv_c, in.k_pe, src[n], d_latent);
    for (int i = 0; i < d_qk; ++i) {
      const double x = bf16_bits_to_float(row[i]), got = bf16_bits_to_float(out[n * d_qk + i]);
      const bool rope = i >= d_latent;
      double tol = 0;
      switch (f) {
        case CacheFormat::bf16: tol = 0; break;
        case CacheFormat::fp16:  // a bf16 value is exact in fp16 unless it falls in fp16's subnormals
          tol = std::fabs(x) < std::ldexp(1.0, -14) ? std::ldexp(1.0, -25) : 0;
          break;
        case CacheFormat::fp8_e4m3: tol = e4m3_step(std::fabs(x) / k_scale) * k_scale; break;
        case CacheFormat::fp8_ds_mla:
        case CacheFormat::fp8_model1: {
          if (rope) break;  // stored as bf16: exact
          const int tile = f == CacheFormat::fp8_ds_mla ? 128 : 64;
          float amax = 0;
          for (int k = i / tile * tile; k < (i / tile + 1) * tile; ++k) amax = std::max(amax, std::fabs(bf16_bits_to_float(row[k])));
          const double scale = std::ldexp(1.0, scale_exponent(amax));
          tol = e4m3_step(std::fabs(x) / scale) * scale;  // one e4m3 step of the tile scale
          break;
        }
      }
      ASSERT_LE(std::fabs(got - x), tol) << "row " << n << " element " << i << " x " << x << " got " << got;
    }
  }
}

TEST(GatherCache, RoundTripEveryFormat) {
  check_round_trip<int64_t>(CacheFormat::bf16, 576, 1.0f);
  check_round_trip<int32_t>(CacheFormat::bf16, 512, 1.0f);
  check_round_trip<int64_t>(CacheFormat::fp16, 512, 1.0f);
  check_round_trip<int32_t>(CacheFormat::fp8_e4m3, 576, 0.0123f);
  check_round_trip<int64_t>(CacheFormat::fp8_e4m3, 512, 0.3f);
  check_round_trip<int32_t>(CacheFormat::fp8_ds_mla, 576, 1.0f);
  check_round_trip<int64_t>(CacheFormat::fp8_ds_mla, 576, 1.0f);
  check_round_trip<int32_t>(CacheFormat::fp8_model1, 512, 1.0f);
  check_round_trip<int64_t>(CacheFormat::fp8_model1, 512, 1.0f);
}

TEST(GatherCache, EmptySlotList) {
  CacheBuf c = make_cache(CacheFormat::bf16, 576, 2, 4);
  std::vector<int64_t> slots(1);
  std::vector<uint16_t> out(576, test::bf16_nan());
  GatherCacheArgs g;
  g.cache = c.cache;
  g.slots = make_view(slots.data(), DType::i64, {0});
  g.out = make_view(out.data(), DType::bf16, {0, 576});
  gather_cache(g);
  for (uint16_t v : out) EXPECT_EQ(v, test::bf16_nan());
}

// ------------------------------------------------------------------ validation

struct WriteFixture {
  CacheBuf c;
  Inputs in;
  WriteCacheArgs a;
  explicit WriteFixture(CacheFormat f = CacheFormat::bf16, int d_qk = 576) {
    c = make_cache(f, d_qk, 2, 4, 0.5f);
    in.slots = {1, 6, -1};
    in.kv_c = test::random_bf16(3 * (d_qk - 64));
    in.k_pe = test::random_bf16(3 * 64);
    a = write_args(in, c.cache, d_qk - 64);
  }
  void expect_rejected(const std::vector<std::string>& fragments) {
    const auto before = test::snapshot(c.bytes);
    test::expect_error([&] { write_cache(a); }, fragments);
    EXPECT_EQ(test::snapshot(c.bytes), before) << "a rejected call wrote to the cache";
  }
};

TEST(WriteCache, RejectsBadKvC) {
  { WriteFixture w; w.a.kv_c.dtype = DType::f16; w.expect_rejected({"kv_c", "bfloat16 of shape (3, 512)", "float16 (3, 512)"}); }
  { WriteFixture w; w.a.kv_c.shape[1] = 448; w.expect_rejected({"kv_c", "(3, 512)", "bfloat16 (3, 448)"}); }
  { WriteFixture w(CacheFormat::fp8_model1, 512); w.a.kv_c.shape[1] = 512;
    w.expect_rejected({"kv_c", "(3, 448)", "bfloat16 (3, 512)"}); }
  { WriteFixture w; w.a.kv_c.shape[0] = 2; w.expect_rejected({"kv_c", "(3, 512)", "(2, 512)"}); }
  { WriteFixture w; w.a.kv_c.data = nullptr; w.expect_rejected({"kv_c", "bfloat16", "nothing"}); }
  { WriteFixture w; w.a.kv_c.stride[1] = 2; w.a.kv_c.stride[0] = 1024;
    w.expect_rejected({"kv_c", "last dimension contiguous", "strides (1024, 2)"}); }
  { WriteFixture w; w.a.kv_c.device = cuda_device(0); w.expect_rejected({"kv_c", "on cpu like cache", "on cuda:0"}); }
}

TEST(WriteCache, RejectsBadKPe) {
  { WriteFixture w; w.a.k_pe.shape[1] = 32; w.expect_rejected({"k_pe", "bfloat16 of shape (3, 64)", "bfloat16 (3, 32)"}); }
  { WriteFixture w; w.a.k_pe.dtype = DType::f32; w.expect_rejected({"k_pe", "bfloat16", "float32 (3, 64)"}); }
  { WriteFixture w; w.a.k_pe.stride[1] = 3; w.expect_rejected({"k_pe", "contiguous", "strides"}); }
  { WriteFixture w; w.a.k_pe.device = cuda_device(1); w.expect_rejected({"k_pe", "on cpu", "on cuda:1"}); }
}

TEST(WriteCache, RejectsBadSlotMapping) {
  { WriteFixture w; w.a.slot_mapping.dtype = DType::i32; w.expect_rejected({"slot_mapping", "int64", "int32 (3,)"}); }
  { WriteFixture w; w.a.slot_mapping = make_view(w.in.slots.data(), DType::i64, {1, 3});
    w.expect_rejected({"slot_mapping", "int64 of shape (*,)", "int64 (1, 3)"}); }
  { WriteFixture w; w.a.slot_mapping.data = nullptr; w.expect_rejected({"slot_mapping", "nothing"}); }
  { WriteFixture w; w.a.slot_mapping.stride[0] = 2; w.expect_rejected({"slot_mapping", "contiguous", "strides (2,)"}); }
  { WriteFixture w; w.a.slot_mapping.device = cuda_device(0); w.expect_rejected({"slot_mapping", "on cpu", "cuda:0"}); }
}

TEST(WriteCache, RejectsBadCache) {
  // The page stride is widened too, so only h_kv is wrong (rejected before anything is read).
  { WriteFixture w; w.a.cache.data.shape[2] = 2; w.a.cache.data.stride[1] = 2 * 576; w.a.cache.data.stride[0] = 4608;
    w.expect_rejected({"cache", "h_kv = 1", "bfloat16 (2, 4, 2, 576)"}); }
  { WriteFixture w; w.a.cache.data.dtype = DType::f16; w.expect_rejected({"cache", "bfloat16 for format bf16", "float16"}); }
  { WriteFixture w; w.a.cache.data.shape[3] = 500; w.expect_rejected({"cache", "d_qk = 576 or 512", "(2, 4, 1, 500)"}); }
  { WriteFixture w; w.a.cache.data.stride[0] = 100; w.expect_rejected({"cache", "page stride of at least 2304", "100"}); }
  { WriteFixture w; w.a.cache.data.stride[1] = 600; w.expect_rejected({"cache", "packed row-major", "strides"}); }
  { WriteFixture w; w.a.cache.data.data = nullptr; w.expect_rejected({"cache", "nothing"}); }
  { WriteFixture w(CacheFormat::fp8_e4m3); w.a.cache.k_scale = 0.0f; w.expect_rejected({"cache.k_scale", "positive finite", "0"}); }
  { WriteFixture w(CacheFormat::fp8_e4m3); w.a.cache.k_scale = NAN; w.expect_rejected({"cache.k_scale", "positive finite", "nan"}); }
  { WriteFixture w(CacheFormat::fp8_e4m3); w.a.cache.k_scale = -INFINITY; w.expect_rejected({"cache.k_scale", "-inf"}); }
  { WriteFixture w(CacheFormat::fp8_ds_mla); w.a.cache.data.shape[2] = 584; w.a.cache.data.stride[1] = 584;
    w.expect_rejected({"cache", "uint8 rows of 656 bytes for format fp8_ds_mla", "uint8 (2, 4, 584)"}); }
  { WriteFixture w(CacheFormat::fp8_model1, 512); w.a.cache.data.stride[0] = 4 * 584 - 1;
    w.expect_rejected({"cache", "page stride of at least 2336", "2335"}); }
  { WriteFixture w; w.a.cache.format = CacheFormat::fp8_ds_mla; w.expect_rejected({"cache", "uint8 rows of 656", "bfloat16"}); }
  { WriteFixture w; w.a.cache.data.ndim = 2; w.expect_rejected({"cache", "(num_blocks, page_size, [h_kv,] row)"}); }
}

TEST(WriteCache, RejectsAliasingAndMisalignedDeviceTensors) {
  { WriteFixture w; w.a.kv_c.data = w.a.cache.data.data; w.expect_rejected({"cache", "distinct from kv_c"}); }
  { WriteFixture w; w.a.k_pe.data = w.a.cache.data.data; w.expect_rejected({"cache", "distinct from k_pe"}); }
  { WriteFixture w; w.a.slot_mapping.data = w.a.cache.data.data; w.expect_rejected({"cache", "distinct from slot_mapping"}); }
  {
    WriteFixture w;
    for (TensorView* t : {&w.a.kv_c, &w.a.k_pe, &w.a.slot_mapping, &w.a.cache.data}) t->device = cuda_device(0);
    w.a.cache.data.data = static_cast<uint8_t*>(w.a.cache.data.data) + 2;
    w.expect_rejected({"cache", "aligned to 16 bytes", "address % 16"});
  }
}

#if !SMLA_WITH_CUDA
TEST(WriteCache, CudaTensorsNeedACudaBuild) {
  WriteFixture w;
  alignas(16) static uint16_t kv[3 * 512], pe[3 * 64];
  alignas(16) static uint8_t cache[2 * 4 * 1152 + 64];
  w.a.kv_c.data = kv;
  w.a.k_pe.data = pe;
  w.a.cache.data.data = cache;
  w.a.cache.data.stride[0] = 4 * 576;
  for (TensorView* t : {&w.a.kv_c, &w.a.k_pe, &w.a.slot_mapping, &w.a.cache.data}) t->device = cuda_device(0);
  EXPECT_THROW(write_cache(w.a), RuntimeError);
}
#endif

struct GatherFixture {
  CacheBuf c;
  std::vector<int64_t> slots = {1, -1, 7};
  std::vector<uint16_t> out;
  GatherCacheArgs a;
  explicit GatherFixture(CacheFormat f = CacheFormat::bf16, int d_qk = 576) {
    c = make_cache(f, d_qk, 2, 4, 0.5f);
    out.assign(3 * d_qk, test::bf16_nan());
    a.cache = c.cache;
    a.slots = make_view(slots.data(), DType::i64, {3});
    a.out = make_view(out.data(), DType::bf16, {3, d_qk});
  }
  void expect_rejected(const std::vector<std::string>& fragments) {
    const auto before = test::snapshot(out);
    test::expect_error([&] { gather_cache(a); }, fragments);
    EXPECT_EQ(test::snapshot(out), before) << "a rejected call wrote to out";
  }
};

TEST(GatherCache, RejectsBadArguments) {
  { GatherFixture g; g.a.slots.dtype = DType::u8; g.expect_rejected({"slots", "int32 or int64 of shape (*,)", "uint8 (3,)"}); }
  { GatherFixture g; g.a.slots.stride[0] = 2; g.expect_rejected({"slots", "contiguous", "strides (2,)"}); }
  { GatherFixture g; g.a.slots.data = nullptr; g.expect_rejected({"slots", "nothing"}); }
  { GatherFixture g; g.a.out.dtype = DType::f32; g.expect_rejected({"out", "bfloat16 of shape (3, 576)", "float32 (3, 576)"}); }
  { GatherFixture g; g.a.out.shape[1] = 512; g.expect_rejected({"out", "(3, 576)", "bfloat16 (3, 512)"}); }
  { GatherFixture g(CacheFormat::fp8_model1, 512); g.a.out.shape[0] = 2; g.expect_rejected({"out", "(3, 512)", "(2, 512)"}); }
  { GatherFixture g; g.a.out.stride[1] = 2; g.expect_rejected({"out", "contiguous", "strides"}); }
  { GatherFixture g; g.a.out.data = nullptr; g.expect_rejected({"out", "nothing"}); }
  { GatherFixture g; g.a.out.device = cuda_device(0); g.expect_rejected({"out", "on cpu like cache", "on cuda:0"}); }
  { GatherFixture g; g.a.slots.device = cuda_device(0); g.expect_rejected({"slots", "on cpu like cache", "on cuda:0"}); }
  { GatherFixture g; g.a.cache.data.shape[2] = 2; g.a.cache.data.stride[1] = 1152; g.a.cache.data.stride[0] = 4608;
    g.expect_rejected({"cache", "h_kv = 1", "(2, 4, 2, 576)"}); }
  { GatherFixture g(CacheFormat::fp8_e4m3); g.a.cache.k_scale = INFINITY; g.expect_rejected({"cache.k_scale", "positive finite", "inf"}); }
  { GatherFixture g; g.a.cache.data.data = nullptr; g.expect_rejected({"cache", "nothing"}); }
  { GatherFixture g; g.a.out.data = g.a.cache.data.data; g.expect_rejected({"out", "distinct from cache"}); }
  { GatherFixture g; g.a.out.stride[0] = 0; g.expect_rejected({"out", "elements do not overlap"}); }
  {
    GatherFixture g;
    for (TensorView* t : {&g.a.slots, &g.a.out, &g.a.cache.data}) t->device = cuda_device(0);
    g.a.out.data = reinterpret_cast<uint8_t*>(g.out.data()) + 2;
    g.expect_rejected({"aligned to 16 bytes", "address % 16"});
  }
}

}  // namespace
}  // namespace smla
