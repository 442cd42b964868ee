// The mathematics of SPEC §3 for one query row, in float64: every CPU attention
// operation (sparse_decode, sparse_prefill, dense_decode) ends here.
#pragma once

#include <cstdint>

namespace smla::ref {

struct RowResult {
  double lse;        // -inf when the key set is empty; without the sink
  double max_logit;  // -inf when the key set is empty
};

// q: d_qk floats; K: n rows of d_qk floats (value = first d_v of each row; a row listed
// twice counts twice); sink: nullptr for none. Writes out[0 .. d_v) as float.
RowResult attend_row(const float* q, const float* K, int64_t n, int d_qk, int d_v, double scale,
                     const float* sink, float* out);

// The sink's factor 1 / (1 + exp(sink - lse)), with sink = -inf -> 1, +inf -> 0.
double sink_factor(double sink, double lse);

}  // namespace smla::ref
