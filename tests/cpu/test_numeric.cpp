// numeric.h against an independent model of each format: every code decoded from its
// fields with ldexp, and rounding as "nearest value in the table of codes, ties to the even
// code", so no bit trick of numeric.h is reused here.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "common/test_util.h"
#include "smla/numeric.h"

namespace smla {
namespace {

double fields_value(uint32_t exp, uint32_t mant, int mant_bits, int bias) {
  if (exp == 0) return std::ldexp(static_cast<double>(mant), 1 - bias - mant_bits);
  return std::ldexp(1.0 + std::ldexp(static_cast<double>(mant), -mant_bits), static_cast<int>(exp) - bias);
}

// A floating-point format described by its fields; codes are sign | magnitude code.
struct Format {
  int exp_bits, mant_bits, bias;
  uint32_t sign_bit;
  bool has_inf;  // IEEE-like (bf16, fp16); e4m3fn has no inf and saturates instead

  uint32_t max_exp() const { return (1u << exp_bits) - 1; }
  bool is_nan(uint32_t code) const {
    const uint32_t mag = code & (sign_bit - 1);
    const uint32_t e = mag >> mant_bits, m = mag & ((1u << mant_bits) - 1);
    if (has_inf) return e == max_exp() && m != 0;
    return e == max_exp() && m == (1u << mant_bits) - 1;
  }
  double value(uint32_t code) const {
    const uint32_t mag = code & (sign_bit - 1);
    const uint32_t e = mag >> mant_bits, m = mag & ((1u << mant_bits) - 1);
    double v;
    if (is_nan(code)) v = std::numeric_limits<double>::quiet_NaN();
    else if (has_inf && e == max_exp()) v = std::numeric_limits<double>::infinity();
    else v = fields_value(e, m, mant_bits, bias);
    return (code & sign_bit) ? -v : v;
  }
  // Non-negative finite codes in increasing order of value (their codes increase too).
  std::vector<uint32_t> finite_codes() const {
    std::vector<uint32_t> c;
    for (uint32_t code = 0; code < sign_bit; ++code)
      if (!is_nan(code) && std::isfinite(value(code))) c.push_back(code);
    return c;
  }
  double max_finite() const { return value(finite_codes().back()); }
  // Round to nearest, ties to the even code; past the largest finite value an IEEE format
  // rounds as if the next code (inf) were one step further, e4m3fn saturates.
  uint32_t round(double x) const {
    const uint32_t sign = std::signbit(x) ? sign_bit : 0;
    const double a = std::fabs(x);
    const std::vector<uint32_t>& codes = table();
    const double top = value(codes.back());
    if (!has_inf && a >= top) return sign | codes.back();
    const uint32_t inf_code = max_exp() << mant_bits;
    const double past = has_inf ? top + (top - value(codes.back() - 1)) : top;
    if (has_inf && a >= top) {
      const double mid = (top + past) / 2;
      if (a < mid) return sign | codes.back();
      return sign | inf_code;  // the tie goes to inf: the largest finite code is odd
    }
    auto it = std::upper_bound(codes.begin(), codes.end(), a, [&](double v, uint32_t c) { return v < value(c); });
    const uint32_t hi = *it, lo = *(it - 1);
    const double dl = a - value(lo), dh = value(hi) - a;
    if (dl < dh) return sign | lo;
    if (dh < dl) return sign | hi;
    return sign | ((lo & 1) ? hi : lo);
  }
  const std::vector<uint32_t>& table() const {
    if (cache.empty()) cache = finite_codes();
    return cache;
  }
  mutable std::vector<uint32_t> cache;
};

Format bf16_format() { return {8, 7, 127, 0x8000u, true, {}}; }
Format fp16_format() { return {5, 10, 15, 0x8000u, true, {}}; }
Format e4m3_format() { return {4, 3, 7, 0x80u, false, {}}; }

float random_float_bits() {
  for (;;) {
    const uint32_t u = static_cast<uint32_t>(test::uniform_int(0, 0xffffffffLL));
    float f;
    std::memcpy(&f, &u, 4);
    if (!std::isnan(f)) return f;
  }
}

// Inputs that probe every rounding decision of a format: each code's value, each midpoint
// between neighbours (an exact tie; representable in float for these narrow formats), the
// floats just beside each midpoint, and random floats of every magnitude.
std::vector<float> probe_inputs(const Format& f, double lo_random, double hi_random) {
  std::vector<float> in;
  const auto& codes = f.table();
  for (size_t i = 0; i < codes.size(); ++i) {
    const float v = static_cast<float>(f.value(codes[i]));
    in.push_back(v);
    in.push_back(-v);
    if (i + 1 < codes.size()) {
      const double mid = (f.value(codes[i]) + f.value(codes[i + 1])) / 2;
      const float m = static_cast<float>(mid);
      EXPECT_EQ(static_cast<double>(m), mid) << "midpoint not exact in float";
      for (float x : {m, std::nextafter(m, 0.0f), std::nextafter(m, INFINITY)}) {
        in.push_back(x);
        in.push_back(-x);
      }
    }
  }
  for (int i = 0; i < 20000; ++i) in.push_back(random_float_bits());
  for (int i = 0; i < 20000; ++i) {
    const double mag = std::exp(test::uniform(static_cast<float>(std::log(lo_random)),
                                              static_cast<float>(std::log(hi_random))));
    in.push_back(static_cast<float>(test::uniform(0, 1) < 0.5f ? -mag : mag));
  }
  return in;
}

TEST(Numeric, Bf16DecodeEveryCode) {
  const Format f = bf16_format();
  for (uint32_t c = 0; c < 0x10000u; ++c) {
    const float got = bf16_bits_to_float(static_cast<uint16_t>(c));
    if (f.is_nan(c)) {
      EXPECT_TRUE(std::isnan(got)) << std::hex << c;
    } else {
      ASSERT_EQ(static_cast<double>(got), f.value(c)) << std::hex << c;
      EXPECT_EQ(float_to_bf16_bits(got), c) << "round trip of " << std::hex << c;
    }
  }
}

TEST(Numeric, Bf16RoundsToNearestEven) {
  const Format f = bf16_format();
  for (float x : probe_inputs(f, 1e-40, 1e38)) {
    ASSERT_EQ(float_to_bf16_bits(x), f.round(x)) << x;
  }
  EXPECT_EQ(float_to_bf16_bits(1.0f + 1.0f / 256), 0x3f80u);  // tie: 1.0 is even
  EXPECT_EQ(float_to_bf16_bits(1.0f + 3.0f / 256), 0x3f82u);  // tie: up to the even code
  EXPECT_EQ(float_to_bf16_bits(INFINITY), 0x7f80u);
  EXPECT_EQ(float_to_bf16_bits(-INFINITY), 0xff80u);
  EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::max()), 0x7f80u);  // rounds past the top
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(NAN))));
  EXPECT_TRUE(std::isnan(round_to_bf16(-NAN)));
}

