// write_cache and gather_cache on the CPU (SPEC §2, §4.5): the writer side of the byte
// layouts in formats.h; the reader side is dequant_key_row.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "reference/kv_row.h"
#include "reference/parallel.h"
#include "reference/reference.h"
#include "smla/numeric.h"

namespace smla::ref {

namespace {

bool valid_slot(int64_t slot, const PagedCache& c) { return slot >= 0 && slot < c.num_slots(); }

// Tokens whose row is written, one per slot. Rows run in parallel, so two tokens naming the
// same slot would interleave their bytes; the last of them in token order wins instead.
std::vector<int64_t> writing_tokens(const WriteCacheArgs& a) {
  const int64_t T = a.slot_mapping.shape[0];
  auto slot_of = [&](int64_t t) { return *a.slot_mapping.at<int64_t>({t}); };
  std::vector<int64_t> tokens;
  for (int64_t t = 0; t < T; ++t)
    if (valid_slot(slot_of(t), a.cache)) tokens.push_back(t);
  std::stable_sort(tokens.begin(), tokens.end(), [&](int64_t x, int64_t y) { return slot_of(x) < slot_of(y); });
  std::vector<int64_t> winners;
  for (size_t i = 0; i < tokens.size(); ++i)
    if (i + 1 == tokens.size() || slot_of(tokens[i + 1]) != slot_of(tokens[i])) winners.push_back(tokens[i]);
  return winners;
}

void store_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, sizeof(v)); }

float tile_amax(const float* x, int n) {
  float m = 0.0f;
  for (int i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}

// bits: the bf16 key row [latent | rope]; row: the same values as floats.
void write_row(const PagedCache& c, int64_t slot, const uint16_t* bits, const float* row) {
  const int d_qk = c.d_qk();
  const uint16_t* rope_bits = bits + (d_qk - kDRope);
  uint8_t* dst = const_cast<uint8_t*>(token_address(c, slot));
  switch (c.format) {
    case CacheFormat::bf16:
      std::memcpy(dst, bits, d_qk * sizeof(uint16_t));
      break;
    case CacheFormat::fp16:
      for (int i = 0; i < d_qk; ++i) store_u16(dst + 2 * i, float_to_fp16_bits(row[i]));
      break;
    case CacheFormat::fp8_e4m3:
      for (int i = 0; i < d_qk; ++i) dst[i] = float_to_e4m3(row[i] / c.k_scale);
      break;
    case CacheFormat::fp8_ds_mla: {
      using L = DsMlaLayout;
      for (int s = 0; s < L::num_scales; ++s) {
        const float* x = row + s * L::tile;
        const float scale = std::ldexp(1.0f, pow2_scale_exponent(tile_amax(x, L::tile)));
        std::memcpy(dst + L::scale_offset + s * sizeof(float), &scale, sizeof(float));
        for (int i = 0; i < L::tile; ++i) dst[L::latent_offset + s * L::tile + i] = float_to_e4m3(x[i] / scale);
      }
      std::memcpy(dst + L::rope_offset, rope_bits, kDRope * sizeof(uint16_t));
      break;
    }
    case CacheFormat::fp8_model1: {
      using L = Model1Layout;
      const int ps = c.page_size();
      const int64_t off = slot % ps;
      uint8_t* scales = dst - L::data_offset(off) + L::scales_offset(ps, off);
      for (int s = 0; s < L::num_scales; ++s) {
        const float* x = row + s * L::tile;
        const int byte = std::clamp(127 + pow2_scale_exponent(tile_amax(x, L::tile)), 0, 254);
        scales[s] = static_cast<uint8_t>(byte);
        // Quantize with the scale the reader will decode, even where the byte was clamped.
        const float scale = ue8m0_to_float(static_cast<uint8_t>(byte));
        for (int i = 0; i < L::tile; ++i) dst[s * L::tile + i] = float_to_e4m3(x[i] / scale);
      }
      std::memset(scales + L::num_scales, 0, L::scale_bytes - L::num_scales);
      std::memcpy(dst + L::rope_offset, rope_bits, kDRope * sizeof(uint16_t));
      break;
    }
  }
}

}  // namespace

void write_cache(const WriteCacheArgs& a) {
  const PagedCache& c = a.cache;
  const int d_qk = c.d_qk(), d_latent = d_qk - kDRope;
  const std::vector<int64_t> tokens = writing_tokens(a);
  parallel_for(static_cast<int64_t>(tokens.size()), [&](int64_t i) {
    const int64_t t = tokens[i];
    const uint16_t* latent = a.kv_c.at<uint16_t>({t, 0});
    const uint16_t* rope = a.k_pe.at<uint16_t>({t, 0});
    std::vector<uint16_t> bits(d_qk);
    std::copy(latent, latent + d_latent, bits.begin());
    std::copy(rope, rope + kDRope, bits.begin() + d_latent);
    std::vector<float> row(d_qk);
    for (int j = 0; j < d_qk; ++j) row[j] = bf16_bits_to_float(bits[j]);
    write_row(c, *a.slot_mapping.at<int64_t>({t}), bits.data(), row.data());
  });
}

void gather_cache(const GatherCacheArgs& a) {
  const PagedCache& c = a.cache;
  const int d_qk = c.d_qk();
  parallel_for(a.slots.shape[0], [&](int64_t n) {
    const int64_t slot = a.slots.dtype == DType::i32 ? *a.slots.at<int32_t>({n}) : *a.slots.at<int64_t>({n});
    uint16_t* out = a.out.at<uint16_t>({n, 0});
    if (!valid_slot(slot, c)) {
      std::fill(out, out + d_qk, uint16_t{0});
      return;
    }
    std::vector<float> row(d_qk);
    dequant_key_row(c, slot, 0, row.data());
    for (int i = 0; i < d_qk; ++i) out[i] = float_to_bf16_bits(row[i]);
  });
}

}  // namespace smla::ref
