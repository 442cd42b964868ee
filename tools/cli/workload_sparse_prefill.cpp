#include <cmath>
#include <string>

#include "cli/args.h"
#include "cli/paged_key_set.h"
#include "cli/workloads.h"

namespace smla::cli {
namespace {

// What both sparse prefill workloads share: q, the sink, the outputs, the call and the counts;
// a key source (bf16 kv rows, or slots of a paged cache) fills in the rest.
class SparsePrefillBase : public Workload {
 public:
  Op op() const override { return Op::sparse_prefill; }

  KernelConfig kernel_config(Backend b) const override {
    KernelConfig c;
    c.op = Op::sparse_prefill;
    c.backend = b;
    c.d_qk = s_.d_qk;
    c.h_q = s_.h_q;
    c.topk = s_.topk;
    c.s_q = 1;  // prefill query tokens are independent rows, not speculative decode tokens
    describe_keys(c);
    return c;
  }

  size_t workspace_size(Backend b, int64_t units) const override { return sparse_prefill_workspace_size(args(b, units)); }
  void launch(Backend b, int64_t units, const Exec& exec) const override { sparse_prefill(args(b, units), exec); }

  PerfCount count(int64_t units) const override {
    PerfCount c = count_sparse_keys({key_set(units)}, s_.h_q, s_.d_qk);
    c.bytes += attention_io_bytes(units * s_.h_q, s_.d_qk, 2, 2, 2, s_.sink ? s_.h_q : 0);
    return c;
  }

  RowData reference_row(int64_t row) const override {
    const int64_t t = row / s_.h_q, h = row % s_.h_q;
    std::vector<double> keys;
    gather(t, keys);
    const double sink = s_.sink ? sink_.h<float>()[h] : 0.0;
    RowData r = attend_f64(bf16_row(q_, row, s_.d_qk), keys, s_.d_qk, 1.0 / std::sqrt(static_cast<double>(s_.d_qk)),
                           s_.sink ? &sink : nullptr);
    r.has_max_logit = true;
    return r;
  }

 protected:
  explicit SparsePrefillBase(const SparsePrefillSpec& s) : s_(s) {
    units_ = s.s_q;
    rows_per_unit_ = s.h_q;
  }

  // topk_length with every token's full list: the same keys as without it, through the path of
  // engines that pass it.
  void make_lengths() {
    if (s_.lengths) lengths_ = filled_i32(s_.s_q, s_.topk);
  }

  // The shape's trailing options, as both key sources print them.
  std::string options() const { return std::string(s_.sink ? " sink" : "") + (s_.lengths ? " lengths" : ""); }

  void make_sink(uint64_t seed) {
    if (!s_.sink) return;
    sink_ = Array::make(DType::f32, {s_.h_q});
    fill_f32(sink_.h<float>(), s_.h_q, stream_seed(seed, 3), 4.0f, 9.0f);
  }

  // The key source: its format (and page size) in the kernel config, its keys' SPEC §7 counts,
  // token t's keys in float64, and its tensors in the call.
  virtual void describe_keys(KernelConfig& c) const = 0;
  virtual KeySet key_set(int64_t units) const = 0;
  virtual void gather(int64_t t, std::vector<double>& keys) const = 0;
  virtual void set_keys(SparsePrefillArgs& a, Device d, int64_t units) const = 0;

  SparsePrefillSpec s_;
  Array q_, sink_, lengths_;

 private:
  SparsePrefillArgs args(Backend b, int64_t units) const {
    const Device d = device_of(b);
    SparsePrefillArgs a;
    a.q = q_.view(d, units);
    set_keys(a, d, units);
    a.topk_length = lengths_.view(d, units);
    a.attn_sink = sink_.view(d);
    a.out = outputs(b).out.view(d, units);
    a.lse = outputs(b).lse.view(d, units);
    a.max_logits = outputs(b).max_logits.view(d, units);
    return a;
  }
};

// Keys from an unpaged bf16 kv: each token's topk rows drawn without repeats from [0, s_kv).
class SparsePrefill final : public SparsePrefillBase {
 public:
  SparsePrefill(const SparsePrefillSpec& s, uint64_t seed) : SparsePrefillBase(s) {
    if (s.s_q < 1 || s.h_q < 1 || s.topk < 1 || s.s_kv < 1)
      throw UsageError("sparse_prefill needs s_q, h_q, topk and s_kv >= 1");
    if (s.d_qk != 576 && s.d_qk != 512) throw UsageError("--d_qk must be 576 or 512, got " + std::to_string(s.d_qk));
    if (s.topk > s.s_kv)
      throw UsageError("topk " + std::to_string(s.topk) + " needs s_kv >= topk, got " + std::to_string(s.s_kv));
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
    make_sink(seed);
    make_lengths();
    for (Array* a : {&q_, &kv_, &indices_, &sink_, &lengths_}) add_input(a);
    make_outputs(DType::bf16, {s.s_q, s.h_q}, true);
  }

