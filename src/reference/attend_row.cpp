#include "reference/attend_row.h"

#include <cmath>
#include <limits>
#include <vector>

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
  for (int64_t j = 0; j < n; ++j) {
    const float* k = K + j * d_qk;
    double acc = 0.0;
    for (int i = 0; i < d_qk; ++i) acc += static_cast<double>(q[i]) * k[i];
    s[j] = acc * scale;
    m = std::max(m, s[j]);
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

}  // namespace smla::ref
