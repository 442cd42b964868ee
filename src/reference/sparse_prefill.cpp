// sparse_prefill on the CPU (SPEC §3, §4.2).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

#include "reference/attend_row.h"
#include "reference/kv_row.h"
#include "reference/parallel.h"
#include "reference/reference.h"
#include "smla/numeric.h"

namespace smla::ref {

void sparse_prefill(const SparsePrefillArgs& a) {
  const int64_t s_q = a.q.shape[0], h_q = a.q.shape[1];
  const int d_qk = static_cast<int>(a.q.shape[2]);
  // Keys from bf16 kv rows, or dequantized from the slots of a paged cache.
  const bool paged = a.cache.data.present();
  const int64_t s_kv = paged ? a.cache.num_slots() : a.kv.shape[0], kv_row_stride = paged ? 0 : a.kv.stride[0];
  const int64_t topk = a.indices.size(-1), idx_row_stride = a.indices.stride[0];
  const double scale = a.softmax_scale ? static_cast<double>(*a.softmax_scale) : 1.0 / std::sqrt(double(d_qk));
  const uint16_t* kv = paged ? nullptr : a.kv.ptr<const uint16_t>();

  // One token's keys are gathered once and shared by its heads. With fewer tokens than
  // cores, the heads of each token are spread over the cores instead.
  const bool heads_in_parallel = s_q < static_cast<int64_t>(std::thread::hardware_concurrency());
  auto run_token = [&](int64_t t) {
    const int64_t n_listed =
        a.topk_length.present() ? std::clamp<int64_t>(*a.topk_length.at<const int32_t>({t}), 0, topk) : topk;
    const int32_t* idx = a.indices.ptr<const int32_t>() + t * idx_row_stride;
    std::vector<float> K;  // a row listed twice counts twice
    K.reserve(n_listed * d_qk);
    for (int64_t j = 0; j < n_listed; ++j) {
      const int64_t r = idx[j];
      if (r < 0 || r >= s_kv) continue;
      const uint16_t* src = paged ? nullptr : kv + r * kv_row_stride;
      const size_t at = K.size();
      K.resize(at + d_qk);
      if (paged) {
        dequant_key_row(a.cache, r, 0, K.data() + at);
        continue;
      }
      for (int k = 0; k < d_qk; ++k) K[at + k] = bf16_bits_to_float(src[k]);
    }
    const int64_t n = static_cast<int64_t>(K.size()) / d_qk;
    auto run_head = [&](int64_t h) {
      const float* sink = a.attn_sink.present() ? a.attn_sink.at<const float>({h}) : nullptr;
      const RowResult r = attend_bf16_row(a.q.at<const uint16_t>({t, h, 0}), K.data(), n, d_qk, kDv, scale, sink,
                                          a.out.at<uint16_t>({t, h, 0}));
      *a.lse.at<float>({t, h}) = static_cast<float>(r.lse);
      *a.max_logits.at<float>({t, h}) = static_cast<float>(r.max_logit);
    };
    for_each_index(h_q, heads_in_parallel, run_head);
  };
  for_each_index(s_q, !heads_in_parallel, run_token);
}

}  // namespace smla::ref
