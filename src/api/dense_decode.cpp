// dense_decode (SPEC §4.3): host validation, then the backend the tensors live on.
#include <cmath>
#include <string>

#include "api/dispatch.h"
#include "api/validate.h"
#include "reference/reference.h"
#include "smla/ops.h"

namespace smla {

namespace {

using detail::kAny;

// q dtypes a cache format accepts: an fp8 cache also takes fp8 q with its own per-tensor
// scale (SGLang's descale_q); the element formats take q of their own dtype.
void check_q_dtype(const TensorView& q, CacheFormat f) {
  bool ok;
  std::string expected;
  switch (f) {
    case CacheFormat::fp16:
      ok = q.dtype == DType::f16;
      expected = detail::dtypes_string({DType::f16});
      break;
    case CacheFormat::fp8_e4m3:
      ok = q.dtype == DType::bf16 || q.dtype == DType::fp8_e4m3;
      expected = detail::dtypes_string({DType::bf16, DType::fp8_e4m3});
      break;
    default:
      ok = q.dtype == DType::bf16;
      expected = detail::dtypes_string({DType::bf16});
      break;
  }
  detail::check_value("q", ok, expected + " for cache format " + format_name(f), describe(q));
}

void validate(const DenseDecodeArgs& a) {
  const TensorView& q = a.q;
  detail::check_tensor("q", q, {DType::bf16, DType::f16, DType::fp8_e4m3}, {kAny, kAny, kAny, kAny});
  detail::check_paged_cache("cache", a.cache, {CacheFormat::bf16, CacheFormat::fp16, CacheFormat::fp8_e4m3});

  const int64_t b = q.shape[0], s_q = q.shape[1], h_q = q.shape[2];
  const int d_qk = a.cache.d_qk(), h_kv = a.cache.h_kv();
  detail::check_tensor("q", q, {q.dtype}, {b, s_q, h_q, d_qk});
  check_q_dtype(q, a.cache.format);
  detail::check_inner_contiguous("q", q, 1);
  detail::check_value("cache", h_kv >= 1, "a cache with h_kv >= 1 (dim 2)", describe(a.cache.data));
  detail::check_value("h_q", h_q % h_kv == 0,
                      "a multiple of h_kv = " + std::to_string(h_kv) + " (cache dim 2)", std::to_string(h_q));
  if (q.dtype == DType::fp8_e4m3)
    detail::check_value("q_scale", std::isfinite(a.q_scale) && a.q_scale > 0, "a positive finite float",
                        std::to_string(a.q_scale));

  detail::check_tensor("block_table", a.block_table, {DType::i32}, {b, kAny});
  detail::check_inner_contiguous("block_table", a.block_table, 1);
  detail::check_tensor("seqlens", a.seqlens, {DType::i32}, {b});
  detail::check_inner_contiguous("seqlens", a.seqlens, 1);
  if (a.attn_sink.present()) {
    detail::check_tensor("attn_sink", a.attn_sink, {DType::f32}, {h_q});
    detail::check_inner_contiguous("attn_sink", a.attn_sink, 1);
  }
  if (a.softmax_scale)
    detail::check_value("softmax_scale", std::isfinite(*a.softmax_scale) && *a.softmax_scale > 0,
                        "a positive finite float", std::to_string(*a.softmax_scale));

  const DType out_dtype = q.dtype == DType::f16 ? DType::f16 : DType::bf16;
  detail::check_tensor("out", a.out, {out_dtype}, {b, s_q, h_q, kDv});
  detail::check_inner_contiguous("out", a.out, 1);
  detail::check_tensor("lse", a.lse, {DType::f32}, {b, s_q, h_q});
  detail::check_inner_contiguous("lse", a.lse, 1);

  const Device dev = q.device;
  detail::check_same_device("cache", a.cache.data, "q", dev);
  detail::check_same_device("block_table", a.block_table, "q", dev);
  detail::check_same_device("seqlens", a.seqlens, "q", dev);
  detail::check_same_device("attn_sink", a.attn_sink, "q", dev);
  detail::check_same_device("out", a.out, "q", dev);
  detail::check_same_device("lse", a.lse, "q", dev);
  if (detail::on_cuda(q)) {
    detail::check_aligned("q", q, 16);
    detail::check_cache_aligned("cache", a.cache);
    detail::check_aligned("out", a.out, 16);
    detail::check_backend_supports({Op::dense_decode, Backend::cuda_sm90, a.cache.format, q.dtype, a.cache.d_qk(),
                                    static_cast<int>(q.shape[2]), a.cache.h_kv(), a.cache.page_size(), 1,
                                    static_cast<int>(q.shape[1])},
                                   q.numel());
  }
  detail::check_outputs_distinct({{"out", &a.out}, {"lse", &a.lse}}, {{"q", &q},
                                                                     {"cache", &a.cache.data},
                                                                     {"block_table", &a.block_table},
                                                                     {"seqlens", &a.seqlens},
                                                                     {"attn_sink", &a.attn_sink}});
}

}  // namespace

size_t dense_decode_workspace_size(const DenseDecodeArgs& a) {
  validate(a);
  if (!detail::on_cuda(a.q)) return 0;
  SMLA_RUN_CUDA(return cuda::dense_decode_workspace_size(a));
}

void dense_decode(const DenseDecodeArgs& a, const Exec& exec) {
  (void)exec;  // only the CUDA backend takes a stream and a workspace
  validate(a);
  if (detail::on_cuda(a.q)) {
    SMLA_RUN_CUDA(cuda::dense_decode(a, exec));
  } else {
    ref::dense_decode(a);
  }
}

}  // namespace smla
