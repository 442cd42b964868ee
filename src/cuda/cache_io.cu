// Cache writers and readers on the device. Quantization uses the same scalar functions as
// the CPU writer (smla/numeric.h), so both produce identical bytes.
#include <cuda_bf16.h>

#include "cuda/common/kv_load.cuh"
#include "cuda/common/cuda_check.h"
#include "cuda/cuda_backend.h"
#include "smla/numeric.h"

namespace smla::cuda {

namespace {

struct WriteParams {
  const uint16_t* kv_c;
  int64_t kv_c_st;
  const uint16_t* k_pe;
  int64_t k_pe_st;
  const int64_t* slots;
  int64_t slots_st;
  uint8_t* base;
  int64_t page_stride, num_blocks;
  int page_size, format, d_qk;
  float k_scale;
  int64_t T;
};

// Value i of token t's key row (latent then RoPE), as float.
__device__ __forceinline__ float key_value(const WriteParams& p, int64_t t, int i, int d_latent) {
  const uint16_t b = i < d_latent ? p.kv_c[t * p.kv_c_st + i] : p.k_pe[t * p.k_pe_st + (i - d_latent)];
  return bf16_bits_to_float(b);
}

__device__ __forceinline__ uint8_t scale_byte(int e) {
  const int b = 127 + e;
  return static_cast<uint8_t>(b < 0 ? 0 : (b > 254 ? 254 : b));
}

// One CTA per token; for the packed formats warp w quantizes tiles w, w + 8, ...
__global__ void write_cache_kernel(const WriteParams p) {
  const int64_t t = blockIdx.x;
  const int64_t slot = p.slots[t * p.slots_st];
  if (slot < 0 || slot >= p.num_blocks * p.page_size) return;
  const int64_t blk = slot / p.page_size;
  const int off = static_cast<int>(slot % p.page_size);
  uint8_t* page = p.base + blk * p.page_stride;
  const int d_latent = p.d_qk - kDRope;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  switch (p.format) {
    case static_cast<int>(CacheFormat::bf16):
    case static_cast<int>(CacheFormat::fp16): {
      uint16_t* row = reinterpret_cast<uint16_t*>(page) + static_cast<int64_t>(off) * p.d_qk;
      for (int i = threadIdx.x; i < p.d_qk; i += blockDim.x) {
        const float v = key_value(p, t, i, d_latent);
        row[i] = p.format == static_cast<int>(CacheFormat::bf16) ? float_to_bf16_bits(v) : float_to_fp16_bits(v);
      }
      break;
    }
    case static_cast<int>(CacheFormat::fp8_e4m3): {
      uint8_t* row = page + static_cast<int64_t>(off) * p.d_qk;
      for (int i = threadIdx.x; i < p.d_qk; i += blockDim.x) row[i] = float_to_e4m3(key_value(p, t, i, d_latent) / p.k_scale);
      break;
    }
    case static_cast<int>(CacheFormat::fp8_ds_mla):
    case static_cast<int>(CacheFormat::fp8_model1): {
      const bool ds = p.format == static_cast<int>(CacheFormat::fp8_ds_mla);
      const int tile = ds ? DsMlaLayout::tile : Model1Layout::tile;
      const int n_tiles = d_latent / tile;
      uint8_t* tok = ds ? page + static_cast<int64_t>(off) * DsMlaLayout::bytes_per_token
                        : page + Model1Layout::data_offset(off);
      uint8_t* scales = ds ? tok + DsMlaLayout::scale_offset : page + Model1Layout::scales_offset(p.page_size, off);
      for (int tl = warp; tl < n_tiles; tl += blockDim.x / 32) {
        float amax = 0.f;
        for (int i = lane; i < tile; i += 32) amax = fmaxf(amax, fabsf(key_value(p, t, tl * tile + i, d_latent)));
        for (int s = 16; s > 0; s >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, s));
        int e = pow2_scale_exponent(amax);
        e = e < -127 ? -127 : (e > 127 ? 127 : e);
        const float scale = ldexpf(1.0f, e);
        for (int i = lane; i < tile; i += 32)
          tok[tl * tile + i] = float_to_e4m3(key_value(p, t, tl * tile + i, d_latent) / scale);
        if (lane == 0) {
          if (ds) reinterpret_cast<float*>(scales)[tl] = scale;
          else scales[tl] = scale_byte(e);
        }
      }
      if (!ds && threadIdx.x == 0) scales[Model1Layout::num_scales] = 0;
      uint16_t* rope = reinterpret_cast<uint16_t*>(tok + (ds ? DsMlaLayout::rope_offset : Model1Layout::rope_offset));
      for (int i = threadIdx.x; i < kDRope; i += blockDim.x) rope[i] = p.k_pe[t * p.k_pe_st + i];
      break;
    }
  }
}

struct GatherParams {
  KeySetParams ks;
  const void* slots;
  bool slots64;
  int64_t slots_st;
  uint16_t* out;
  int64_t out_st;
  int64_t N;
  int d_qk;
};

__global__ void gather_cache_kernel(const GatherParams p) {
  const int d_chunks = p.d_qk / 8;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.N * d_chunks) return;
  const int64_t r = i / d_chunks;
  const int c = static_cast<int>(i % d_chunks);
  const int64_t slot = p.slots64 ? static_cast<const int64_t*>(p.slots)[r * p.slots_st]
                                 : static_cast<const int32_t*>(p.slots)[r * p.slots_st];
  uint4 v = make_uint4(0, 0, 0, 0);
  if (slot >= 0 && slot < p.ks.num_blocks * p.ks.page_size) {
    const int64_t blk = slot / p.ks.page_size;
    const int off = static_cast<int>(slot % p.ks.page_size);
    const uint8_t* page = p.ks.base + blk * p.ks.page_stride;
    v = load_key_chunk(p.ks, page, off, c, false);
    if (p.ks.format == static_cast<int>(CacheFormat::fp16)) {  // fp16 rows -> bf16 values
      uint16_t* h = reinterpret_cast<uint16_t*>(&v);
#pragma unroll
      for (int k = 0; k < 8; ++k) h[k] = float_to_bf16_bits(fp16_bits_to_float(h[k]));
    }
  }
  *reinterpret_cast<uint4*>(p.out + r * p.out_st + 8 * c) = v;
}

}  // namespace

