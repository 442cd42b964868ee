// Bit-exact scalar conversions shared by the CPU reference, the writers and the tests.
// Header-only and usable from device code, so the CUDA writers round exactly as the CPU ones.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define SMLA_HD __host__ __device__ __forceinline__
#else
#define SMLA_HD inline
#endif

namespace smla {

SMLA_HD uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

SMLA_HD float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// ---- bfloat16: the upper half of a float32, round-to-nearest-even ----
SMLA_HD uint16_t float_to_bf16_bits(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
SMLA_HD float bf16_bits_to_float(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }
SMLA_HD float round_to_bf16(float f) { return bf16_bits_to_float(float_to_bf16_bits(f)); }

// ---- IEEE half: 1-5-10, round-to-nearest-even, overflow to inf ----
SMLA_HD uint16_t float_to_fp16_bits(float f) {
  uint32_t u = float_bits(f);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u;
  if (a >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to inf
  if (a < 0x38800000u) {                        // subnormal half (|f| < 2^-14)
    // value / 2^-24, rounded to nearest even, as an integer mantissa.
    float v = bits_float(a) * 16777216.0f;      // exact: power-of-two scaling
    uint32_t m = static_cast<uint32_t>(v);
    float rem = v - static_cast<float>(m);
    if (rem > 0.5f || (rem == 0.5f && (m & 1u))) ++m;
    return sign | static_cast<uint16_t>(m);
  }
  uint32_t exp = ((a >> 23) - 112u) << 10;
  uint32_t mant = a & 0x7fffffu;
  uint32_t h = exp | (mant >> 13);
  uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return sign | static_cast<uint16_t>(h);
}
SMLA_HD float fp16_bits_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {
    float v = static_cast<float>(m) * 5.9604644775390625e-8f;  // m * 2^-24
    return sign ? -v : v;
  }
  if (e == 31) return bits_float(sign | 0x7f800000u | (m << 13));
  return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}

// ---- float8 e4m3 (e4m3fn: bias 7, max 448, no inf, 0x7f/0xff are NaN) ----
SMLA_HD float e4m3_to_float(uint8_t b) {
  uint32_t sign = (b & 0x80u) ? 1u : 0u;
  uint32_t e = (b >> 3) & 0xfu, m = b & 0x7u;
  float v;
  if (e == 0xf && m == 0x7) {
    v = NAN;
  } else if (e == 0) {
    v = static_cast<float>(m) * 0.001953125f;  // m * 2^-9
  } else {
    v = bits_float(((e + 120u) << 23) | (m << 20));
  }
  return sign ? -v : v;
}

// Round-to-nearest-even, saturating at +-448; NaN maps to NaN (0x7f).
SMLA_HD uint8_t float_to_e4m3(float f) {
  uint32_t u = float_bits(f);
  uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7f;
  if (a >= 0x43e00000u) return sign | 0x7e;  // |f| >= 448: saturate (inf too)
  if (a < 0x3c800000u) {                     // |f| < 2^-6: subnormal range, step 2^-9
    float v = bits_float(a) * 512.0f;
    uint32_t m = static_cast<uint32_t>(v);
    float rem = v - static_cast<float>(m);
    if (rem > 0.5f || (rem == 0.5f && (m & 1u))) ++m;
    return sign | static_cast<uint8_t>(m);  // m == 8 is the smallest normal, encoded the same
  }
  uint32_t exp = (a >> 23) - 120u;  // biased e4m3 exponent, 1..15
  uint32_t mant = a & 0x7fffffu;
  uint32_t r = (exp << 3) | (mant >> 20);
  uint32_t rest = mant & 0xfffffu;
  if (rest > 0x80000u || (rest == 0x80000u && (r & 1u))) ++r;
  if (r > 0x7e) r = 0x7e;  // rounding up past 448 saturates
  return sign | static_cast<uint8_t>(r);
}

// ---- UE8M0 scale byte: 2^(byte - 127) ----
SMLA_HD float ue8m0_to_float(uint8_t b) {
  if (b == 0) return bits_float(0x00400000u);  // 2^-127 (a subnormal float)
  if (b == 0xff) return NAN;
  return bits_float(static_cast<uint32_t>(b) << 23);
}

// The writers' tile scale: 2^ceil(log2(max(amax, 1e-4) / 448)), as an exponent.
SMLA_HD int pow2_scale_exponent(float amax) {
  float a = fmaxf(amax, 1e-4f) / 448.0f;
  int e;
  float m = frexpf(a, &e);  // a = m * 2^e, m in [0.5, 1)
  return (m == 0.5f) ? e - 1 : e;
}

}  // namespace smla
