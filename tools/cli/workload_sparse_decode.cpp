#include <cmath>
#include <string>

#include "cli/args.h"
#include "cli/workloads.h"

namespace smla::cli {
namespace {

// Padding that makes q and the index lists non-contiguous views, as an engine's are (q is a
// slice of a larger projection, index rows come from a wider top-k buffer).
constexpr int64_t kQHeadPad = 64;   // elements after each q head row
constexpr int64_t kIndexPad = 16;   // entries after each index list

// One key set: a paged cache and its [b, s_q, topk] index lists (rows `stride` apart).
struct KeySetData {
  CacheFormat format = CacheFormat::fp8_ds_mla;
  int page = 64;
  int64_t region = 0;  // positions per request
  int topk = 0;
  int64_t stride = 0;  // entries between consecutive index lists
  Array cache, indices;

  int64_t num_slots() const { return cache.shape[0] * page; }
  const int32_t* list(int64_t l) const { return indices.h<int32_t>() + l * stride; }
};

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

    build_set(main_, s.page, s.region, s.topk, s.window, rng, stream_seed(seed, 1));
    if (s.extra_topk > 0) build_set(extra_, s.extra_page, s.extra_region, s.extra_topk, false, rng, stream_seed(seed, 2));

    const int64_t qs = d_qk_ + kQHeadPad;
    q_ = Array::make_strided(DType::bf16, {s.b, s.s_q, s.h_q, d_qk_}, {s.s_q * s.h_q * qs, s.h_q * qs, qs, 1},
                             static_cast<size_t>(s.b * s.s_q * s.h_q * qs) * 2);
    fill_bf16(q_.h<uint16_t>(), static_cast<int64_t>(q_.host.bytes() / 2), stream_seed(seed, 3));
    if (s.sink) {
      sink_ = Array::make(DType::f32, {s.h_q});
      // Around the lse of a few hundred to a few thousand keys, so the sink visibly scales out.
      fill_f32(sink_.h<float>(), s.h_q, stream_seed(seed, 4), 4.0f, 9.0f);
    }
    for (Array* a : {&q_, &main_.cache, &main_.indices, &extra_.cache, &extra_.indices, &sink_}) add_input(a);
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
    std::vector<KeySet> sets{key_set(main_, units)};
    if (s_.extra_topk > 0) sets.push_back(key_set(extra_, units));
    PerfCount c = count_sparse_keys(sets, s_.h_q, d_qk_);
    c.bytes += attention_io_bytes(units * rows_per_unit_, d_qk_, 2, 2, 1, s_.sink ? s_.h_q : 0);
    return c;
  }

  RowData reference_row(int64_t row) const override {
    const int64_t list = row / s_.h_q, h = row % s_.h_q;
    std::vector<double> keys;
    gather(main_, list, keys);
    if (s_.extra_topk > 0) gather(extra_, list, keys);
    const double sink = s_.sink ? sink_.h<float>()[h] : 0.0;
    return attend_f64(bf16_row(q_, row, d_qk_), keys, d_qk_, 1.0 / std::sqrt(static_cast<double>(d_qk_)),
                      s_.sink ? &sink : nullptr);
  }

