// sparse_prefill (SPEC §4.2): host validation and dispatch.
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

void validate(const SparsePrefillArgs& a) {
  detail::check_tensor("q", a.q, {DType::bf16}, {kAny, kAny, kAny});
  detail::check_inner_contiguous("q", a.q, 1);
  const Device dev = a.q.device;
  const int64_t s_q = a.q.shape[0], h_q = a.q.shape[1], d_qk = a.q.shape[2];
  detail::check_value("q", h_q >= 1 && (d_qk == 576 || d_qk == 512),
                      "a tensor of shape (s_q, h_q, d_qk) with h_q >= 1 and d_qk = 576 or 512", describe(a.q));

  // kv is [s_kv, d_qk], or [s_kv, 1, d_qk] as engines hand over a single-head key tensor.
  if (a.kv.present() && a.kv.ndim == 3)
    detail::check_tensor("kv", a.kv, {DType::bf16}, {kAny, 1, d_qk});
  else
    detail::check_tensor("kv", a.kv, {DType::bf16}, {kAny, d_qk});
  detail::check_inner_contiguous("kv", a.kv, 1);
  detail::check_same_device("kv", a.kv, "q", dev);

  if (a.indices.present() && a.indices.ndim == 3)
    detail::check_tensor("indices", a.indices, {DType::i32}, {s_q, 1, kAny});
  else
    detail::check_tensor("indices", a.indices, {DType::i32}, {s_q, kAny});
  detail::check_inner_contiguous("indices", a.indices, 1);
  detail::check_same_device("indices", a.indices, "q", dev);
  detail::check_value("indices", a.indices.size(-1) >= 1, "a tensor with topk >= 1 (last dimension)",
                      describe(a.indices));

  if (a.topk_length.present()) {
    detail::check_tensor("topk_length", a.topk_length, {DType::i32}, {s_q});
    detail::check_inner_contiguous("topk_length", a.topk_length, 0);
    detail::check_same_device("topk_length", a.topk_length, "q", dev);
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

  detail::check_tensor("out", a.out, {DType::bf16}, {s_q, h_q, kDv});
  detail::check_inner_contiguous("out", a.out, 1);
  detail::check_same_device("out", a.out, "q", dev);
  detail::check_tensor("lse", a.lse, {DType::f32}, {s_q, h_q});
  detail::check_inner_contiguous("lse", a.lse, 0);
  detail::check_same_device("lse", a.lse, "q", dev);
  detail::check_tensor("max_logits", a.max_logits, {DType::f32}, {s_q, h_q});
  detail::check_inner_contiguous("max_logits", a.max_logits, 0);
  detail::check_same_device("max_logits", a.max_logits, "q", dev);

  for (const auto& [name, t] : {std::pair<const char*, const TensorView*>{"q", &a.q},
                                {"kv", &a.kv},
                                {"indices", &a.indices}}) {
    detail::check_no_alias("out", a.out, name, *t);
    detail::check_no_alias("lse", a.lse, name, *t);
    detail::check_no_alias("max_logits", a.max_logits, name, *t);
  }
  detail::check_no_alias("lse", a.lse, "out", a.out);
  detail::check_no_alias("max_logits", a.max_logits, "out", a.out);
  detail::check_no_alias("max_logits", a.max_logits, "lse", a.lse);

  if (detail::on_cuda(a.q)) {
    detail::check_aligned("q", a.q, 16);
    detail::check_aligned("kv", a.kv, 16);
    detail::check_aligned("out", a.out, 16);
    // The 4-byte tensors are read and written element by element: their own size suffices.
    for (const auto& [name, t] : {std::pair<const char*, const TensorView*>{"indices", &a.indices},
                                  {"topk_length", &a.topk_length},
                                  {"attn_sink", &a.attn_sink},
                                  {"lse", &a.lse},
                                  {"max_logits", &a.max_logits}})
      detail::check_aligned(name, *t, 4);
  }
}

}  // namespace

size_t sparse_prefill_workspace_size(const SparsePrefillArgs& a) {
  validate(a);
  if (!detail::on_cuda(a.q)) return 0;
  SMLA_RUN_CUDA(return cuda::sparse_prefill_workspace_size(a));
}

void sparse_prefill(const SparsePrefillArgs& a, [[maybe_unused]] const Exec& exec) {
  validate(a);
  // No query tokens: nothing to launch, so no backend has to handle an empty grid.
  if (a.q.shape[0] == 0) return;
  if (detail::on_cuda(a.q)) {
    SMLA_RUN_CUDA(cuda::sparse_prefill(a, exec));
  } else {
    ref::sparse_prefill(a);
  }
}

}  // namespace smla
