// dcp_rescale on the CPU (smla/dcp.h): the SPEC §3 merge weights of one rank's partial.
#include <cmath>
#include <limits>

#include "reference/attend_row.h"
#include "reference/parallel.h"
#include "reference/reference.h"
#include "smla/numeric.h"

namespace smla::ref {

void dcp_rescale(const DcpRescaleArgs& a) {
  const int64_t N = a.lse_all.shape[0], T = a.out_local.shape[0], h = a.out_local.shape[1];
  const int64_t d_v = a.out_local.shape[2], hr = h / N;
  const bool in_bf16 = a.out_local.dtype == DType::bf16;
  parallel_for(T * h, [&](int64_t row) {
    const int64_t t = row / h, head = row % h;
    // Same rule as merge_states: only finite LSEs take part.
    const double lse = finite_logsumexp(N, [&](int64_t r) { return *a.lse_all.at<const float>({r, t, head}); });
    double w = 0.0;
    if (std::isfinite(lse)) {
      const double mine = *a.lse_all.at<const float>({a.rank, t, head});
      if (std::isfinite(mine)) w = std::exp(mine - lse);
      if (a.attn_sink.present()) w *= sink_factor(*a.attn_sink.at<const float>({head}), lse);
    }
    const int64_t dest = head / hr, j = head % hr;
    float* o = a.scaled.at<float>({dest, t, j, 0});
    for (int64_t k = 0; k < d_v; ++k) {
      const double v = in_bf16 ? bf16_bits_to_float(*a.out_local.at<const uint16_t>({t, head, k}))
                               : *a.out_local.at<const float>({t, head, k});
      o[k] = static_cast<float>(w == 0.0 ? 0.0 : v * w);
    }
    if (dest == a.rank) *a.lse.at<float>({t, j}) = static_cast<float>(lse);
  });
}

}  // namespace smla::ref
