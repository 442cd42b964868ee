// sparse_decode, sparse_prefill and dense_decode: each maps its validated arguments onto
// AttnParams and a plan, the warp-specialized family (src/cuda/sparse_decode/) where it takes
// the call, else the generic gather-attention kernel.
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "cuda/attention/attention_launch.h"
#include "cuda/common/cuda_check.h"
#include "cuda/cuda_backend.h"
#include "cuda/sparse_decode/launch.h"

namespace smla::cuda {

namespace {

constexpr float kLog2e = 1.4426950408889634f;

KeySetParams key_set(const PagedCache& c) {
  KeySetParams k;
  k.base = static_cast<const uint8_t*>(c.data.data);
  k.page_stride = c.page_stride_bytes();
  k.num_blocks = c.num_blocks();
  k.page_size = c.page_size();
  k.format = static_cast<int>(c.format);
  k.h_kv = c.h_kv();
  k.row_elems = static_cast<int>(c.row_elems());
  k.k_scale = c.k_scale;
  return k;
}

void set_outputs(AttnParams& p, const TensorView& out, const TensorView& lse) {
  p.out = out.data;
  p.o_sb = out.stride[0];
  p.o_st = out.stride[1];
  p.o_sh = out.stride[2];
  p.out_f16 = out.dtype == DType::f16;
  p.lse = static_cast<float*>(lse.data);
  p.l_sb = lse.stride[0];
  p.l_st = lse.stride[1];
  p.l_sh = lse.stride[2];
}

// AttnParams::q_kind of a query dtype: 0 bf16, 1 fp16, 2 fp8_e4m3.
int q_kind(DType t) { return t == DType::f16 ? 1 : (t == DType::fp8_e4m3 ? 2 : 0); }

// The kernels' masked logits are -inf times this scale: a product of positive scales that
// underflows to 0 is kept at the smallest normal float, so -inf stays -inf (not NaN).
float positive_scale(float s) { return std::max(s, FLT_MIN); }

float scale_log2(const std::optional<float>& s, int d_qk) {
  return positive_scale((s ? *s : 1.0f / std::sqrt(static_cast<float>(d_qk))) * kLog2e);
}

AttnParams sparse_decode_params(const SparseDecodeArgs& a) {
  AttnParams p;
  p.q = a.q.data;
  p.q_sb = a.q.stride[0];
  p.q_st = a.q.stride[1];
  p.q_sh = a.q.stride[2];
  p.b = static_cast<int>(a.q.shape[0]);
  p.s_q = static_cast<int>(a.q.shape[1]);
  p.h_q = static_cast<int>(a.q.shape[2]);
  p.d_qk = static_cast<int>(a.q.shape[3]);
  p.scale_log2 = scale_log2(a.softmax_scale, p.d_qk);
  p.main = key_set(a.cache);
  p.main.indices = a.indices.ptr<const int32_t>();
  p.main.idx_sb = a.indices.stride[0];
  p.main.idx_st = a.indices.stride[1];
  p.main.topk = static_cast<int>(a.indices.shape[2]);
  p.main.topk_length = a.topk_length.ptr<const int32_t>();
  p.main.tl_st = a.topk_length.stride[0];
  if (a.extra_cache.data.present()) {
    p.has_extra = true;
    p.extra = key_set(a.extra_cache);
    p.extra.indices = a.extra_indices.ptr<const int32_t>();
    p.extra.idx_sb = a.extra_indices.stride[0];
    p.extra.idx_st = a.extra_indices.stride[1];
    p.extra.topk = static_cast<int>(a.extra_indices.shape[2]);
    p.extra.topk_length = a.extra_topk_length.ptr<const int32_t>();
    p.extra.tl_st = a.extra_topk_length.stride[0];
  }
  p.sink = a.attn_sink.ptr<const float>();
  p.sink_st = a.attn_sink.stride[0];
  set_outputs(p, a.out, a.lse);
  return p;
}

AttentionPlan sparse_decode_plan(const SparseDecodeArgs& a) {
  const int b = static_cast<int>(a.q.shape[0]), s_q = static_cast<int>(a.q.shape[1]);
  const int h_q = static_cast<int>(a.q.shape[2]), d_qk = static_cast<int>(a.q.shape[3]);
  const bool extra = a.extra_cache.data.present();
  const int fmt = static_cast<int>(a.cache.format);
  if (!sparse_decode_family::disabled_by_env() &&
      sparse_decode_family::takes(fmt, extra ? static_cast<int>(a.extra_cache.format) : fmt, extra, d_qk))
    return plan_sparse_decode(b, s_q, h_q, fmt,
                              static_cast<int64_t>(a.indices.shape[2]) + (extra ? a.extra_indices.shape[2] : 0));
  int raw = staged_row_bytes(key_set(a.cache));
  int format = static_cast<int>(a.cache.format);
  if (a.extra_cache.data.present()) {
    raw = std::max(raw, staged_row_bytes(key_set(a.extra_cache)));
    if (a.extra_cache.format != a.cache.format) format = -1;
  }
  return plan_attention(static_cast<int>(a.q.shape[0]), static_cast<int>(a.q.shape[1]),
                        static_cast<int>(a.q.shape[2]), 1, static_cast<int>(a.q.shape[3]), false, false, true, raw,
                        format);
}

// Prefill is a decode batch of s_q single-token requests over an unpaged kv: page size 1,
// one "page" per kv row, so a kv row stride larger than d_qk is just a page stride.
AttnParams sparse_prefill_params(const SparsePrefillArgs& a) {
  AttnParams p;
  p.q = a.q.data;
  p.q_sb = a.q.stride[0];
  p.q_sh = a.q.stride[1];
  p.b = static_cast<int>(a.q.shape[0]);
  p.s_q = 1;
  p.h_q = static_cast<int>(a.q.shape[1]);
  p.d_qk = static_cast<int>(a.q.shape[2]);
  p.scale_log2 = scale_log2(a.softmax_scale, p.d_qk);
  if (a.cache.data.present()) {  // slots of a paged cache
    p.main = key_set(a.cache);
  } else {
    p.main.base = static_cast<const uint8_t*>(a.kv.data);
    p.main.page_stride = a.kv.stride[0] * 2;
    p.main.num_blocks = a.kv.shape[0];
    p.main.page_size = 1;
    p.main.format = static_cast<int>(CacheFormat::bf16);
    p.main.row_elems = p.d_qk;
  }
  p.main.indices = a.indices.ptr<const int32_t>();
  p.main.idx_sb = a.indices.stride[0];
  p.main.topk = static_cast<int>(a.indices.shape[a.indices.ndim - 1]);
  p.main.topk_length = a.topk_length.ptr<const int32_t>();
  p.main.tl_st = a.topk_length.stride[0];
  p.sink = a.attn_sink.ptr<const float>();
  p.sink_st = a.attn_sink.stride[0];
  p.out = a.out.data;
  p.o_sb = a.out.stride[0];
  p.o_sh = a.out.stride[1];
  p.lse = static_cast<float*>(a.lse.data);
  p.l_sb = a.lse.stride[0];
  p.l_sh = a.lse.stride[1];
  p.max_logits = static_cast<float*>(a.max_logits.data);
  p.m_sb = a.max_logits.stride[0];
  p.m_sh = a.max_logits.stride[1];
  return p;
}

AttnParams dense_decode_params(const DenseDecodeArgs& a) {
  AttnParams p;
  p.dense = true;
  p.q = a.q.data;
  p.q_sb = a.q.stride[0];
  p.q_st = a.q.stride[1];
  p.q_sh = a.q.stride[2];
  p.q_kind = q_kind(a.q.dtype);
  p.q_scale = a.q_scale;
  p.b = static_cast<int>(a.q.shape[0]);
  p.s_q = static_cast<int>(a.q.shape[1]);
  p.h_q = static_cast<int>(a.q.shape[2]);
  p.d_qk = static_cast<int>(a.q.shape[3]);
  p.h_kv = a.cache.h_kv();
  p.scale_log2 = scale_log2(a.softmax_scale, p.d_qk);
  p.main = key_set(a.cache);
  // fp8 values convert to 16 bits exactly; their scales go to the fp32 logits and output
  // instead, so the tensor cores see the dequantized inputs without a second rounding.
  if (p.q_kind == 2) {
    p.scale_log2 = positive_scale(p.scale_log2 * p.q_scale);
    p.q_scale = 1.0f;
  }
  if (a.cache.format == CacheFormat::fp8_e4m3) {
    p.scale_log2 = positive_scale(p.scale_log2 * p.main.k_scale);
    p.out_scale = p.main.k_scale;
    p.main.k_scale = 1.0f;
  }
  p.block_table = a.block_table.ptr<const int32_t>();
  p.bt_sb = a.block_table.stride[0];
  p.max_blocks = static_cast<int>(a.block_table.shape[1]);
  p.seqlens = a.seqlens.ptr<const int32_t>();
  p.seqlens_st = a.seqlens.stride[0];
  p.causal = a.causal;
  p.sink = a.attn_sink.ptr<const float>();
  p.sink_st = a.attn_sink.stride[0];
  set_outputs(p, a.out, a.lse);
  return p;
}

AttentionPlan dense_decode_plan(const DenseDecodeArgs& a) {
  if (!sparse_decode_family::dense_disabled_by_env() &&
      sparse_decode_family::takes_dense(q_kind(a.q.dtype), a.out.dtype == DType::f16, static_cast<int>(a.cache.format),
                                        a.cache.h_kv(), static_cast<int>(a.cache.row_elems()),
                                        static_cast<int>(a.q.shape[3]), a.cache.num_blocks(), a.cache.page_size(),
                                        static_cast<int>(a.q.shape[2]), a.cache.data.data, a.cache.page_stride_bytes()))
    return plan_sparse_decode(static_cast<int>(a.q.shape[0]), static_cast<int>(a.q.shape[1]),
                              static_cast<int>(a.q.shape[2]), static_cast<int>(a.cache.format));
  return plan_attention(static_cast<int>(a.q.shape[0]), static_cast<int>(a.q.shape[1]),
                        static_cast<int>(a.q.shape[2]), a.cache.h_kv(), static_cast<int>(a.q.shape[3]), true,
                        a.cache.format == CacheFormat::fp16, true, staged_row_bytes(key_set(a.cache)), -1);
}

}  // namespace

size_t sparse_decode_workspace_size(const SparseDecodeArgs& a) {
  return attention_workspace_bytes(sparse_decode_plan(a), static_cast<int>(a.q.shape[0]),
                                   static_cast<int>(a.q.shape[1]), static_cast<int>(a.q.shape[2]));
}

void sparse_decode(const SparseDecodeArgs& a, const Exec& exec) {
  launch_attention(sparse_decode_params(a), sparse_decode_plan(a), exec.workspace, as_stream(exec.stream));
}

namespace {

// Whether the sparse-decode family takes this prefill (else the generic kernel does).
bool prefill_on_family(const SparsePrefillArgs& a, const AttnParams& p) {
  const int d_qk = static_cast<int>(a.q.shape[2]);
  const int fmt = p.main.format;
  return !sparse_decode_family::prefill_disabled_by_env() &&
         (a.cache.data.present() ? sparse_decode_family::takes(fmt, fmt, false, d_qk)
                                 : sparse_decode_family::takes_prefill(p.main.base, p.main.page_stride, d_qk));
}

// A decode batch of s_q one-token requests on the sparse-decode family, each CTA over its
// token's whole list (no split-KV); from a paged cache the same, with the packed formats'
// kernels that also keep max_logits.
AttentionPlan prefill_family_plan(const SparsePrefillArgs& a, const AttnParams& p) {
  AttentionPlan plan = plan_sparse_decode(static_cast<int>(a.q.shape[0]), 1, static_cast<int>(a.q.shape[1]), p.main.format);
  plan.split = false;
  return plan;
}

}  // namespace

// The family's prefill needs a workspace only for its tail split (attention_launch.h
// launch_prefill; 0 unless built with it).
size_t sparse_prefill_workspace_size(const SparsePrefillArgs& a) {
  const AttnParams p = sparse_prefill_params(a);
  if (a.q.shape[0] == 0 || !prefill_on_family(a, p)) return 0;
  return prefill_tail_workspace_bytes(p, prefill_family_plan(a, p));
}

void sparse_prefill(const SparsePrefillArgs& a, const Exec& exec) {
  const int d_qk = static_cast<int>(a.q.shape[2]);
  const AttnParams p = sparse_prefill_params(a);
  const bool paged = a.cache.data.present();
  const int fmt = p.main.format;
  if (prefill_on_family(a, p)) {
    launch_prefill(p, prefill_family_plan(a, p), exec.workspace, as_stream(exec.stream));
    return;
  }
  const AttentionPlan plan = plan_attention(static_cast<int>(a.q.shape[0]), 1, static_cast<int>(a.q.shape[1]), 1, d_qk,
                                            false, false, false, paged ? staged_row_bytes(p.main) : 2 * d_qk,
                                            paged ? fmt : -1);
  launch_attention(p, plan, exec.workspace, as_stream(exec.stream));
}

size_t dense_decode_workspace_size(const DenseDecodeArgs& a) {
  return attention_workspace_bytes(dense_decode_plan(a), static_cast<int>(a.q.shape[0]),
                                   static_cast<int>(a.q.shape[1]), static_cast<int>(a.q.shape[2]));
}

void dense_decode(const DenseDecodeArgs& a, const Exec& exec) {
  launch_attention(dense_decode_params(a), dense_decode_plan(a), exec.workspace, as_stream(exec.stream));
}

}  // namespace smla::cuda
