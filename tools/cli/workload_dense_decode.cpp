#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "cli/args.h"
#include "cli/workloads.h"

namespace smla::cli {
namespace {

// fp8_e4m3 caches quantize with one per-tensor scale: |x| <= 1 maps to at most 256 < 448.
constexpr float kFp8KScale = 1.0f / 256.0f;
// fp8 q (--q_fp8): |q| <= 1 stored as q * 16.
constexpr float kFp8QScale = 1.0f / 16.0f;

class DenseDecode final : public Workload {
 public:
  DenseDecode(const DenseDecodeSpec& s, uint64_t seed) : s_(s) {
    if (s.b < 1 || s.s_q < 1 || s.h_q < 1 || s.page < 1 || s.seqlen < 1)
      throw UsageError("dense_decode needs b, s_q, h_q, page and seqlen >= 1");
    if (s.format != CacheFormat::bf16 && s.format != CacheFormat::fp16 && s.format != CacheFormat::fp8_e4m3)
      throw UsageError(std::string("dense_decode reads bf16, fp16 or fp8_e4m3 caches, not ") + format_name(s.format));
    if (s.d_qk != 576 && s.d_qk != 512) throw UsageError("--d_qk must be 576 or 512, got " + std::to_string(s.d_qk));
    if (s.q_fp8 && s.format != CacheFormat::fp8_e4m3)
      throw UsageError(std::string("--q_fp8 needs --format fp8_e4m3, got ") + format_name(s.format));
    units_ = s.b;
    rows_per_unit_ = int64_t(s.s_q) * s.h_q;
    k_scale_ = s.format == CacheFormat::fp8_e4m3 ? kFp8KScale : 1.0f;
    q_dtype_ = s.q_fp8 ? DType::fp8_e4m3 : (s.format == CacheFormat::fp16 ? DType::f16 : DType::bf16);
    Rng rng(seed);

    max_blocks_ = (s.seqlen + s.page - 1) / s.page;
    const int64_t num_blocks = s.b * max_blocks_;
    cache_ = make_cache_array(s.format, s.d_qk, num_blocks, s.page, true);
    block_table_ = Array::make(DType::i32, {s.b, max_blocks_});
    int32_t* bt = block_table_.h<int32_t>();
    std::iota(bt, bt + num_blocks, 0);
    for (int64_t k = num_blocks - 1; k > 0; --k)
      std::swap(bt[k], bt[static_cast<int64_t>(rng.below(static_cast<uint64_t>(k + 1)))]);
    seqlens_ = Array::make(DType::i32, {s.b});
    std::fill(seqlens_.h<int32_t>(), seqlens_.h<int32_t>() + s.b, static_cast<int32_t>(s.seqlen));

    std::vector<int64_t> slots(static_cast<size_t>(num_blocks * s.page));
    std::iota(slots.begin(), slots.end(), 0);
    write_random_rows(cache_view(kCPU), slots, stream_seed(seed, 1));

    q_ = Array::make(q_dtype_, {s.b, s.s_q, s.h_q, s.d_qk});
    if (q_dtype_ == DType::bf16) {
      fill_bf16(q_.h<uint16_t>(), q_.numel(), stream_seed(seed, 2));
    } else if (q_dtype_ == DType::fp8_e4m3) {
      // q in [-1, 1] stored as q / q_scale: e4m3 values up to 16, well inside its range.
      Rng r(stream_seed(seed, 2));
      for (int64_t k = 0; k < q_.numel(); ++k)
        q_.h<uint8_t>()[k] = float_to_e4m3(static_cast<float>(r.uniform(-1.0, 1.0)) / kFp8QScale);
    } else {
      Rng r(stream_seed(seed, 2));
      for (int64_t k = 0; k < q_.numel(); ++k)
        q_.h<uint16_t>()[k] = float_to_fp16_bits(static_cast<float>(r.uniform(-1.0, 1.0)));
    }
    if (s.sink) {
      sink_ = Array::make(DType::f32, {s.h_q});
      fill_f32(sink_.h<float>(), s.h_q, stream_seed(seed, 3), 4.0f, 9.0f);
    }
    for (Array* a : {&q_, &cache_, &block_table_, &seqlens_, &sink_}) add_input(a);
    make_outputs(q_dtype_ == DType::fp8_e4m3 ? DType::bf16 : q_dtype_, {s.b, s.s_q, s.h_q}, false);
  }

  Op op() const override { return Op::dense_decode; }

