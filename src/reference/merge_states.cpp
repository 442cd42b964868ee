// merge_states on the CPU (SPEC §3, §4.4).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "reference/attend_row.h"
#include "reference/parallel.h"
#include "reference/reference.h"
#include "smla/numeric.h"

namespace smla::ref {

void merge_states(const MergeStatesArgs& a) {
  const int64_t n = a.out_parts.shape[0], T = a.out_parts.shape[1], h = a.out_parts.shape[2];
  const int64_t d_v = a.out_parts.shape[3];
  const bool parts_bf16 = a.out_parts.dtype == DType::bf16, out_bf16 = a.out.dtype == DType::bf16;

  parallel_for(T * h, [&](int64_t row) {
    const int64_t t = row / h, head = row % h;
    // Only parts with a finite lse take part: an empty part (-inf) has nothing to add, and a
    // +inf or NaN lse cannot be weighed against the others. Their outputs are never read.
    const double lse = finite_logsumexp(n, [&](int64_t i) { return *a.lse_parts.at<const float>({i, t, head}); });
    std::vector<double> acc(d_v, 0.0);
    if (std::isfinite(lse)) {
      for (int64_t i = 0; i < n; ++i) {
        const double l = *a.lse_parts.at<const float>({i, t, head});
        if (!std::isfinite(l)) continue;
        const double w = std::exp(l - lse);
        if (parts_bf16) {
          const uint16_t* o = a.out_parts.at<const uint16_t>({i, t, head, 0});
          for (int64_t k = 0; k < d_v; ++k) acc[k] += w * bf16_bits_to_float(o[k]);
        } else {
          const float* o = a.out_parts.at<const float>({i, t, head, 0});
          for (int64_t k = 0; k < d_v; ++k) acc[k] += w * o[k];
        }
      }
      const double f = a.attn_sink.present() ? sink_factor(*a.attn_sink.at<const float>({head}), lse) : 1.0;
      for (auto& x : acc) x *= f;
    }
    if (out_bf16) {
      uint16_t* o = a.out.at<uint16_t>({t, head, 0});
      for (int64_t k = 0; k < d_v; ++k) o[k] = float_to_bf16_bits(static_cast<float>(acc[k]));
    } else {
      float* o = a.out.at<float>({t, head, 0});
      for (int64_t k = 0; k < d_v; ++k) o[k] = static_cast<float>(acc[k]);
    }
    *a.lse.at<float>({t, head}) = static_cast<float>(lse);
  });
}

}  // namespace smla::ref
