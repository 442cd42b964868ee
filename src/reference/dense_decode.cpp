// dense_decode on the CPU (SPEC §4.3): every query row of a request attends to a prefix of
// that request's paged keys, in float64 via attend_row.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "reference/attend_row.h"
#include "reference/kv_row.h"
#include "reference/parallel.h"
#include "reference/reference.h"
#include "smla/numeric.h"

namespace smla::ref {

namespace {

// The request's keys that can be read, in position order: positions past the clamped length
// are never looked up, and a block id outside the cache skips its keys without reading them.
struct RequestKeys {
  int64_t seqlen = 0;            // after clamping to [0, max_blocks * page_size]
  std::vector<int64_t> slots;    // cache slot of each readable key
  std::vector<int64_t> pos;      // its position in the request (ascending)
};

RequestKeys request_keys(const DenseDecodeArgs& a, int64_t req) {
  const PagedCache& c = a.cache;
  const int ps = c.page_size();
  const int64_t max_blocks = a.block_table.shape[1];
  RequestKeys k;
  k.seqlen = std::clamp<int64_t>(*a.seqlens.at<int32_t>({req}), 0, max_blocks * ps);
  for (int64_t p = 0; p < k.seqlen; ++p) {
    const int64_t block = *a.block_table.at<int32_t>({req, p / ps});
    if (block < 0 || block >= c.num_blocks()) continue;
    k.slots.push_back(block * ps + p % ps);
    k.pos.push_back(p);
  }
  return k;
}

void load_q_row(const DenseDecodeArgs& a, int64_t req, int64_t t, int64_t h, int d_qk, float* dst) {
  switch (a.q.dtype) {
    case DType::f16: {
      const uint16_t* q = a.q.at<uint16_t>({req, t, h, 0});
      for (int i = 0; i < d_qk; ++i) dst[i] = fp16_bits_to_float(q[i]);
      break;
    }
    case DType::fp8_e4m3: {
      const uint8_t* q = a.q.at<uint8_t>({req, t, h, 0});
      for (int i = 0; i < d_qk; ++i) dst[i] = e4m3_to_float(q[i]) * a.q_scale;
      break;
    }
    default: {
      const uint16_t* q = a.q.at<uint16_t>({req, t, h, 0});
      for (int i = 0; i < d_qk; ++i) dst[i] = bf16_bits_to_float(q[i]);
      break;
    }
  }
}

}  // namespace

void dense_decode(const DenseDecodeArgs& a) {
  const PagedCache& c = a.cache;
  const int64_t b = a.q.shape[0], s_q = a.q.shape[1], h_q = a.q.shape[2];
  const int d_qk = c.d_qk(), h_kv = c.h_kv();
  const int64_t group = h_q / h_kv;
  const double scale = a.softmax_scale ? static_cast<double>(*a.softmax_scale) : 1.0 / std::sqrt(d_qk);
  const bool fp16_out = a.out.dtype == DType::f16;

  for (int64_t req = 0; req < b; ++req) {
    const RequestKeys keys = request_keys(a, req);
    const int64_t n = static_cast<int64_t>(keys.slots.size());
    // Dequantized once per kv head and shared by every query token and head of its group.
    std::vector<float> K(static_cast<size_t>(n) * d_qk);
    for (int g = 0; g < h_kv; ++g) {
      parallel_for(n, [&](int64_t j) { dequant_key_row(c, keys.slots[j], g, &K[j * d_qk]); });
      parallel_for(s_q * group, [&](int64_t r) {
        const int64_t t = r / group, h = g * group + r % group;
        // Causal query t sees positions [0, seqlen - s_q + t]; keys are in position order,
        // so the visible ones are a prefix of K.
        const int64_t last = a.causal ? keys.seqlen - s_q + t : keys.seqlen - 1;
        const int64_t visible = std::upper_bound(keys.pos.begin(), keys.pos.end(), last) - keys.pos.begin();
        std::vector<float> q(d_qk), o(kDv);
        load_q_row(a, req, t, h, d_qk, q.data());
        const float* sink = a.attn_sink.present() ? a.attn_sink.at<float>({h}) : nullptr;
        const RowResult res = attend_row(q.data(), K.data(), visible, d_qk, kDv, scale, sink, o.data());
        uint16_t* out = a.out.at<uint16_t>({req, t, h, 0});
        for (int i = 0; i < kDv; ++i) out[i] = fp16_out ? float_to_fp16_bits(o[i]) : float_to_bf16_bits(o[i]);
        *a.lse.at<float>({req, t, h}) = static_cast<float>(res.lse);
      });
    }
  }
}

}  // namespace smla::ref
