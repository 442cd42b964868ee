#include <cmath>
#include <string>

#include "cli/args.h"
#include "cli/paged_key_set.h"
#include "cli/workloads.h"

namespace smla::cli {
namespace {

class SparseDecode final : public Workload {
 public:
  SparseDecode(const SparseDecodeSpec& s, uint64_t seed) : s_(s) {
    if (s.b < 1 || s.s_q < 1 || s.h_q < 1 || s.topk < 1 || s.page < 1 || s.region < 1)
      throw UsageError("sparse_decode needs b, s_q, h_q, topk, page and seqlen >= 1");
    if (!is_packed_format(s.format) && s.format != CacheFormat::bf16)
      throw UsageError(std::string("sparse_decode reads fp8_ds_mla, fp8_model1 or bf16 caches, not ") +
                       format_name(s.format));
    d_qk_ = s.format == CacheFormat::fp8_ds_mla   ? DsMlaLayout::d_qk
            : s.format == CacheFormat::fp8_model1 ? Model1Layout::d_qk
                                                  : s.d_qk;
    units_ = s.b;
    rows_per_unit_ = int64_t(s.s_q) * s.h_q;
    Rng rng(seed);

    main_ = make_paged_key_set(key_spec(s.page, s.region, s.topk, s.window, "seqlen"), rng, stream_seed(seed, 1));
    if (s.extra_topk > 0)
      extra_ = make_paged_key_set(key_spec(s.extra_page, s.extra_region, s.extra_topk, false, "extra_seqlen"), rng,
                                  stream_seed(seed, 2));

    const int64_t qs = d_qk_ + kQHeadPad;
    q_ = Array::make_strided(DType::bf16, {s.b, s.s_q, s.h_q, d_qk_}, {s.s_q * s.h_q * qs, s.h_q * qs, qs, 1},
                             static_cast<size_t>(s.b * s.s_q * s.h_q * qs) * 2);
    fill_bf16(q_.h<uint16_t>(), static_cast<int64_t>(q_.host.bytes() / 2), stream_seed(seed, 3));
    if (s.sink) {
      sink_ = Array::make(DType::f32, {s.h_q});
      // Around the lse of a few hundred to a few thousand keys, so the sink visibly scales out.
      fill_f32(sink_.h<float>(), s.h_q, stream_seed(seed, 4), 4.0f, 9.0f);
    }
    if (s.lengths) {
      // Every request's full list: the same keys as without topk_length, through the device
      // schedule's path (the split count made on the device from the lengths: by the kernels up
      // to 32 requests, else by the schedule kernel).
      lengths_ = filled_i32(s.b, s.topk);
      if (s.extra_topk > 0) extra_lengths_ = filled_i32(s.b, s.extra_topk);
    }
    for (Array* a : {&q_, &main_.cache, &main_.indices, &extra_.cache, &extra_.indices, &sink_, &lengths_, &extra_lengths_})
      add_input(a);
    make_outputs(DType::bf16, {s.b, s.s_q, s.h_q}, false);
  }

  Op op() const override { return Op::sparse_decode; }

  std::string shape(int64_t units) const override {
    std::string r = "b=" + std::to_string(units) + " s_q=" + std::to_string(s_.s_q) + " h_q=" + std::to_string(s_.h_q) +
                    (s_.window ? " window=" : " topk=") + std::to_string(s_.topk) + " " + format_name(s_.format) +
                    " p" + std::to_string(s_.page);
    if (s_.format == CacheFormat::bf16) r += " d_qk=" + std::to_string(d_qk_);
    if (s_.extra_topk > 0) r += " +extra " + std::to_string(s_.extra_topk) + " p" + std::to_string(s_.extra_page);
    if (s_.sink) r += " sink";
    if (s_.lengths) r += " lengths";
    return r;
  }

  KernelConfig kernel_config(Backend b) const override {
    KernelConfig c;
    c.op = Op::sparse_decode;
    c.backend = b;
    c.format = s_.format;
    c.d_qk = d_qk_;
    c.h_q = s_.h_q;
    c.page_size = s_.page;
    c.topk = s_.topk;
    c.s_q = s_.s_q;
    return c;
  }

  size_t workspace_size(Backend b, int64_t units) const override { return sparse_decode_workspace_size(args(b, units)); }
  void launch(Backend b, int64_t units, const Exec& exec) const override { sparse_decode(args(b, units), exec); }

  PerfCount count(int64_t units) const override {
    std::vector<KeySet> sets{main_.key_set(units * s_.s_q)};
    if (s_.extra_topk > 0) sets.push_back(extra_.key_set(units * s_.s_q));
    if (s_.lengths) {  // one length a request, for its s_q lists
      const Array* lengths[] = {&lengths_, &extra_lengths_};
      for (size_t i = 0; i < sets.size(); ++i) {
        sets[i].lengths = lengths[i]->h<int32_t>();
        sets[i].lists_per_length = s_.s_q;
      }
    }
    PerfCount c = count_sparse_keys(sets, s_.h_q, d_qk_);
    c.bytes += attention_io_bytes(units * rows_per_unit_, d_qk_, 2, 2, 1, s_.sink ? s_.h_q : 0);
    return c;
  }

  RowData reference_row(int64_t row) const override {
    const int64_t list = row / s_.h_q, h = row % s_.h_q;
    std::vector<double> keys;
    main_.gather(list, keys);
    if (s_.extra_topk > 0) extra_.gather(list, keys);
    const double sink = s_.sink ? sink_.h<float>()[h] : 0.0;
    return attend_f64(bf16_row(q_, row, d_qk_), keys, d_qk_, 1.0 / std::sqrt(static_cast<double>(d_qk_)),
                      s_.sink ? &sink : nullptr);
  }

 private:
  // A key set of this batch: b requests of `region` positions, s_q lists each.
  PagedKeySetSpec key_spec(int page, int64_t region, int topk, bool window, const char* region_flag) const {
    PagedKeySetSpec k;
    k.format = s_.format;
    k.d_qk = d_qk_;
    k.page = page;
    k.requests = s_.b;
    k.region = region;
    k.lists = {s_.b, s_.s_q};
    k.lists_per_request = s_.s_q;
    k.topk = topk;
    k.window = window;
    k.region_flag = region_flag;
    return k;
  }

  SparseDecodeArgs args(Backend b, int64_t units) const {
    const Device d = device_of(b);
    SparseDecodeArgs a;
    a.q = q_.view(d, units);
    a.cache = paged_cache(main_.cache, main_.format, d);
    a.indices = main_.indices.view(d, units);
    a.topk_length = lengths_.view(d, units);
    if (s_.extra_topk > 0) {
      a.extra_cache = paged_cache(extra_.cache, extra_.format, d);
      a.extra_indices = extra_.indices.view(d, units);
      a.extra_topk_length = extra_lengths_.view(d, units);
    }
    a.attn_sink = sink_.view(d);
    a.out = outputs(b).out.view(d, units);
    a.lse = outputs(b).lse.view(d, units);
    return a;
  }

  SparseDecodeSpec s_;
  int d_qk_ = 576;
  PagedKeySet main_, extra_;
  Array q_, sink_, lengths_, extra_lengths_;
};

}  // namespace

std::unique_ptr<Workload> make_sparse_decode(const SparseDecodeSpec& s, uint64_t seed) {
  return std::make_unique<SparseDecode>(s, seed);
}

}  // namespace smla::cli
