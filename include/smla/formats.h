// KV-cache formats (SPEC §2): every byte offset is defined here once and used by the
// writers, the readers, the CPU reference, the CUDA kernels and the tests.
#pragma once

#include <cstdint>

#include "smla/tensor.h"

namespace smla {

enum class CacheFormat : uint8_t { bf16, fp16, fp8_e4m3, fp8_ds_mla, fp8_model1 };

const char* format_name(CacheFormat f);
bool parse_format(const char* name, CacheFormat* out);

inline constexpr int kDv = 512;     // value width, every model
inline constexpr int kDRope = 64;   // RoPE part of a key row

// fp8_ds_mla (V3.2): one token = 656 bytes.
struct DsMlaLayout {
  static constexpr int d_qk = 576;
  static constexpr int d_latent = 512;
  static constexpr int tile = 128;                   // values per float32 scale
  static constexpr int num_scales = d_latent / tile; // 4
  static constexpr int latent_offset = 0;            // 512 e4m3
  static constexpr int scale_offset = 512;           // 4 float32
  static constexpr int rope_offset = 528;            // 64 bf16
  static constexpr int bytes_per_token = 656;
};

// fp8_model1 (V4): per page, page_size x 576 bytes of [448 e4m3 | 64 bf16], then
// page_size x 8 bytes of [7 UE8M0 scales | 1 zero pad].
struct Model1Layout {
  static constexpr int d_qk = 512;
  static constexpr int d_latent = 448;
  static constexpr int tile = 64;                    // values per UE8M0 scale
  static constexpr int num_scales = d_latent / tile; // 7
  static constexpr int data_bytes = 576;             // per token, first region
  static constexpr int rope_offset = 448;            // within a token's data bytes
  static constexpr int scale_bytes = 8;              // per token, second region
  static constexpr int bytes_per_token = data_bytes + scale_bytes;  // 584
  static constexpr int page_align = 576;             // writers round the page stride up to this

  static constexpr int64_t data_offset(int64_t token_in_page) { return token_in_page * data_bytes; }
  static constexpr int64_t scales_offset(int page_size, int64_t token_in_page) {
    return static_cast<int64_t>(page_size) * data_bytes + token_in_page * scale_bytes;
  }
  // The page stride a writer allocates: page_size * 584 rounded up to a multiple of 576.
  static constexpr int64_t aligned_page_bytes(int page_size) {
    int64_t b = static_cast<int64_t>(page_size) * bytes_per_token;
    return (b + page_align - 1) / page_align * page_align;
  }
};

// Bytes one token occupies in a page (for element formats: per head row, times h_kv).
int bytes_per_token(CacheFormat f, int d_qk);
// d_qk implied by a format's per-token byte count (packed formats) or row width.
bool is_packed_format(CacheFormat f);  // fp8_ds_mla, fp8_model1: uint8 rows of fixed layout
int latent_dim(CacheFormat f, int d_qk);  // d_qk - 64

// A paged KV cache. `data` is [num_blocks, page_size, h_kv, row] (or 3-D without h_kv,
// meaning h_kv = 1) where row is d_qk elements for bf16/fp16/fp8_e4m3 and the format's
// bytes_per_token (uint8) for the packed formats. Dims 1..3 are packed; the page stride
// (stride[0]) is free, so pages are never assumed contiguous.
struct PagedCache {
  TensorView data;
  CacheFormat format = CacheFormat::bf16;
  float k_scale = 1.0f;  // fp8_e4m3 only: dequantized = float(q) * k_scale

  int64_t num_blocks() const { return data.shape[0]; }
  int page_size() const { return static_cast<int>(data.shape[1]); }
  int h_kv() const { return data.ndim == 4 ? static_cast<int>(data.shape[2]) : 1; }
  int64_t row_elems() const { return data.shape[data.ndim - 1]; }
  int d_qk() const;
  int64_t page_stride_bytes() const { return data.stride[0] * static_cast<int64_t>(dtype_size(data.dtype)); }
  int64_t num_slots() const { return num_blocks() * page_size(); }
};

}  // namespace smla
