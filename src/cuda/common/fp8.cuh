// FP8 (e4m3) to bf16 on the CUDA cores: the exact e4m3 -> f16 conversion, the scale applied
// in float32, one rounding to bf16 (SPEC §2: a kernel may round the dequantized value to bf16).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace smla::cuda {

// Two e4m3 values (the low 16 bits of `pair`) times `scale` -> bf16x2.
__device__ __forceinline__ uint32_t e4m3x2_to_bf16x2(uint32_t pair, float scale) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(pair & 0xffffu), __NV_E4M3);
  const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
  const __nv_bfloat162 b = __floats2bfloat162_rn(f.x * scale, f.y * scale);
  return *reinterpret_cast<const uint32_t*>(&b);
}

// Two e4m3 values (the low 16 bits of `pair`, the low byte to the low half) -> f16x2, exact.
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t pair) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(pair & 0xffffu), __NV_E4M3);
  return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
}

// Bytes kLo and kHi (0-3: of x0, 4-7: of x1; e4m3) as a bf16 pair (kLo's low) times 2^-120,
// exact (subnormals too), on the integer pipes: prmt spreads each byte into a 16-bit half with
// its sign replicated above it, the shift puts exponent and mantissa in place, the mask keeps
// them and the sign.
template <int kLo, int kHi>
__device__ __forceinline__ uint32_t e4m3_bytes_to_bf16x2_2m120(uint32_t x0, uint32_t x1) {
  constexpr uint32_t kSel = kLo | ((kLo | 8) << 4) | (kHi << 8) | ((kHi | 8) << 12);
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(x0), "r"(x1), "n"(kSel));
  return (r << 4) & 0x87f087f0u;
}
// Byte kByte of x0 and of x1 as a bf16 pair (x0's low) times 2^-120.
template <int kByte>
__device__ __forceinline__ uint32_t e4m3_pair_to_bf16x2_2m120(uint32_t x0, uint32_t x1) {
  return e4m3_bytes_to_bf16x2_2m120<kByte, kByte + 4>(x0, x1);
}

// bf16x2 a * b, one rounding (subnormals kept).
__device__ __forceinline__ uint32_t mul_bf16x2(uint32_t a, uint32_t b) {
  uint32_t r;
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}

// The bf16 route of a dequantization: e4m3 bytes -> bf16 times 2^-120 on the integer pipes, then
// one bf16 multiply by scale * 2^120: four instructions a pair where the float32 route
// (e4m3x2_to_bf16x2) takes six. Both round the exact product x * scale once, so they give the
// same bits wherever the route applies: a scale that is itself a bf16 value (the low 16 bits of
// its float32 zero: every power of two, so every UE8M0 scale and the writers' scales of SPEC §2)
// no greater than 2^7 (times 2^120 it stays finite). An e4m3 NaN byte (0x7f, 0xff; writers
// saturate at 448 and never store one) comes out finite on this route.
__device__ __forceinline__ bool bf16_route_scale(float scale) {
  return (__float_as_uint(scale) & 0xffffu) == 0 && scale <= 128.0f;
}
// scale * 2^120 (exact for a scale bf16_route_scale accepts) as a bf16 pair.
__device__ __forceinline__ uint32_t bf16_route_multiplier(float scale) {
  return (__float_as_uint(scale * 0x1p120f) >> 16) * 0x10001u;
}
// 16 e4m3 values (one 16-byte load) times the scale whose multiplier is m -> 16 bf16 values.
__device__ __forceinline__ void e4m3x16_to_bf16_route(const uint4& in, uint32_t m, uint4& lo, uint4& hi) {
  lo.x = mul_bf16x2(e4m3_bytes_to_bf16x2_2m120<0, 1>(in.x, in.x), m);
  lo.y = mul_bf16x2(e4m3_bytes_to_bf16x2_2m120<2, 3>(in.x, in.x), m);
  lo.z = mul_bf16x2(e4m3_bytes_to_bf16x2_2m120<0, 1>(in.y, in.y), m);
  lo.w = mul_bf16x2(e4m3_bytes_to_bf16x2_2m120<2, 3>(in.y, in.y), m);
  hi.x = mul_bf16x2(e4m3_bytes_to_bf16x2_2m120<0, 1>(in.z, in.z), m);
  hi.y = mul_bf16x2(e4m3_bytes_to_bf16x2_2m120<2, 3>(in.z, in.z), m);
  hi.z = mul_bf16x2(e4m3_bytes_to_bf16x2_2m120<0, 1>(in.w, in.w), m);
  hi.w = mul_bf16x2(e4m3_bytes_to_bf16x2_2m120<2, 3>(in.w, in.w), m);
}

