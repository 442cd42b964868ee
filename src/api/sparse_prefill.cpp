// sparse_prefill (SPEC §4.2): host validation and dispatch.
#include <string>

#include "api/dispatch.h"
#include "api/validate.h"
#include "reference/reference.h"
#include "smla/ops.h"

namespace smla {
namespace {

using detail::kAny;

// A [rows, last] tensor, or [rows, 1, last] as engines hand over a single-head one: its last
// dimension contiguous, on the device of q.
void check_rows(const char* name, const TensorView& t, DType dtype, int64_t rows, int64_t last, Device dev) {
  if (t.present() && t.ndim == 3)
    detail::check_tensor(name, t, {dtype}, {rows, 1, last});
  else
    detail::check_tensor(name, t, {dtype}, {rows, last});
  detail::check_inner_contiguous(name, t, 1);
  detail::check_same_device(name, t, "q", dev);
}

void validate(const SparsePrefillArgs& a) {
  detail::check_tensor("q", a.q, {DType::bf16}, {kAny, kAny, kAny});
  detail::check_inner_contiguous("q", a.q, 1);
  const Device dev = a.q.device;
  const int64_t s_q = a.q.shape[0], h_q = a.q.shape[1], d_qk = a.q.shape[2];
  detail::check_value("q", h_q >= 1 && (d_qk == 576 || d_qk == 512),
                      "a tensor of shape (s_q, h_q, d_qk) with h_q >= 1 and d_qk = 576 or 512", describe(a.q));

  // Keys: kv [s_kv, d_qk] or [s_kv, 1, d_qk], or a paged cache in its place (indices are
  // slots then); indices [s_q, topk] or [s_q, 1, topk].
  const bool paged = a.cache.data.present();
  if (paged) {
    detail::check_value("kv", !a.kv.present(), "nothing when cache is given (the keys come from the cache)",
                        describe(a.kv));
    detail::check_paged_cache("cache", a.cache, {CacheFormat::fp8_ds_mla, CacheFormat::fp8_model1, CacheFormat::bf16});
    detail::check_value("cache", a.cache.h_kv() == 1, "a cache with h_kv = 1 (MLA shares one key row across heads)",
                        describe(a.cache.data));
    detail::check_same_device("cache", a.cache.data, "q", dev);
    detail::check_value("q", d_qk == a.cache.d_qk(),
                        "bfloat16 of shape (*, *, " + std::to_string(a.cache.d_qk()) + "), the d_qk of the " +
                            format_name(a.cache.format) + " cache",
                        describe(a.q));
  } else {
    check_rows("kv", a.kv, DType::bf16, kAny, d_qk, dev);
  }
  check_rows("indices", a.indices, DType::i32, s_q, kAny, dev);
  detail::check_value("indices", a.indices.size(-1) >= 1, "a tensor with topk >= 1 (last dimension)",
                      describe(a.indices));

  detail::check_optional_vector("topk_length", a.topk_length, DType::i32, s_q, "q", dev);
  detail::check_optional_vector("attn_sink", a.attn_sink, DType::f32, h_q, "q", dev);
  detail::check_softmax_scale(a.softmax_scale);

  detail::check_tensor_on("out", a.out, {DType::bf16}, {s_q, h_q, kDv}, 1, "q", dev);
  detail::check_tensor_on("lse", a.lse, {DType::f32}, {s_q, h_q}, 0, "q", dev);
  detail::check_tensor_on("max_logits", a.max_logits, {DType::f32}, {s_q, h_q}, 0, "q", dev);

  detail::check_outputs_distinct({{"out", &a.out}, {"lse", &a.lse}, {"max_logits", &a.max_logits}},
                                 {{"q", &a.q},
                                  {"kv", &a.kv},
                                  {"cache", &a.cache.data},
                                  {"indices", &a.indices},
                                  {"topk_length", &a.topk_length},
                                  {"attn_sink", &a.attn_sink}});

  if (detail::on_cuda(a.q)) {
    detail::check_aligned("q", a.q, 16);
    if (paged) detail::check_cache_aligned("cache", a.cache);
    else detail::check_aligned("kv", a.kv, 16);
    detail::check_aligned("out", a.out, 16);
    // The 4-byte tensors are read and written element by element: their own size suffices.
    detail::check_each_aligned({{"indices", &a.indices},
                                {"topk_length", &a.topk_length},
                                {"attn_sink", &a.attn_sink},
                                {"lse", &a.lse},
                                {"max_logits", &a.max_logits}},
                               4);
    detail::check_backend_supports({Op::sparse_prefill, Backend::cuda_sm90, paged ? a.cache.format : CacheFormat::bf16,
                                    DType::bf16, static_cast<int>(a.q.shape[2]), static_cast<int>(a.q.shape[1]), 1,
                                    1,
                                    static_cast<int>(a.indices.shape[a.indices.ndim - 1]),
                                    static_cast<int>(a.q.shape[0])},
                                   a.q.numel());
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
