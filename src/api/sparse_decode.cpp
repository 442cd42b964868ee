// sparse_decode (SPEC §4.1): host validation and dispatch.
#include <string>

#include "api/dispatch.h"
#include "api/validate.h"
#include "reference/reference.h"
#include "smla/ops.h"

namespace smla {
namespace {

using detail::kAny;

// A decode key cache: one of the sparse formats, one shared key row per token.
void check_key_cache(const char* name, const PagedCache& c) {
  detail::check_paged_cache(name, c, {CacheFormat::fp8_ds_mla, CacheFormat::fp8_model1, CacheFormat::bf16});
  detail::check_value(name, c.h_kv() == 1, "a cache with h_kv = 1 (MLA shares one key row across heads)",
                      describe(c.data));
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

  detail::check_tensor_on("indices", a.indices, {DType::i32}, {b, s_q, kAny}, 1, "q", dev);
  detail::check_value("indices", a.indices.shape[2] >= 1, "a tensor with topk >= 1 (last dimension)",
                      describe(a.indices));
  // Optional per-request lengths: [b] int32, any stride.
  detail::check_optional_vector("topk_length", a.topk_length, DType::i32, b, "q", dev);

  if (a.extra_cache.data.present()) {
    check_key_cache("extra_cache", a.extra_cache);
    detail::check_same_device("extra_cache", a.extra_cache.data, "q", dev);
    detail::check_value("extra_cache", a.extra_cache.d_qk() == d_qk,
                        "a cache of d_qk = " + std::to_string(d_qk) + " like cache",
                        std::string(format_name(a.extra_cache.format)) + " of d_qk = " +
                            std::to_string(a.extra_cache.d_qk()));
    detail::check_tensor_on("extra_indices", a.extra_indices, {DType::i32}, {b, s_q, kAny}, 1, "q", dev);
    detail::check_value("extra_indices", a.extra_indices.shape[2] >= 1,
                        "a tensor with extra_topk >= 1 (last dimension)", describe(a.extra_indices));
    detail::check_optional_vector("extra_topk_length", a.extra_topk_length, DType::i32, b, "q", dev);
  } else {
    detail::check_value("extra_indices", !a.extra_indices.present(), "nothing when extra_cache is absent",
                        describe(a.extra_indices));
    detail::check_value("extra_topk_length", !a.extra_topk_length.present(), "nothing when extra_cache is absent",
                        describe(a.extra_topk_length));
  }

  detail::check_optional_vector("attn_sink", a.attn_sink, DType::f32, h_q, "q", dev);
  detail::check_softmax_scale(a.softmax_scale);

  detail::check_tensor_on("out", a.out, {DType::bf16}, {b, s_q, h_q, kDv}, 1, "q", dev);
  detail::check_tensor_on("lse", a.lse, {DType::f32}, {b, s_q, h_q}, 0, "q", dev);

  detail::check_outputs_distinct({{"out", &a.out}, {"lse", &a.lse}}, {{"q", &a.q},
                                                                     {"cache", &a.cache.data},
                                                                     {"indices", &a.indices},
                                                                     {"topk_length", &a.topk_length},
                                                                     {"extra_cache", &a.extra_cache.data},
                                                                     {"extra_indices", &a.extra_indices},
                                                                     {"extra_topk_length", &a.extra_topk_length},
                                                                     {"attn_sink", &a.attn_sink}});

  if (detail::on_cuda(a.q)) {
    detail::check_aligned("q", a.q, 16);
    detail::check_cache_aligned("cache", a.cache);
    detail::check_cache_aligned("extra_cache", a.extra_cache);
    detail::check_aligned("out", a.out, 16);
    // The 4-byte tensors are read and written element by element: their own size suffices.
    detail::check_each_aligned({{"indices", &a.indices},
                                {"topk_length", &a.topk_length},
                                {"extra_indices", &a.extra_indices},
                                {"extra_topk_length", &a.extra_topk_length},
                                {"attn_sink", &a.attn_sink},
                                {"lse", &a.lse}},
                               4);
    KernelConfig k{Op::sparse_decode, Backend::cuda_sm90, a.cache.format, DType::bf16, a.cache.d_qk(),
                   static_cast<int>(a.q.shape[2]), 1, a.cache.page_size(), static_cast<int>(a.indices.shape[2]),
                   static_cast<int>(a.q.shape[1])};
    detail::check_backend_supports(k, a.q.numel());
    if (a.extra_cache.data.present()) {
      k.format = a.extra_cache.format;
      k.page_size = a.extra_cache.page_size();
      k.topk = static_cast<int>(a.extra_indices.shape[2]);
      detail::check_backend_supports(k, a.q.numel());
    }
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
