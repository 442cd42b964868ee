#include "smla/formats.h"

#include <cstring>

namespace smla {

const char* format_name(CacheFormat f) {
  switch (f) {
    case CacheFormat::bf16: return "bf16";
    case CacheFormat::fp16: return "fp16";
    case CacheFormat::fp8_e4m3: return "fp8_e4m3";
    case CacheFormat::fp8_ds_mla: return "fp8_ds_mla";
    case CacheFormat::fp8_model1: return "fp8_model1";
  }
  return "?";
}

bool parse_format(const char* name, CacheFormat* out) {
  for (CacheFormat f : {CacheFormat::bf16, CacheFormat::fp16, CacheFormat::fp8_e4m3,
                        CacheFormat::fp8_ds_mla, CacheFormat::fp8_model1}) {
    if (std::strcmp(name, format_name(f)) == 0) {
      *out = f;
      return true;
    }
  }
  return false;
}

bool is_packed_format(CacheFormat f) {
  return f == CacheFormat::fp8_ds_mla || f == CacheFormat::fp8_model1;
}

int bytes_per_token(CacheFormat f, int d_qk) {
  switch (f) {
    case CacheFormat::bf16: case CacheFormat::fp16: return 2 * d_qk;
    case CacheFormat::fp8_e4m3: return d_qk;
    case CacheFormat::fp8_ds_mla: return DsMlaLayout::bytes_per_token;
    case CacheFormat::fp8_model1: return Model1Layout::bytes_per_token;
  }
  return 0;
}

int latent_dim(CacheFormat f, int d_qk) {
  (void)f;
  return d_qk - kDRope;
}

int PagedCache::d_qk() const {
  switch (format) {
    case CacheFormat::fp8_ds_mla: return DsMlaLayout::d_qk;
    case CacheFormat::fp8_model1: return Model1Layout::d_qk;
    default: return static_cast<int>(row_elems());
  }
}

}  // namespace smla
