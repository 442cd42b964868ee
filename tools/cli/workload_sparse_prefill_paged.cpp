#include <cmath>
#include <string>

#include "cli/args.h"
#include "cli/paged_key_set.h"
#include "cli/workloads.h"

namespace smla::cli {
namespace {

// Sparse prefill whose keys are slots of a paged cache (SparsePrefillArgs::cache): one prompt
// of s_kv positions held as a serving engine holds it, s_q query tokens each naming topk slots.
class SparsePrefillPaged final : public Workload {
 public:
  SparsePrefillPaged(const SparsePrefillSpec& s, uint64_t seed) : s_(s) {
    if (s.s_q < 1 || s.h_q < 1 || s.topk < 1 || s.s_kv < 1 || s.page < 1)
      throw UsageError("sparse_prefill needs s_q, h_q, topk, s_kv and page >= 1");
    if (!is_packed_format(s.format) && s.format != CacheFormat::bf16)
      throw UsageError(std::string("sparse_prefill reads fp8_ds_mla, fp8_model1 or bf16 caches, not ") +
                       format_name(s.format));
    if (s.d_qk != 576 && s.d_qk != 512) throw UsageError("--d_qk must be 576 or 512, got " + std::to_string(s.d_qk));
    units_ = s.s_q;
    rows_per_unit_ = s.h_q;
    Rng rng(seed);

    PagedKeySetSpec k;
    k.format = s.format;
    k.d_qk = s.d_qk;
    k.page = s.page;
    k.requests = 1;
    k.region = s.s_kv;
    k.lists = {s.s_q};
    k.lists_per_request = s.s_q;
    k.topk = s.topk;
    k.region_flag = "s_kv";
    keys_ = make_paged_key_set(k, rng, stream_seed(seed, 1));

    const int64_t qs = s.d_qk + kQHeadPad;
    q_ = Array::make_strided(DType::bf16, {s.s_q, s.h_q, s.d_qk}, {s.h_q * qs, qs, 1},
                             static_cast<size_t>(s.s_q * s.h_q * qs) * 2);
    fill_bf16(q_.h<uint16_t>(), static_cast<int64_t>(q_.host.bytes() / 2), stream_seed(seed, 2));
    if (s.sink) {
      sink_ = Array::make(DType::f32, {s.h_q});
      fill_f32(sink_.h<float>(), s.h_q, stream_seed(seed, 3), 4.0f, 9.0f);
    }
    for (Array* a : {&q_, &keys_.cache, &keys_.indices, &sink_}) add_input(a);
    make_outputs(DType::bf16, {s.s_q, s.h_q}, true);
  }

  Op op() const override { return Op::sparse_prefill; }

  std::string shape(int64_t units) const override {
    return "s_q=" + std::to_string(units) + " h_q=" + std::to_string(s_.h_q) + " d_qk=" + std::to_string(s_.d_qk) +
           " topk=" + std::to_string(s_.topk) + " s_kv=" + std::to_string(keys_.region) + " " + format_name(s_.format) +
           " p" + std::to_string(s_.page) + (s_.sink ? " sink" : "");
  }

  KernelConfig kernel_config(Backend b) const override {
    KernelConfig c;
    c.op = Op::sparse_prefill;
    c.backend = b;
    c.format = s_.format;
    c.d_qk = s_.d_qk;
    c.h_q = s_.h_q;
    c.page_size = s_.page;
    c.topk = s_.topk;
    c.s_q = 1;  // prefill query tokens are independent rows, not speculative decode tokens
    return c;
  }

  size_t workspace_size(Backend b, int64_t units) const override { return sparse_prefill_workspace_size(args(b, units)); }
  void launch(Backend b, int64_t units, const Exec& exec) const override { sparse_prefill(args(b, units), exec); }

  // As the bf16 kv workload counts, with the cache format's bytes per distinct slot read.
  PerfCount count(int64_t units) const override {
    PerfCount c = count_sparse_keys({keys_.key_set(units)}, s_.h_q, s_.d_qk);
    c.bytes += attention_io_bytes(units * s_.h_q, s_.d_qk, 2, 2, 2, s_.sink ? s_.h_q : 0);
    return c;
  }

  RowData reference_row(int64_t row) const override {
    const int64_t t = row / s_.h_q, h = row % s_.h_q;
    std::vector<double> keys;
    keys_.gather(t, keys);
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
    a.cache = paged_cache(keys_.cache, keys_.format, d);
    a.indices = keys_.indices.view(d, units);
    a.attn_sink = sink_.view(d);
    a.out = outputs(b).out.view(d, units);
    a.lse = outputs(b).lse.view(d, units);
    a.max_logits = outputs(b).max_logits.view(d, units);
    return a;
  }

  SparsePrefillSpec s_;
  PagedKeySet keys_;
  Array q_, sink_;
};

}  // namespace

std::unique_ptr<Workload> make_sparse_prefill_paged(const SparsePrefillSpec& s, uint64_t seed) {
  return std::make_unique<SparsePrefillPaged>(s, seed);
}

}  // namespace smla::cli
