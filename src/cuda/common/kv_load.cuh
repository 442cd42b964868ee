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

// Chunk c (values 8c .. 8c+7) of a token's key row, dequantized. `tok` points at the token
// (its head row for element formats); `page` at its page; `off` is the token's page offset.
__device__ __forceinline__ uint4 load_key_chunk(const KeySetParams& ks, const uint8_t* page, const uint8_t* tok,
                                                int off, int c, bool f16) {
  switch (ks.format) {
    case static_cast<int>(CacheFormat::fp8_ds_mla): {
      using L = DsMlaLayout;
      if (c < L::d_latent / 8) {
        uint2 raw = __ldg(reinterpret_cast<const uint2*>(tok + L::latent_offset + 8 * c));
        float s = __ldg(reinterpret_cast<const float*>(tok + L::scale_offset) + (8 * c) / L::tile);
        return dequant8_e4m3(raw, s, f16);
      }
      return __ldg(reinterpret_cast<const uint4*>(tok + L::rope_offset) + (c - L::d_latent / 8));
    }
    case static_cast<int>(CacheFormat::fp8_model1): {
      using L = Model1Layout;
      if (c < L::d_latent / 8) {
        uint2 raw = __ldg(reinterpret_cast<const uint2*>(tok + 8 * c));
        uint8_t sb = __ldg(page + L::scales_offset(ks.page_size, off) + (8 * c) / L::tile);
        float s = sb == 0 ? 5.877471754111438e-39f : __uint_as_float(static_cast<uint32_t>(sb) << 23);
        return dequant8_e4m3(raw, s, f16);
      }
      return __ldg(reinterpret_cast<const uint4*>(tok + L::rope_offset) + (c - L::d_latent / 8));
    }
    case static_cast<int>(CacheFormat::fp8_e4m3): {
      uint2 raw = __ldg(reinterpret_cast<const uint2*>(tok + 8 * c));
      return dequant8_e4m3(raw, ks.k_scale, f16);
    }
    default:  // bf16 / fp16 rows, stored as the kernel's element type
      return __ldg(reinterpret_cast<const uint4*>(tok) + c);
  }
}

__device__ __forceinline__ int sparse_len(const KeySetParams& ks, int req) {
  if (ks.topk_length == nullptr) return ks.topk;
  int v = __ldg(ks.topk_length + req * ks.tl_st);
  return v < 0 ? 0 : (v > ks.topk ? ks.topk : v);
}

}  // namespace smla::cuda
