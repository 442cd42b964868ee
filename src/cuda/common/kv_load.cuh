// Loading key rows of any cache format into 16-bit values on the device: the one device-side
// reader of SPEC §2's layouts (attention kernels and gather_cache both use it).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "cuda/attention/attention_params.h"
#include "smla/formats.h"

namespace smla::cuda {

__device__ __forceinline__ uint32_t to16x2(float a, float b, bool f16) {
  if (f16) {
    __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<uint32_t*>(&h);
  }
  __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<uint32_t*>(&h);
}

// 8 e4m3 bytes times a scale -> 8 sixteen-bit values (one 16-byte shared-memory store).
__device__ __forceinline__ uint4 dequant8_e4m3(uint2 raw, float scale, bool f16) {
  uint4 r;
  uint32_t* o = reinterpret_cast<uint32_t*>(&r);
  const uint32_t w[2] = {raw.x, raw.y};
#pragma unroll
  for (int i = 0; i < 2; ++i) {
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      __nv_fp8x2_storage_t pair = static_cast<__nv_fp8x2_storage_t>((w[i] >> (16 * k)) & 0xffffu);
      __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3);
      float2 f = __half22float2(*reinterpret_cast<__half2*>(&h));
      o[2 * i + k] = to16x2(f.x * scale, f.y * scale, f16);
    }
  }
  return r;
}

// Chunk c (values 8c .. 8c+7) of a token's key row, dequantized to 16-bit values. `tok` points at
// the token's bytes (its head row for element formats), in global or shared memory;
// `model1_scales` at its 8 UE8M0 bytes (fp8_model1 only).
__device__ __forceinline__ uint4 dequant_chunk(int format, const uint8_t* tok, const uint8_t* model1_scales, int c,
                                               float k_scale, bool f16) {
  switch (format) {
    case static_cast<int>(CacheFormat::fp8_ds_mla): {
      using L = DsMlaLayout;
      if (c < L::d_latent / 8) {
        const uint2 raw = *reinterpret_cast<const uint2*>(tok + L::latent_offset + 8 * c);
        const float s = reinterpret_cast<const float*>(tok + L::scale_offset)[(8 * c) / L::tile];
        return dequant8_e4m3(raw, s, f16);
      }
      return reinterpret_cast<const uint4*>(tok + L::rope_offset)[c - L::d_latent / 8];
    }
    case static_cast<int>(CacheFormat::fp8_model1): {
      using L = Model1Layout;
      if (c < L::d_latent / 8) {
        const uint2 raw = *reinterpret_cast<const uint2*>(tok + 8 * c);
        const uint8_t sb = model1_scales[(8 * c) / L::tile];
        const float s = sb == 0 ? 5.877471754111438e-39f : __uint_as_float(static_cast<uint32_t>(sb) << 23);
        return dequant8_e4m3(raw, s, f16);
      }
      return reinterpret_cast<const uint4*>(tok + L::rope_offset)[c - L::d_latent / 8];
    }
    case static_cast<int>(CacheFormat::fp8_e4m3):
      return dequant8_e4m3(*reinterpret_cast<const uint2*>(tok + 8 * c), k_scale, f16);
    default:  // bf16 / fp16 rows, stored as the kernel's element type
      return reinterpret_cast<const uint4*>(tok)[c];
  }
}

// Bytes of one token's row as the attention kernel stages it (fp8_model1: data + scales).
__device__ __host__ __forceinline__ int key_row_bytes(const KeySetParams& ks) {
  switch (ks.format) {
    case static_cast<int>(CacheFormat::fp8_ds_mla): return DsMlaLayout::bytes_per_token;
    case static_cast<int>(CacheFormat::fp8_model1): return Model1Layout::data_bytes + 16;
    case static_cast<int>(CacheFormat::fp8_e4m3): return ks.row_elems;
    default: return 2 * ks.row_elems;
  }
}

// Byte offset of a token (head row `kvh` for element formats) within its page.
__device__ __forceinline__ int64_t token_offset(const KeySetParams& ks, int off, int kvh) {
  switch (ks.format) {
    case static_cast<int>(CacheFormat::fp8_ds_mla): return static_cast<int64_t>(off) * DsMlaLayout::bytes_per_token;
    case static_cast<int>(CacheFormat::fp8_model1): return Model1Layout::data_offset(off);
    default:
      return (static_cast<int64_t>(off) * ks.h_kv + kvh) * ks.row_elems *
             (ks.format == static_cast<int>(CacheFormat::fp8_e4m3) ? 1 : 2);
  }
}

// Chunk c of the key row of slot (page, off) read straight from global memory.
__device__ __forceinline__ uint4 load_key_chunk(const KeySetParams& ks, const uint8_t* page, int off, int c, bool f16) {
  return dequant_chunk(ks.format, page + token_offset(ks, off, 0),
                       page + Model1Layout::scales_offset(ks.page_size, off), c, ks.k_scale, f16);
}

__device__ __forceinline__ int sparse_len(const KeySetParams& ks, int req) {
  if (ks.topk_length == nullptr) return ks.topk;
  int v = __ldg(ks.topk_length + req * ks.tl_st);
  return v < 0 ? 0 : (v > ks.topk ? ks.topk : v);
}

}  // namespace smla::cuda