void write_cache(const WriteCacheArgs& a, const Exec& exec) {
  WriteParams p;
  p.kv_c = a.kv_c.ptr<const uint16_t>();
  p.kv_c_st = a.kv_c.stride[0];
  p.k_pe = a.k_pe.ptr<const uint16_t>();
  p.k_pe_st = a.k_pe.stride[0];
  p.slots = a.slot_mapping.ptr<const int64_t>();
  p.slots_st = a.slot_mapping.stride[0];
  p.base = static_cast<uint8_t*>(a.cache.data.data);
  p.page_stride = a.cache.page_stride_bytes();
  p.num_blocks = a.cache.num_blocks();
  p.page_size = a.cache.page_size();
  p.format = static_cast<int>(a.cache.format);
  p.d_qk = a.cache.d_qk();
  p.k_scale = a.cache.k_scale;
  p.T = a.kv_c.shape[0];
  if (p.T == 0) return;
  write_cache_kernel<<<static_cast<unsigned>(p.T), 256, 0, as_stream(exec.stream)>>>(p);
  SMLA_CUDA_CHECK_LAUNCH();
}

void gather_cache(const GatherCacheArgs& a, const Exec& exec) {
  GatherParams p;
  const PagedCache& c = a.cache;
  p.ks.base = static_cast<const uint8_t*>(c.data.data);
  p.ks.page_stride = c.page_stride_bytes();
  p.ks.num_blocks = c.num_blocks();
  p.ks.page_size = c.page_size();
  p.ks.format = static_cast<int>(c.format);
  p.ks.row_elems = static_cast<int>(c.row_elems());
  p.ks.k_scale = c.k_scale;
  p.slots = a.slots.data;
  p.slots64 = a.slots.dtype == DType::i64;
  p.slots_st = a.slots.stride[0];
  p.out = a.out.ptr<uint16_t>();
  p.out_st = a.out.stride[0];
  p.N = a.slots.shape[0];
  p.d_qk = c.d_qk();
  const int64_t work = p.N * (p.d_qk / 8);
  if (work == 0) return;
  gather_cache_kernel<<<static_cast<unsigned>((work + 255) / 256), 256, 0, as_stream(exec.stream)>>>(p);
  SMLA_CUDA_CHECK_LAUNCH();
}

}  // namespace smla::cuda
