// sparse_decode on the CPU (SPEC §3, §4.1).
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
namespace {

// Number of leading entries of a request's index list that count.
int64_t valid_prefix(const TensorView& length, int64_t request, int64_t topk) {
  if (!length.present()) return topk;
  const int64_t len = *length.at<const int32_t>({request});
  return std::clamp<int64_t>(len, 0, topk);
}

// Appends the dequantized key rows of the valid entries of one index row to K.
void gather_keys(const PagedCache& c, const TensorView& indices, const TensorView& length, int64_t i, int64_t t,
                 std::vector<float>& K) {
  const int64_t n = valid_prefix(length, i, indices.shape[2]);
  const int32_t* idx = indices.at<const int32_t>({i, t, 0});
  const int64_t slots = c.num_slots();
  const int d_qk = c.d_qk();
  K.reserve(K.size() + n * d_qk);
  for (int64_t j = 0; j < n; ++j) {
    const int64_t slot = idx[j];
    if (slot < 0 || slot >= slots) continue;
    const size_t at = K.size();
    K.resize(at + d_qk);
    dequant_key_row(c, slot, 0, K.data() + at);
  }
}

}  // namespace

void sparse_decode(const SparseDecodeArgs& a) {
  const int64_t b = a.q.shape[0], s_q = a.q.shape[1], h_q = a.q.shape[2];
  const int d_qk = static_cast<int>(a.q.shape[3]);
  const double scale = a.softmax_scale ? static_cast<double>(*a.softmax_scale) : 1.0 / std::sqrt(double(d_qk));
  const bool extra = a.extra_cache.data.present();

  // One row's keys are gathered once and shared by its heads. With fewer rows than cores
  // (small-batch decode), the heads of each row are spread over the cores instead.
  const int64_t rows = b * s_q;
  const bool heads_in_parallel = rows < static_cast<int64_t>(std::thread::hardware_concurrency());
  auto run_row = [&](int64_t row) {
    const int64_t i = row / s_q, t = row % s_q;
    std::vector<float> K;
    gather_keys(a.cache, a.indices, a.topk_length, i, t, K);
    if (extra) gather_keys(a.extra_cache, a.extra_indices, a.extra_topk_length, i, t, K);
    const int64_t n = static_cast<int64_t>(K.size()) / d_qk;
    auto run_head = [&](int64_t h) {
      const float* sink = a.attn_sink.present() ? a.attn_sink.at<const float>({h}) : nullptr;
      const RowResult r = attend_bf16_row(a.q.at<const uint16_t>({i, t, h, 0}), K.data(), n, d_qk, kDv, scale, sink,
                                          a.out.at<uint16_t>({i, t, h, 0}));
      *a.lse.at<float>({i, t, h}) = static_cast<float>(r.lse);
    };
    for_each_index(h_q, heads_in_parallel, run_head);
  };
  for_each_index(rows, !heads_in_parallel, run_row);
}

}  // namespace smla::ref