TEST(Numeric, Fp16DecodeEveryCode) {
  const Format f = fp16_format();
  for (uint32_t c = 0; c < 0x10000u; ++c) {
    const float got = fp16_bits_to_float(static_cast<uint16_t>(c));
    if (f.is_nan(c)) {
      EXPECT_TRUE(std::isnan(got)) << std::hex << c;
    } else {
      ASSERT_EQ(static_cast<double>(got), f.value(c)) << std::hex << c;
      EXPECT_EQ(float_to_fp16_bits(got), c) << "round trip of " << std::hex << c;
    }
  }
}

TEST(Numeric, Fp16RoundsToNearestEven) {
  const Format f = fp16_format();
  for (float x : probe_inputs(f, 1e-9, 1e6)) {
    ASSERT_EQ(float_to_fp16_bits(x), f.round(x)) << x;
  }
  EXPECT_EQ(float_to_fp16_bits(65504.0f), 0x7bffu);
  EXPECT_EQ(float_to_fp16_bits(65519.99f), 0x7bffu);
  EXPECT_EQ(float_to_fp16_bits(65520.0f), 0x7c00u);  // the tie goes to inf
  EXPECT_EQ(float_to_fp16_bits(-1e10f), 0xfc00u);
  EXPECT_EQ(float_to_fp16_bits(std::ldexp(1.0f, -24)), 0x0001u);  // smallest subnormal
  EXPECT_EQ(float_to_fp16_bits(std::ldexp(1.0f, -25)), 0x0000u);  // tie to even (zero)
  EXPECT_EQ(float_to_fp16_bits(std::ldexp(3.0f, -25)), 0x0002u);  // tie to even (2)
  EXPECT_EQ(float_to_fp16_bits(-std::ldexp(1.0f, -26)), 0x8000u);
  EXPECT_TRUE(std::isnan(fp16_bits_to_float(float_to_fp16_bits(NAN))));
}

