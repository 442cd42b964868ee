#include "reference/kv_row.h"

#include <cstring>

#include "smla/numeric.h"

namespace smla::ref {

const uint8_t* token_address(const PagedCache& c, int64_t slot, int head) {
  const int ps = c.page_size();
  const int64_t block = slot / ps, off = slot % ps;
  const uint8_t* page = static_cast<const uint8_t*>(c.data.data) + block * c.page_stride_bytes();
  switch (c.format) {
    case CacheFormat::fp8_ds_mla: return page + off * DsMlaLayout::bytes_per_token;
    case CacheFormat::fp8_model1: return page + Model1Layout::data_offset(off);
    default: {
      const int64_t es = static_cast<int64_t>(dtype_size(c.data.dtype));
      return page + (off * c.h_kv() + head) * c.row_elems() * es;
    }
  }
}

static uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

void dequant_key_row(const PagedCache& c, int64_t slot, int head, float* dst) {
  const uint8_t* t = token_address(c, slot, head);
  switch (c.format) {
    case CacheFormat::bf16:
      for (int i = 0; i < c.d_qk(); ++i) dst[i] = bf16_bits_to_float(load_u16(t + 2 * i));
      break;
    case CacheFormat::fp16:
      for (int i = 0; i < c.d_qk(); ++i) dst[i] = fp16_bits_to_float(load_u16(t + 2 * i));
      break;
    case CacheFormat::fp8_e4m3:
      for (int i = 0; i < c.d_qk(); ++i) dst[i] = e4m3_to_float(t[i]) * c.k_scale;
      break;
    case CacheFormat::fp8_ds_mla: {
      using L = DsMlaLayout;
      float scales[L::num_scales];
      std::memcpy(scales, t + L::scale_offset, sizeof(scales));
      for (int i = 0; i < L::d_latent; ++i) dst[i] = e4m3_to_float(t[L::latent_offset + i]) * scales[i / L::tile];
      for (int i = 0; i < kDRope; ++i) dst[L::d_latent + i] = bf16_bits_to_float(load_u16(t + L::rope_offset + 2 * i));
      break;
    }
    case CacheFormat::fp8_model1: {
      using L = Model1Layout;
      const int ps = c.page_size();
      const int64_t off = slot % ps;
      const uint8_t* scale_bytes = t - L::data_offset(off) + L::scales_offset(ps, off);
      for (int i = 0; i < L::d_latent; ++i) dst[i] = e4m3_to_float(t[i]) * ue8m0_to_float(scale_bytes[i / L::tile]);
      for (int i = 0; i < kDRope; ++i) dst[L::d_latent + i] = bf16_bits_to_float(load_u16(t + L::rope_offset + 2 * i));
      break;
    }
  }
}

}  // namespace smla::ref