 private:
  // Like a serving cache after hours of traffic: request i's positions map to slots through a
  // block table that is a random permutation of the whole cache, and every slot no list names
  // holds NaN bytes (a kernel that reads one shows it).
  void build_set(KeySetData& k, int page, int64_t region, int topk, bool window, Rng& rng, uint64_t seed) {
    k.format = s_.format;
    k.page = page;
    k.region = (region + page - 1) / page * page;
    k.topk = topk;
    k.stride = topk + kIndexPad;
    if (window && s_.s_q > k.region)
      throw UsageError("the sliding window needs s_q <= seqlen (tokens per request)");
    if (!window && topk > k.region)
      throw UsageError("topk " + std::to_string(topk) + " needs at least that many tokens per request, got " +
                       std::to_string(k.region) + " (raise --seqlen)");
    const int64_t b = s_.b, s_q = s_.s_q, pages_per_req = k.region / page;
    k.cache = make_cache_array(k.format, d_qk_, b * pages_per_req, page, false);
    k.cache.host.fill(0xff);
    std::vector<int32_t> all(static_cast<size_t>(b * pages_per_req)), table(all.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int32_t>(i);
    sample_distinct(rng, all, static_cast<int64_t>(all.size()), table.data());
    auto slot = [&](int64_t req, int64_t pos) -> int32_t {
      return static_cast<int32_t>(table[static_cast<size_t>(req * pages_per_req + pos / page)] * int64_t(page) + pos % page);
    };
    k.indices = Array::make_strided(DType::i32, {b, s_q, topk}, {s_q * k.stride, k.stride, 1},
                                    static_cast<size_t>(b * s_q * k.stride) * 4);
    int32_t* idx = k.indices.h<int32_t>();
    std::fill(idx, idx + b * s_q * k.stride, -1);
    std::vector<int32_t> perm(static_cast<size_t>(k.region)), pos(static_cast<size_t>(topk));
    for (int64_t p = 0; p < k.region; ++p) perm[static_cast<size_t>(p)] = static_cast<int32_t>(p);
    for (int64_t i = 0; i < b; ++i) {
      for (int64_t t = 0; t < s_q; ++t) {
        int32_t* list = idx + (i * s_q + t) * k.stride;
        if (window) {
          const int64_t at = k.region - s_q + t;
          for (int j = 0; j < topk; ++j) {
            const int64_t p = at - topk + 1 + j;
            list[j] = p >= 0 ? slot(i, p) : -1;
          }
        } else {
          sample_distinct(rng, perm, topk, pos.data());
          for (int j = 0; j < topk; ++j) list[j] = slot(i, pos[static_cast<size_t>(j)]);
        }
        mix_invalid(list, 1, topk, invalid_per_list(topk), rng);
      }
    }
    write_random_rows(paged_cache(k.cache, k.format, kCPU), touched_slots(idx, b * s_q * k.stride, k.num_slots()),
                      seed);
  }

  KeySet key_set(const KeySetData& k, int64_t units) const {
    KeySet ks;
    ks.indices = k.indices.h<int32_t>();
    ks.lists = units * s_.s_q;
    ks.topk = k.topk;
    ks.stride = k.stride;
    ks.num_slots = k.num_slots();
    ks.bytes_per_token = bytes_per_token(k.format, d_qk_);
    return ks;
  }

  void gather(const KeySetData& k, int64_t list, std::vector<double>& keys) const {
    const PagedCache c = paged_cache(k.cache, k.format, kCPU);
    const int32_t* idx = k.list(list);
    for (int j = 0; j < k.topk; ++j) {
      if (idx[j] < 0 || idx[j] >= k.num_slots()) continue;
      const size_t at = keys.size();
      keys.resize(at + static_cast<size_t>(d_qk_));
      decode_key_row(c, idx[j], 0, keys.data() + at);
    }
  }

  SparseDecodeArgs args(Backend b, int64_t units) const {
    const Device d = device_of(b);
    SparseDecodeArgs a;
    a.q = q_.view(d, units);
    a.cache = paged_cache(main_.cache, main_.format, d);
    a.indices = main_.indices.view(d, units);
    if (s_.extra_topk > 0) {
      a.extra_cache = paged_cache(extra_.cache, extra_.format, d);
      a.extra_indices = extra_.indices.view(d, units);
    }
    a.attn_sink = sink_.view(d);
    a.out = outputs(b).out.view(d, units);
    a.lse = outputs(b).lse.view(d, units);
    return a;
  }

  SparseDecodeSpec s_;
  int d_qk_ = 576;
  KeySetData main_, extra_;
  Array q_, sink_;
};

}  // namespace

std::unique_ptr<Workload> make_sparse_decode(const SparseDecodeSpec& s, uint64_t seed) {
  return std::make_unique<SparseDecode>(s, seed);
}

}  // namespace smla::cli