  std::string shape(int64_t units) const override {
    return "b=" + std::to_string(units) + " s_q=" + std::to_string(s_.s_q) + " h_q=" + std::to_string(s_.h_q) +
           " seqlen=" + std::to_string(s_.seqlen) + " " + format_name(s_.format) + " p" + std::to_string(s_.page) +
           " d_qk=" + std::to_string(s_.d_qk) + (s_.causal ? " causal" : "") + (s_.sink ? " sink" : "") +
           (s_.q_fp8 ? " q_fp8" : "");
  }

  KernelConfig kernel_config(Backend b) const override {
    KernelConfig c;
    c.op = Op::dense_decode;
    c.backend = b;
    c.format = s_.format;
    c.q_dtype = q_dtype_;
    c.d_qk = s_.d_qk;
    c.h_q = s_.h_q;
    c.page_size = s_.page;
    c.s_q = s_.s_q;
    return c;
  }

  size_t workspace_size(Backend b, int64_t units) const override { return dense_decode_workspace_size(args(b, units)); }
  void launch(Backend b, int64_t units, const Exec& exec) const override { dense_decode(args(b, units), exec); }

  PerfCount count(int64_t units) const override {
    PerfCount c = count_dense_decode(seqlens_.h<int32_t>(), units, s_.s_q, s_.h_q, 1, s_.d_qk,
                                     bytes_per_token(s_.format, s_.d_qk), s_.page, s_.causal);
    c.bytes += attention_io_bytes(units * rows_per_unit_, s_.d_qk, s_.q_fp8 ? 1 : 2, 2, 1, s_.sink ? s_.h_q : 0);
    return c;
  }

  RowData reference_row(int64_t row) const override {
    const int64_t i = row / rows_per_unit_, t = (row / s_.h_q) % s_.s_q, h = row % s_.h_q;
    const int64_t L = seqlens_.h<int32_t>()[i];
    const int64_t n = s_.causal ? std::clamp<int64_t>(L - s_.s_q + t + 1, 0, L) : L;
    const PagedCache c = cache_view(kCPU);
    const int32_t* bt = block_table_.h<int32_t>() + i * max_blocks_;
    std::vector<double> keys(static_cast<size_t>(n * s_.d_qk));
    for (int64_t j = 0; j < n; ++j) decode_key_row(c, int64_t(bt[j / s_.page]) * s_.page + j % s_.page, 0,
                                                   keys.data() + j * s_.d_qk);
    std::vector<double> q(static_cast<size_t>(s_.d_qk));
    for (int k = 0; k < s_.d_qk; ++k) {
      const int64_t e = row * s_.d_qk + k;
      q[static_cast<size_t>(k)] = q_dtype_ == DType::fp8_e4m3 ? double(e4m3_to_float(q_.h<uint8_t>()[e])) * kFp8QScale
                                  : q_dtype_ == DType::f16   ? fp16_bits_to_float(q_.h<uint16_t>()[e])
                                                             : bf16_bits_to_float(q_.h<uint16_t>()[e]);
    }
    const double sink = s_.sink ? sink_.h<float>()[h] : 0.0;
    return attend_f64(q, keys, s_.d_qk, 1.0 / std::sqrt(static_cast<double>(s_.d_qk)), s_.sink ? &sink : nullptr);
  }

 private:
  PagedCache cache_view(Device d) const { return paged_cache(cache_, s_.format, d, k_scale_); }

  DenseDecodeArgs args(Backend b, int64_t units) const {
    const Device d = device_of(b);
    DenseDecodeArgs a;
    a.q = q_.view(d, units);
    a.cache = cache_view(d);
    a.block_table = block_table_.view(d, units);
    a.seqlens = seqlens_.view(d, units);
    a.causal = s_.causal;
    a.q_scale = s_.q_fp8 ? kFp8QScale : 1.0f;
    a.attn_sink = sink_.view(d);
    a.out = outputs(b).out.view(d, units);
    a.lse = outputs(b).lse.view(d, units);
    return a;
  }

  DenseDecodeSpec s_;
  float k_scale_ = 1.0f;
  DType q_dtype_ = DType::bf16;
  int64_t max_blocks_ = 0;
  Array q_, cache_, block_table_, seqlens_, sink_;
};

}  // namespace

std::unique_ptr<Workload> make_dense_decode(const DenseDecodeSpec& s, uint64_t seed) {
  return std::make_unique<DenseDecode>(s, seed);
}

}  // namespace smla::cli
