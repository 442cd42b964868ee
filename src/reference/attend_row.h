// The mathematics of SPEC §3 for one query row, in float64: every CPU attention
// operation (sparse_decode, sparse_prefill, dense_decode) ends here.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace smla::ref {

struct RowResult {
  double lse;        // -inf when the key set is empty; without the sink; NaN when a logit is not finite
  double max_logit;  // -inf when the key set is empty; NaN when a logit is not finite
};

// q: d_qk floats; K: n rows of d_qk floats (value = first d_v of each row; a row listed
// twice counts twice); sink: nullptr for none. Writes out[0 .. d_v) as float: all NaN, with
// lse and max_logit NaN, when a logit is NaN or infinite (a NaN or an infinity in q or a key).
RowResult attend_row(const float* q, const float* K, int64_t n, int d_qk, int d_v, double scale,
                     const float* sink, float* out);

// attend_row for a bf16 query row (d_qk values) into a bf16 output row (d_v values).
RowResult attend_bf16_row(const uint16_t* q, const float* K, int64_t n, int d_qk, int d_v, double scale,
                          const float* sink, uint16_t* out);

// The sink's factor 1 / (1 + exp(sink - lse)), with sink = -inf -> 1, +inf -> 0.
double sink_factor(double sink, double lse);

// The merge rule of SPEC §3 for partial LSEs: logsumexp over the finite values of
// value(0 .. n-1) (an empty part, -inf, adds nothing; +inf or NaN cannot be weighed);
// -inf when none is finite.
template <typename F>
double finite_logsumexp(int64_t n, F&& value) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    const double l = value(i);
    if (std::isfinite(l)) m = std::max(m, l);
  }
  if (!std::isfinite(m)) return m;
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double l = value(i);
    if (std::isfinite(l)) sum += std::exp(l - m);
  }
  return m + std::log(sum);
}

}  // namespace smla::ref