// The upper two e4m3 values of `word` (bits 16..31, byte 2 to the low half) -> f16x2, exact: the
// conversion reads the register's upper half itself, where e4m3x2_to_f16x2(word >> 16) costs a
// shift (SMLA_CVT_HI=0, a measurement build). In the raw-ring consumers (same-seed A/B,
// 2026-12-01): dense fp8 b128 h16 L8k 206.8 -> 197.1 µs, h32 271.2 -> 253.7, s_q2 h16 362.0 ->
// 337.5; sparse V3.2 h16 72.0 -> 71.3, s_q2 h16 128.5 -> 126.0.
#ifndef SMLA_CVT_HI
#define SMLA_CVT_HI 1
#endif
__device__ __forceinline__ uint32_t e4m3x2_hi_to_f16x2(uint32_t word) {
#if SMLA_CVT_HI
  uint32_t r;
  asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %1;\ncvt.rn.f16x2.e4m3x2 %0, h;\n}\n" : "=r"(r) : "r"(word));
  return r;
#else
  return e4m3x2_to_f16x2(word >> 16);
#endif
}

// 16 e4m3 values (one 16-byte load) times one scale -> 16 bf16 values (two 16-byte stores).
__device__ __forceinline__ void e4m3x16_to_bf16(const uint4& in, float scale, uint4& lo, uint4& hi) {
  lo.x = e4m3x2_to_bf16x2(in.x, scale);
  lo.y = e4m3x2_to_bf16x2(in.x >> 16, scale);
  lo.z = e4m3x2_to_bf16x2(in.y, scale);
  lo.w = e4m3x2_to_bf16x2(in.y >> 16, scale);
  hi.x = e4m3x2_to_bf16x2(in.z, scale);
  hi.y = e4m3x2_to_bf16x2(in.z >> 16, scale);
  hi.z = e4m3x2_to_bf16x2(in.w, scale);
  hi.w = e4m3x2_to_bf16x2(in.w >> 16, scale);
}

// fp8_model1's UE8M0 scale byte: 2^(byte - 127); byte 0 is 2^-127, a float32 subnormal.
__device__ __forceinline__ float ue8m0_to_float(uint32_t byte) {
  return byte == 0 ? 5.877471754111438e-39f : __uint_as_float(byte << 23);
}

// A 4 x 4 byte transpose: a, b, c, d hold four bytes each of rows 0-3 (byte j: column j);
// out[j] holds column j's four bytes (byte i: row i).
// The selectors may be passed permuted (the FP8 tiles' spread transpose): s_lo, s_hi pair the
// columns (0x4051 / 0x6273 swap columns 0 <-> 1 and 2 <-> 3 in out), s_even, s_odd take the
// rows in another order.
__device__ __forceinline__ void transpose_4x4_bytes(uint32_t a, uint32_t b, uint32_t c, uint32_t d, uint32_t (&out)[4],
                                                    uint32_t s_even = 0x5410, uint32_t s_odd = 0x7632,
                                                    uint32_t s_lo = 0x5140, uint32_t s_hi = 0x7362) {
  const uint32_t ab_lo = __byte_perm(a, b, s_lo), ab_hi = __byte_perm(a, b, s_hi);
  const uint32_t cd_lo = __byte_perm(c, d, s_lo), cd_hi = __byte_perm(c, d, s_hi);
  out[0] = __byte_perm(ab_lo, cd_lo, s_even);
  out[1] = __byte_perm(ab_lo, cd_lo, s_odd);
  out[2] = __byte_perm(ab_hi, cd_hi, s_even);
  out[3] = __byte_perm(ab_hi, cd_hi, s_odd);
}

}  // namespace smla::cuda