  std::string shape(int64_t units) const override {
    return "s_q=" + std::to_string(units) + " h_q=" + std::to_string(s_.h_q) + " d_qk=" + std::to_string(s_.d_qk) +
           " topk=" + std::to_string(s_.topk) + " s_kv=" + std::to_string(s_.s_kv) + " bf16" + options();
  }

 private:
  void describe_keys(KernelConfig& c) const override { c.format = CacheFormat::bf16; }

  KeySet key_set(int64_t units) const override {
    KeySet ks;
    ks.indices = indices_.h<int32_t>();
    ks.lists = units;
    ks.topk = s_.topk;
    ks.num_slots = s_.s_kv;
    ks.bytes_per_token = 2 * s_.d_qk;
    return ks;
  }

  void gather(int64_t t, std::vector<double>& keys) const override {
    const int32_t* idx = indices_.h<int32_t>() + t * s_.topk;
    for (int j = 0; j < s_.topk; ++j) {
      if (idx[j] < 0 || idx[j] >= s_.s_kv) continue;
      const std::vector<double> k = bf16_row(kv_, idx[j], s_.d_qk);
      keys.insert(keys.end(), k.begin(), k.end());
    }
  }

  void set_keys(SparsePrefillArgs& a, Device d, int64_t units) const override {
    a.kv = kv_.view(d);
    a.indices = indices_.view(d, units);
  }

  Array kv_, indices_;
};

// Keys that are slots of a paged cache (SparsePrefillArgs::cache): one prompt of s_kv positions
// held as a serving engine holds it, s_q query tokens each naming topk slots.
class SparsePrefillPaged final : public SparsePrefillBase {
 public:
  SparsePrefillPaged(const SparsePrefillSpec& s, uint64_t seed) : SparsePrefillBase(s) {
    if (s.s_q < 1 || s.h_q < 1 || s.topk < 1 || s.s_kv < 1 || s.page < 1)
      throw UsageError("sparse_prefill needs s_q, h_q, topk, s_kv and page >= 1");
    if (!is_packed_format(s.format) && s.format != CacheFormat::bf16)
      throw UsageError(std::string("sparse_prefill reads fp8_ds_mla, fp8_model1 or bf16 caches, not ") +
                       format_name(s.format));
    if (s.d_qk != 576 && s.d_qk != 512) throw UsageError("--d_qk must be 576 or 512, got " + std::to_string(s.d_qk));
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
    make_sink(seed);
    make_lengths();
    for (Array* a : {&q_, &keys_.cache, &keys_.indices, &sink_, &lengths_}) add_input(a);
    make_outputs(DType::bf16, {s.s_q, s.h_q}, true);
  }

  std::string shape(int64_t units) const override {
    return "s_q=" + std::to_string(units) + " h_q=" + std::to_string(s_.h_q) + " d_qk=" + std::to_string(s_.d_qk) +
           " topk=" + std::to_string(s_.topk) + " s_kv=" + std::to_string(keys_.region) + " " + format_name(s_.format) +
           " p" + std::to_string(s_.page) + options();
  }

 private:
  void describe_keys(KernelConfig& c) const override {
    c.format = s_.format;
    c.page_size = s_.page;
  }
  // The counts of the bf16 kv workload, with the cache format's bytes per distinct slot read.
  KeySet key_set(int64_t units) const override { return keys_.key_set(units); }
  void gather(int64_t t, std::vector<double>& keys) const override { keys_.gather(t, keys); }
  void set_keys(SparsePrefillArgs& a, Device d, int64_t units) const override {
    a.cache = paged_cache(keys_.cache, keys_.format, d);
    a.indices = keys_.indices.view(d, units);
  }

  PagedKeySet keys_;
};

}  // namespace

std::unique_ptr<Workload> make_sparse_prefill(const SparsePrefillSpec& s, uint64_t seed) {
  return std::make_unique<SparsePrefill>(s, seed);
}

std::unique_ptr<Workload> make_sparse_prefill_paged(const SparsePrefillSpec& s, uint64_t seed) {
  return std::make_unique<SparsePrefillPaged>(s, seed);
}

}  // namespace smla::cli