TEST(Numeric, E4m3DecodeEveryCode) {
  const Format f = e4m3_format();
  for (uint32_t c = 0; c < 0x100u; ++c) {
    const float got = e4m3_to_float(static_cast<uint8_t>(c));
    if (c == 0x7f || c == 0xff) {
      EXPECT_TRUE(std::isnan(got)) << std::hex << c;
    } else {
      ASSERT_EQ(static_cast<double>(got), f.value(c)) << std::hex << c;
      EXPECT_EQ(float_to_e4m3(got), c) << "round trip of " << std::hex << c;
    }
  }
  EXPECT_EQ(f.max_finite(), 448.0);
  EXPECT_EQ(e4m3_to_float(0x7e), 448.0f);
  EXPECT_EQ(e4m3_to_float(0xfe), -448.0f);
  EXPECT_EQ(e4m3_to_float(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(e4m3_to_float(0x07), std::ldexp(7.0f, -9));  // largest subnormal
  EXPECT_EQ(e4m3_to_float(0x08), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_EQ(e4m3_to_float(0x38), 1.0f);
}

TEST(Numeric, E4m3RoundsToNearestEvenAndSaturates) {
  const Format f = e4m3_format();
  for (float x : probe_inputs(f, 1e-4, 1e3)) {
    ASSERT_EQ(float_to_e4m3(x), f.round(x)) << x;
  }
  EXPECT_EQ(float_to_e4m3(448.0f), 0x7e);
  EXPECT_EQ(float_to_e4m3(449.0f), 0x7e);
  EXPECT_EQ(float_to_e4m3(464.0f), 0x7e);  // where 480 would be a tie: saturates, never NaN
  EXPECT_EQ(float_to_e4m3(1e30f), 0x7e);
  EXPECT_EQ(float_to_e4m3(-1e30f), 0xfe);
  EXPECT_EQ(float_to_e4m3(INFINITY), 0x7e);
  EXPECT_EQ(float_to_e4m3(-INFINITY), 0xfe);
  EXPECT_EQ(float_to_e4m3(NAN), 0x7f);
  EXPECT_EQ(float_to_e4m3(1.0625f), 0x38);  // tie between 1 and 1.125: even (1.0)
  EXPECT_EQ(float_to_e4m3(1.1875f), 0x3a);  // tie between 1.125 and 1.25: even (1.25)
  EXPECT_EQ(float_to_e4m3(std::ldexp(1.0f, -10)), 0x00);  // half the smallest subnormal: even
  EXPECT_EQ(float_to_e4m3(std::ldexp(3.0f, -10)), 0x02);
  EXPECT_EQ(float_to_e4m3(-std::ldexp(1.0f, -12)), 0x80);
}

TEST(Numeric, Ue8m0) {
  for (int b = 1; b <= 254; ++b) EXPECT_EQ(ue8m0_to_float(static_cast<uint8_t>(b)), std::ldexp(1.0f, b - 127)) << b;
  EXPECT_EQ(static_cast<double>(ue8m0_to_float(0)), std::ldexp(1.0, -127));
  EXPECT_TRUE(std::isnan(ue8m0_to_float(255)));
}

TEST(Numeric, Pow2ScaleExponent) {
  EXPECT_EQ(pow2_scale_exponent(448.0f), 0);
  EXPECT_EQ(pow2_scale_exponent(448.1f), 1);
  EXPECT_EQ(pow2_scale_exponent(224.0f), -1);
  EXPECT_EQ(pow2_scale_exponent(1.0f), -8);
  EXPECT_EQ(pow2_scale_exponent(3.5f), -7);
  EXPECT_EQ(pow2_scale_exponent(0.0f), -22);  // amax floored at 1e-4
  EXPECT_EQ(pow2_scale_exponent(1e-30f), -22);
  for (int i = 0; i < 100000; ++i) {
    const float amax = std::exp(test::uniform(std::log(1e-6f), std::log(1e30f)));
    const double t = std::max(static_cast<double>(amax), static_cast<double>(1e-4f)) / 448.0;
    const int e = pow2_scale_exponent(amax);
    ASSERT_GE(std::ldexp(1.0, e), t) << amax;       // the tile fits under 448
    ASSERT_LT(std::ldexp(1.0, e - 1), t) << amax;   // and the scale is the smallest such
  }
}

// e4m3 spacing at magnitude v (below the smallest normal the subnormal step).
double e4m3_step(double v) {
  if (v < std::ldexp(1.0, -6)) return std::ldexp(1.0, -9);
  return std::ldexp(1.0, static_cast<int>(std::floor(std::log2(v))) - 3);
}

TEST(Numeric, TileQuantizationErrorWithinHalfStep) {
  for (int tile : {64, 128}) {
    for (int trial = 0; trial < 400; ++trial) {
      const float mag = std::exp(test::uniform(std::log(1e-6f), std::log(1e4f)));
      std::vector<float> x(tile);
      float amax = 0;
      for (auto& v : x) {
        v = round_to_bf16(test::uniform(-mag, mag));
        amax = std::max(amax, std::fabs(v));
      }
      const double scale = std::ldexp(1.0, pow2_scale_exponent(amax));
      for (float v : x) {
        const double scaled = v / scale;
        ASSERT_LE(std::fabs(scaled), 448.0);
        const double back = static_cast<double>(e4m3_to_float(float_to_e4m3(static_cast<float>(scaled)))) * scale;
        ASSERT_LE(std::fabs(back - v), e4m3_step(std::fabs(scaled)) * scale / 2) << v << " scale " << scale;
      }
    }
  }
}

}  // namespace
}  // namespace smla
