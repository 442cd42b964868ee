// sparse_decode (SPEC §4.1): host validation and dispatch.
#include <cmath>
#include <cstdio>
#include <string>

#include "api/dispatch.h"
#include "api/validate.h"
#include "reference/reference.h"
#include "smla/ops.h"

namespace smla {
namespace {

using detail::kAny;

std::string float_string(float v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", static_cast<double>(v));
  return buf;
}

// A decode key cache: one of the sparse formats, one shared key row per token.
void check_key_cache(const char* name, const PagedCache& c) {
  detail::check_paged_cache(name, c, {CacheFormat::fp8_ds_mla, CacheFormat::fp8_model1, CacheFormat::bf16});
  detail::check_value(name, c.h_kv() == 1, "a cache with h_kv = 1 (MLA shares one key row across heads)",
                      describe(c.data));
}


// An optional per-request length: [b] int32, any stride.
void check_length(const char* name, const TensorView& t, int64_t b, Device dev) {
  if (!t.present()) return;
  detail::check_tensor(name, t, {DType::i32}, {b});
  detail::check_inner_contiguous(name, t, 0);
  detail::check_same_device(name, t, "q", dev);
}

void validate(const SparseDecodeArgs& a) {
  detail::check_tensor("q", a.q, {DType::bf16}, {kAny, kAny, kAny, kAny});
  detail::check_inner_contiguous("q", a.q, 1);
  const Device dev = a.q.device;
  const int64_t b = a.q.shape[0], s_q = a.q.shape[1], h_q = a.q.shape[2];
  detail::check_value("q", s_q >= 1 && h_q >= 1, "a tensor of shape (b, s_q, h_q, d_qk) with s_q >= 1 and h_q >= 1",
                      describe(a.q));

  check_key_cache("cache", a.cache);
  detail::check_same_device("cache", a.cache.data, "q", dev);
  const int d_qk = a.cache.d_qk();
  detail::check_value("q", a.q.shape[3] == d_qk,
                      "bfloat16 of shape (*, *, *, " + std::to_string(d_qk) + "), the d_qk of the " +
                          format_name(a.cache.format) + " cache",
                      describe(a.q));

  detail::check_tensor("indices", a.indices, {DType::i32}, {b, s_q, kAny});
  detail::check_inner_contiguous("indices", a.indices, 1);
  detail::check_same_device("indices", a.indices, "q", dev);
  detail::check_value("indices", a.indices.shape[2] >= 1, "a tensor with topk >= 1 (last dimension)",
                      describe(a.indices));
  check_length("topk_length", a.topk_length, b, dev);

  if (a.extra_cache.data.present()) {
    check_key_cache("extra_cache", a.extra_cache);
    detail::check_same_device("extra_cache", a.extra_cache.data, "q", dev);
    detail::check_value("extra_cache", a.extra_cache.d_qk() == d_qk,
                        "a cache of d_qk = " + std::to_string(d_qk) + " like cache",
                        std::string(format_name(a.extra_cache.format)) + " of d_qk = " +
                            std::to_string(a.extra_cache.d_qk()));
    detail::check_tensor("extra_indices", a.extra_indices, {DType::i32}, {b, s_q, kAny});
    detail::check_inner_contiguous("extra_indices", a.extra_indices, 1);
    detail::check_same_device("extra_indices", a.extra_indices, "q", dev);
    detail::check_value("extra_indices", a.extra_indices.shape[2] >= 1,
                        "a tensor with extra_topk >= 1 (last dimension)", describe(a.extra_indices));
    check_length("extra_topk_length", a.extra_topk_length, b, dev);
  } else {
    detail::check_value("extra_indices", !a.extra_indices.present(), "nothing when extra_cache is absent",
                        describe(a.extra_indices));
    detail::check_value("extra_topk_length", !a.extra_topk_length.present(), "nothing when extra_cache is absent",
                        describe(a.extra_topk_length));
  }

  if (a.attn_sink.present()) {
    detail::check_tensor("attn_sink", a.attn_sink, {DType::f32}, {h_q});
    detail::check_inner_contiguous("attn_sink", a.attn_sink, 0);
    detail::check_same_device("attn_sink", a.attn_sink, "q", dev);
  }
  if (a.softmax_scale) {
    const float s = *a.softmax_scale;
    detail::check_value("softmax_scale", std::isfinite(s) && s > 0, "a positive finite float", float_string(s));
  }

  detail::check_tensor("out", a.out, {DType::bf16}, {b, s_q, h_q, kDv});
  detail::check_inner_contiguous("out", a.out, 1);
  detail::check_same_device("out", a.out, "q", dev);
  detail::check_tensor("lse", a.lse, {DType::f32}, {b, s_q, h_q});
  detail::check_inner_contiguous("lse", a.lse, 0);
  detail::check_same_device("lse", a.lse, "q", dev);

  for (const auto& [name, t] : {std::pair<const char*, const TensorView*>{"q", &a.q},
                                {"cache", &a.cache.data},
                                {"indices", &a.indices},
                                {"extra_cache", &a.extra_cache.data},
                                {"extra_indices", &a.extra_indices}}) {
    detail::check_no_alias("out", a.out, name, *t);
    detail::check_no_alias("lse", a.lse, name, *t);
  }
  detail::check_no_alias("lse", a.lse, "out", a.out);

  if (detail::on_cuda(a.q)) {
    detail::check_aligned("q", a.q, 16);
    detail::check_cache_aligned("cache", a.cache);
    detail::check_cache_aligned("extra_cache", a.extra_cache);
    detail::check_aligned("out", a.out, 16);
    // The 4-byte tensors are read and written element by element: their own size suffices.
    for (const auto& [name, t] : {std::pair<const char*, const TensorView*>{"indices", &a.indices},
                                  {"topk_length", &a.topk_length},
                                  {"extra_indices", &a.extra_indices},
                                  {"extra_topk_length", &a.extra_topk_length},
                                  {"attn_sink", &a.attn_sink},
                                  {"lse", &a.lse}})
      detail::check_aligned(name, *t, 4);
  }
}

}  // namespace

size_t sparse_decode_workspace_size(const SparseDecodeArgs& a) {
  validate(a);
  if (!detail::on_cuda(a.q)) return 0;
  SMLA_RUN_CUDA(return cuda::sparse_decode_workspace_size(a));
}

void sparse_decode(const SparseDecodeArgs& a, [[maybe_unused]] const Exec& exec) {
  validate(a);
  // An empty batch launches nothing, so no backend has to handle an empty grid.
  if (a.q.shape[0] == 0) return;
  if (detail::on_cuda(a.q)) {
    SMLA_RUN_CUDA(cuda::sparse_decode(a, exec));
  } else {
    ref::sparse_decode(a);
  }
}

}  // namespace smla
