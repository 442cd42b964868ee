#include <cmath>
#include <string>

#include "cli/args.h"
#include "cli/workloads.h"

namespace smla::cli {
namespace {

class SparsePrefill final : public Workload {
 public:
  SparsePrefill(const SparsePrefillSpec& s, uint64_t seed) : s_(s) {
    if (s.s_q < 1 || s.h_q < 1 || s.topk < 1 || s.s_kv < 1)
      throw UsageError("sparse_prefill needs s_q, h_q, topk and s_kv >= 1");
    if (s.d_qk != 576 && s.d_qk != 512) throw UsageError("--d_qk must be 576 or 512, got " + std::to_string(s.d_qk));
    if (s.topk > s.s_kv)
      throw UsageError("topk " + std::to_string(s.topk) + " needs s_kv >= topk, got " + std::to_string(s.s_kv));
    units_ = s.s_q;
    rows_per_unit_ = s.h_q;
    Rng rng(seed);

    q_ = Array::make(DType::bf16, {s.s_q, s.h_q, s.d_qk});
    fill_bf16(q_.h<uint16_t>(), q_.numel(), stream_seed(seed, 1));
    kv_ = Array::make(DType::bf16, {s.s_kv, s.d_qk});
    fill_bf16(kv_.h<uint16_t>(), kv_.numel(), stream_seed(seed, 2));
    indices_ = Array::make(DType::i32, {s.s_q, s.topk});
    int32_t* idx = indices_.h<int32_t>();
    std::vector<int32_t> perm(static_cast<size_t>(s.s_kv));
    for (int64_t p = 0; p < s.s_kv; ++p) perm[static_cast<size_t>(p)] = static_cast<int32_t>(p);
    for (int64_t t = 0; t < s.s_q; ++t) sample_distinct(rng, perm, s.topk, idx + t * s.topk);
    mix_invalid(idx, s.s_q, s.topk, invalid_per_list(s.topk), rng);
    if (s.sink) {
      sink_ = Array::make(DType::f32, {s.h_q});
      fill_f32(sink_.h<float>(), s.h_q, stream_seed(seed, 3), 4.0f, 9.0f);
    }
    for (Array* a : {&q_, &kv_, &indices_, &sink_}) add_input(a);
    make_outputs(DType::bf16, {s.s_q, s.h_q}, true);
  }

  Op op() const override { return Op::sparse_prefill; }

  std::string shape(int64_t units) const override {
    return "s_q=" + std::to_string(units) + " h_q=" + std::to_string(s_.h_q) + " d_qk=" + std::to_string(s_.d_qk) +
           " topk=" + std::to_string(s_.topk) + " s_kv=" + std::to_string(s_.s_kv) + " bf16" + (s_.sink ? " sink" : "");
  }

  KernelConfig kernel_config(Backend b) const override {
    KernelConfig c;
    c.op = Op::sparse_prefill;
    c.backend = b;
    c.format = CacheFormat::bf16;
    c.d_qk = s_.d_qk;
    c.h_q = s_.h_q;
    c.topk = s_.topk;
    c.s_q = 1;  // prefill query tokens are independent rows, not speculative decode tokens
    return c;
  }

  size_t workspace_size(Backend b, int64_t units) const override { return sparse_prefill_workspace_size(args(b, units)); }
  void launch(Backend b, int64_t units, const Exec& exec) const override { sparse_prefill(args(b, units), exec); }

  PerfCount count(int64_t units) const override {
    KeySet ks;
    ks.indices = indices_.h<int32_t>();
    ks.lists = units;
    ks.topk = s_.topk;
    ks.num_slots = s_.s_kv;
    ks.bytes_per_token = 2 * s_.d_qk;
    PerfCount c = count_sparse_keys({ks}, s_.h_q, s_.d_qk);
    c.bytes += attention_io_bytes(units * s_.h_q, s_.d_qk, 2, 2, 2, s_.sink ? s_.h_q : 0);
    return c;
  }

  RowData reference_row(int64_t row) const override {
    const int64_t t = row / s_.h_q, h = row % s_.h_q;
    const int32_t* idx = indices_.h<int32_t>() + t * s_.topk;
    std::vector<double> keys;
    for (int j = 0; j < s_.topk; ++j) {
      if (idx[j] < 0 || idx[j] >= s_.s_kv) continue;
      const std::vector<double> k = bf16_row(kv_, idx[j], s_.d_qk);
      keys.insert(keys.end(), k.begin(), k.end());
    }
    const double sink = s_.sink ? sink_.h<float>()[h] : 0.0;
    RowData r = attend_f64(bf16_row(q_, row, s_.d_qk), keys, s_.d_qk, 1.0 / std::sqrt(static_cast<double>(s_.d_qk)),
                           s_.sink ? &sink : nullptr);
    r.has_max_logit = true;
    return r;
  }

 private:
  SparsePrefillArgs args(Backend b, int64_t units) const {
    const Device d = device_of(b);
    SparsePrefillArgs a;
    a.q = q_.view(d, units);
    a.kv = kv_.view(d);
    a.indices = indices_.view(d, units);
    a.attn_sink = sink_.view(d);
    a.out = outputs(b).out.view(d, units);
    a.lse = outputs(b).lse.view(d, units);
    a.max_logits = outputs(b).max_logits.view(d, units);
    return a;
  }

  SparsePrefillSpec s_;
  Array q_, kv_, indices_, sink_;
};

}  // namespace

std::unique_ptr<Workload> make_sparse_prefill(const SparsePrefillSpec& s, uint64_t seed) {
  return std::make_unique<SparsePrefill>(s, seed);
}

}  // namespace smla::cli
