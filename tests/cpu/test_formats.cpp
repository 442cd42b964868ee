// SPEC §2 byte layouts, checked from pages built by hand: every offset below is written as a
// number from the SPEC table, not taken from formats.h, so a wrong constant there shows here.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/test_util.h"
#include "smla/formats.h"
#include "smla/numeric.h"
#include "smla/ops.h"

namespace smla {
namespace {

std::vector<uint8_t> garbage_bytes(size_t n) {
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(test::uniform_int(0, 255));
  return v;
}

uint8_t random_e4m3_code() {
  for (;;) {
    const auto b = static_cast<uint8_t>(test::uniform_int(0, 255));
    if ((b & 0x7f) != 0x7f) return b;  // 0x7f, 0xff are NaN
  }
}

void put_u16(std::vector<uint8_t>& buf, size_t at, uint16_t v) {
  buf[at] = static_cast<uint8_t>(v & 0xff);
  buf[at + 1] = static_cast<uint8_t>(v >> 8);
}
void put_f32(std::vector<uint8_t>& buf, size_t at, float f) { std::memcpy(&buf[at], &f, 4); }

// Gathers `slots` (plus invalid ones, which must come back as zero rows) and returns the
// rows of the valid slots.
std::vector<uint16_t> gather(const PagedCache& cache, const std::vector<int64_t>& slots) {
  std::vector<int64_t> all = slots;
  const int64_t n_valid = static_cast<int64_t>(slots.size());
  for (int64_t bad : {int64_t{-1}, cache.num_slots(), int64_t{-123456789}}) all.push_back(bad);
  const int d_qk = cache.d_qk();
  std::vector<uint16_t> out(all.size() * d_qk, test::bf16_nan());
  GatherCacheArgs g;
  g.cache = cache;
  g.slots = make_view(all.data(), DType::i64, {static_cast<int64_t>(all.size())});
  g.out = make_view(out.data(), DType::bf16, {static_cast<int64_t>(all.size()), d_qk});
  gather_cache(g);
  for (size_t i = n_valid * d_qk; i < out.size(); ++i) EXPECT_EQ(out[i], 0u) << "invalid slot row, element " << i;
  out.resize(n_valid * d_qk);
  return out;
}

TEST(Formats, LayoutConstantsMatchSpec) {
  EXPECT_EQ(DsMlaLayout::bytes_per_token, 656);
  EXPECT_EQ(DsMlaLayout::scale_offset, 512);
  EXPECT_EQ(DsMlaLayout::rope_offset, 528);
  EXPECT_EQ(DsMlaLayout::tile, 128);
  EXPECT_EQ(Model1Layout::bytes_per_token, 584);
  EXPECT_EQ(Model1Layout::rope_offset, 448);
  EXPECT_EQ(Model1Layout::tile, 64);
  EXPECT_EQ(Model1Layout::data_offset(5), 5 * 576);
  EXPECT_EQ(Model1Layout::scales_offset(64, 5), 64 * 576 + 5 * 8);
  EXPECT_EQ(bytes_per_token(CacheFormat::bf16, 576), 1152);
  EXPECT_EQ(bytes_per_token(CacheFormat::fp16, 512), 1024);
  EXPECT_EQ(bytes_per_token(CacheFormat::fp8_e4m3, 576), 576);
  EXPECT_EQ(bytes_per_token(CacheFormat::fp8_ds_mla, 576), 656);
  EXPECT_EQ(bytes_per_token(CacheFormat::fp8_model1, 512), 584);
}

TEST(Formats, Model1AlignedPageBytes) {
  // page_size * 584 rounded up to a multiple of 576.
  EXPECT_EQ(Model1Layout::aligned_page_bytes(1), 1152);
  EXPECT_EQ(Model1Layout::aligned_page_bytes(2), 1728);
  EXPECT_EQ(Model1Layout::aligned_page_bytes(3), 2304);
  EXPECT_EQ(Model1Layout::aligned_page_bytes(64), 37440);
  EXPECT_EQ(Model1Layout::aligned_page_bytes(72), 42048);  // 72 * 584 is already a multiple
  EXPECT_EQ(Model1Layout::aligned_page_bytes(256), 149760);
}

TEST(Formats, DsMlaPageByHand) {
  const int64_t num_blocks = 3, page_size = 4;
  const int64_t page_stride = 4 * 656 + 48;  // larger than a page: the gap holds garbage
  std::vector<uint8_t> buf = garbage_bytes(num_blocks * page_stride);
  struct Token { int64_t block, offset; std::vector<uint8_t> codes; float scales[4]; std::vector<uint16_t> rope; };
  std::vector<Token> tokens;
  for (int64_t block : {2, 0}) {
    for (int64_t offset : {3, 0, 1}) {
      Token t{block, offset, {}, {}, test::random_bf16(64, -4.0f, 4.0f)};
      const size_t base = block * page_stride + offset * 656;
      for (int i = 0; i < 512; ++i) {
        t.codes.push_back(random_e4m3_code());
        buf[base + i] = t.codes.back();
      }
      for (int s = 0; s < 4; ++s) {
        t.scales[s] = test::uniform(1e-3f, 3.0f);  // any positive float, as vLLM's amax/448
        put_f32(buf, base + 512 + 4 * s, t.scales[s]);
      }
      for (int i = 0; i < 64; ++i) put_u16(buf, base + 528 + 2 * i, t.rope[i]);
      tokens.push_back(t);
    }
  }
  PagedCache cache;
  cache.format = CacheFormat::fp8_ds_mla;
  cache.data = make_strided_view(buf.data(), DType::u8, {num_blocks, page_size, 656}, {page_stride, 656, 1});
  std::vector<int64_t> slots;
  for (const Token& t : tokens) slots.push_back(t.block * page_size + t.offset);
  const std::vector<uint16_t> out = gather(cache, slots);
  for (size_t n = 0; n < tokens.size(); ++n) {
    const Token& t = tokens[n];
    for (int i = 0; i < 512; ++i)
      ASSERT_EQ(out[n * 576 + i], float_to_bf16_bits(e4m3_to_float(t.codes[i]) * t.scales[i / 128]))
          << "token " << n << " latent " << i;
    for (int i = 0; i < 64; ++i) ASSERT_EQ(out[n * 576 + 512 + i], t.rope[i]) << "token " << n << " rope " << i;
  }
}

TEST(Formats, Model1PageByHand) {
  const int64_t num_blocks = 3, page_size = 3;
  const int64_t page_stride = 2304;  // 3 * 584 = 1752 rounded up to a multiple of 576
  std::vector<uint8_t> buf = garbage_bytes(num_blocks * page_stride);
  struct Token { int64_t block, offset; std::vector<uint8_t> codes, scale_bytes; std::vector<uint16_t> rope; };
  std::vector<Token> tokens;
  for (int64_t block : {1, 2}) {
    for (int64_t offset : {2, 0, 1}) {
      Token t{block, offset, {}, {}, test::random_bf16(64, -4.0f, 4.0f)};
      const size_t data = block * page_stride + offset * 576;
      const size_t scales = block * page_stride + 3 * 576 + offset * 8;
      for (int i = 0; i < 448; ++i) {
        t.codes.push_back(random_e4m3_code());
        buf[data + i] = t.codes.back();
      }
      for (int i = 0; i < 64; ++i) put_u16(buf, data + 448 + 2 * i, t.rope[i]);
      for (int s = 0; s < 7; ++s) {
        t.scale_bytes.push_back(static_cast<uint8_t>(test::uniform_int(100, 140)));
        buf[scales + s] = t.scale_bytes.back();
      }
      buf[scales + 7] = 0;
      tokens.push_back(t);
    }
  }
  PagedCache cache;
  cache.format = CacheFormat::fp8_model1;
  cache.data = make_strided_view(buf.data(), DType::u8, {num_blocks, page_size, 584}, {page_stride, 584, 1});
  std::vector<int64_t> slots;
  for (const Token& t : tokens) slots.push_back(t.block * page_size + t.offset);
  const std::vector<uint16_t> out = gather(cache, slots);
  for (size_t n = 0; n < tokens.size(); ++n) {
    const Token& t = tokens[n];
    for (int i = 0; i < 448; ++i) {
      const float scale = std::ldexp(1.0f, t.scale_bytes[i / 64] - 127);
      ASSERT_EQ(out[n * 512 + i], float_to_bf16_bits(e4m3_to_float(t.codes[i]) * scale))
          << "token " << n << " latent " << i;
    }
    for (int i = 0; i < 64; ++i) ASSERT_EQ(out[n * 512 + 448 + i], t.rope[i]) << "token " << n << " rope " << i;
  }
}

TEST(Formats, Fp8E4m3PageByHand) {
  const int64_t num_blocks = 2, page_size = 5, page_stride = 5 * 576 + 64;
  std::vector<uint8_t> buf = garbage_bytes(num_blocks * page_stride);
  PagedCache cache;
  cache.format = CacheFormat::fp8_e4m3;
  cache.k_scale = 0.0371f;
  cache.data = make_strided_view(buf.data(), DType::fp8_e4m3, {num_blocks, page_size, 1, 576},
                                 {page_stride, 576, 576, 1});
  std::vector<int64_t> slots = {9, 0, 7};
  for (int64_t s : slots)
    for (int i = 0; i < 576; ++i) buf[(s / 5) * page_stride + (s % 5) * 576 + i] = random_e4m3_code();
  const std::vector<uint16_t> out = gather(cache, slots);
  for (size_t n = 0; n < slots.size(); ++n) {
    const size_t base = (slots[n] / 5) * page_stride + (slots[n] % 5) * 576;
    for (int i = 0; i < 576; ++i)
      ASSERT_EQ(out[n * 576 + i], float_to_bf16_bits(e4m3_to_float(buf[base + i]) * 0.0371f)) << n << " " << i;
  }
}

TEST(Formats, Bf16AndFp16PagesByHand) {
  for (CacheFormat f : {CacheFormat::bf16, CacheFormat::fp16}) {
    const int64_t num_blocks = 2, page_size = 3, d_qk = 512;
    const int64_t page_stride = 3 * 1024 + 32;  // bytes
    std::vector<uint8_t> buf = garbage_bytes(num_blocks * page_stride);
    PagedCache cache;
    cache.format = f;
    cache.data = make_strided_view(buf.data(), f == CacheFormat::bf16 ? DType::bf16 : DType::f16,
                                   {num_blocks, page_size, d_qk}, {page_stride / 2, d_qk, 1});
    std::vector<int64_t> slots = {4, 2, 0};
    std::vector<std::vector<uint16_t>> rows;
    for (int64_t s : slots) {
      rows.push_back(test::random_bf16(d_qk, -2.0f, 2.0f));
      for (int i = 0; i < d_qk; ++i) {
        // A bf16 value is exact in fp16 when it is in fp16's normal range, as these are
        // (bar zero, which is exact anyway).
        uint16_t v = rows.back()[i];
        if (f == CacheFormat::fp16) {
          if (std::fabs(bf16_bits_to_float(v)) < 1e-4f) v = rows.back()[i] = 0x3f80;
          v = float_to_fp16_bits(bf16_bits_to_float(v));
        }
        put_u16(buf, (s / 3) * page_stride + (s % 3) * 1024 + 2 * i, v);
      }
    }
    const std::vector<uint16_t> out = gather(cache, slots);
    for (size_t n = 0; n < slots.size(); ++n)
      for (int i = 0; i < d_qk; ++i) ASSERT_EQ(out[n * d_qk + i], rows[n][i]) << format_name(f) << " " << n << " " << i;
  }
}

}  // namespace
}  // namespace smla
