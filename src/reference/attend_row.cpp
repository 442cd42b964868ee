#include "reference/attend_row.h"

#include <cmath>
#include <limits>
#include <vector>

#include "smla/numeric.h"

namespace smla::ref {

double sink_factor(double sink, double lse) {
  if (std::isinf(sink)) return sink < 0 ? 1.0 : 0.0;
  return 1.0 / (1.0 + std::exp(sink - lse));
}

RowResult attend_row(const float* q, const float* K, int64_t n, int d_qk, int d_v, double scale,
                     const float* sink, float* out) {
  const double ninf = -std::numeric_limits<double>::infinity();
  if (n == 0) {
    for (int i = 0; i < d_v; ++i) out[i] = 0.0f;
    return {ninf, ninf};
  }
  std::vector<double> s(n);
  double m = ninf;
  bool finite = true;
  for (int64_t j = 0; j < n; ++j) {
    const float* k = K + j * d_qk;
    double acc = 0.0;
    for (int i = 0; i < d_qk; ++i) acc += static_cast<double>(q[i]) * k[i];
    s[j] = acc * scale;
    finite &= std::isfinite(s[j]);
    m = std::max(m, s[j]);
  }
  // Float32 inputs cannot overflow a float64 dot product, so a logit is finite unless q or the
  // key holds a NaN or an infinity. Such a row is not empty and has no meaningful softmax:
  // every result is NaN (std::max alone would skip a NaN logit and report max -inf, the
  // empty row's value, beside a NaN lse).
  if (!finite) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (int i = 0; i < d_v; ++i) out[i] = static_cast<float>(nan);
    return {nan, nan};
  }
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j) sum += std::exp(s[j] - m);
  const double lse = m + std::log(sum);
  std::vector<double> acc(d_v, 0.0);
  for (int64_t j = 0; j < n; ++j) {
    const double p = std::exp(s[j] - lse);
    const float* v = K + j * d_qk;
    for (int i = 0; i < d_v; ++i) acc[i] += p * v[i];
  }
  const double f = sink ? sink_factor(*sink, lse) : 1.0;
  for (int i = 0; i < d_v; ++i) out[i] = static_cast<float>(acc[i] * f);
  return {lse, m};
}

RowResult attend_bf16_row(const uint16_t* q, const float* K, int64_t n, int d_qk, int d_v, double scale,
                          const float* sink, uint16_t* out) {
  std::vector<float> qf(d_qk), o(d_v);
  for (int k = 0; k < d_qk; ++k) qf[k] = bf16_bits_to_float(q[k]);
  const RowResult r = attend_row(qf.data(), K, n, d_qk, d_v, scale, sink, o.data());
  for (int k = 0; k < d_v; ++k) out[k] = float_to_bf16_bits(o[k]);
  return r;
}

}  // namespace smla::ref
