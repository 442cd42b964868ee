// The operations of include/smla/ops.h: keyword arguments named as the C++ fields, tensors
// as DLPack capsules (see convert.h), the CUDA stream as an integer, the workspace as a
// uint8 tensor sized by the matching *_workspace_size query.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "convert.h"
#include "smla/dcp.h"
#include "smla/ops.h"

namespace smla::py {
namespace {

using nb::arg;
using OptFloat = std::optional<float>;

template <typename Args, typename Fn>
void run_released(Fn fn, const Args& args, const Exec& exec) {
  nb::gil_scoped_release release;
  fn(args, exec);
}

SparseDecodeArgs sparse_decode_args(Arrays& a, nb::handle q, nb::handle cache, const std::string& cache_format,
                                    float k_scale, nb::handle indices, nb::handle topk_length,
                                    nb::handle extra_cache, const std::string& extra_cache_format,
                                    float extra_k_scale, nb::handle extra_indices, nb::handle extra_topk_length,
                                    nb::handle attn_sink, OptFloat softmax_scale, nb::handle out, nb::handle lse) {
  SparseDecodeArgs s;
  s.q = a.view(q, "q");
  s.cache = make_cache(a, cache, cache_format, k_scale, "cache");
  s.indices = a.view(indices, "indices");
  s.topk_length = a.view(topk_length, "topk_length");
  if (!extra_cache.is_none()) s.extra_cache = make_cache(a, extra_cache, extra_cache_format, extra_k_scale, "extra_cache");
  s.extra_indices = a.view(extra_indices, "extra_indices");
  s.extra_topk_length = a.view(extra_topk_length, "extra_topk_length");
  s.attn_sink = a.view(attn_sink, "attn_sink");
  s.softmax_scale = softmax_scale;
  s.out = a.view(out, "out");
  s.lse = a.view(lse, "lse");
  return s;
}

SparsePrefillArgs sparse_prefill_args(Arrays& a, nb::handle q, nb::handle kv, nb::handle indices,
                                      nb::handle topk_length, nb::handle attn_sink, OptFloat softmax_scale,
                                      nb::handle out, nb::handle lse, nb::handle max_logits, nb::handle cache,
                                      const std::string& cache_format) {
  SparsePrefillArgs s;
  s.q = a.view(q, "q");
  s.kv = a.view(kv, "kv");
  // The packed and bf16 caches prefill takes have no k_scale (it is fp8_e4m3's alone).
  if (!cache.is_none()) s.cache = make_cache(a, cache, cache_format, 1.0f, "cache");
  s.indices = a.view(indices, "indices");
  s.topk_length = a.view(topk_length, "topk_length");
  s.attn_sink = a.view(attn_sink, "attn_sink");
  s.softmax_scale = softmax_scale;
  s.out = a.view(out, "out");
  s.lse = a.view(lse, "lse");
  s.max_logits = a.view(max_logits, "max_logits");
  return s;
}

DenseDecodeArgs dense_decode_args(Arrays& a, nb::handle q, nb::handle cache, const std::string& cache_format,
                                  float k_scale, nb::handle block_table, nb::handle seqlens, bool causal,
                                  float q_scale, nb::handle attn_sink, OptFloat softmax_scale, nb::handle out,
                                  nb::handle lse) {
  DenseDecodeArgs s;
  s.q = a.view(q, "q");
  s.cache = make_cache(a, cache, cache_format, k_scale, "cache");
  s.block_table = a.view(block_table, "block_table");
  s.seqlens = a.view(seqlens, "seqlens");
  s.causal = causal;
  s.q_scale = q_scale;
  s.attn_sink = a.view(attn_sink, "attn_sink");
  s.softmax_scale = softmax_scale;
  s.out = a.view(out, "out");
  s.lse = a.view(lse, "lse");
  return s;
}

}  // namespace

void bind_ops(nb::module_& m) {
  // ------------------------------------------------------------------ sparse_decode
  m.def(
      "sparse_decode_workspace_size",
      [](nb::handle q, nb::handle cache, const std::string& cache_format, float k_scale, nb::handle indices,
         nb::handle topk_length, nb::handle extra_cache, const std::string& extra_cache_format, float extra_k_scale,
         nb::handle extra_indices, nb::handle extra_topk_length, nb::handle attn_sink, OptFloat softmax_scale,
         nb::handle out, nb::handle lse) {
        Arrays a;
        return sparse_decode_workspace_size(sparse_decode_args(
            a, q, cache, cache_format, k_scale, indices, topk_length, extra_cache, extra_cache_format,
            extra_k_scale, extra_indices, extra_topk_length, attn_sink, softmax_scale, out, lse));
      },
      arg("q"), arg("cache"), arg("cache_format"), arg("k_scale"), arg("indices"), arg("topk_length").none(),
      arg("extra_cache").none(), arg("extra_cache_format"), arg("extra_k_scale"), arg("extra_indices").none(),
      arg("extra_topk_length").none(), arg("attn_sink").none(), arg("softmax_scale").none(), arg("out"),
      arg("lse"));
  m.def(
      "sparse_decode",
      [](nb::handle q, nb::handle cache, const std::string& cache_format, float k_scale, nb::handle indices,
         nb::handle topk_length, nb::handle extra_cache, const std::string& extra_cache_format, float extra_k_scale,
         nb::handle extra_indices, nb::handle extra_topk_length, nb::handle attn_sink, OptFloat softmax_scale,
         nb::handle out, nb::handle lse, nb::handle workspace, uintptr_t stream) {
        Arrays a;
        SparseDecodeArgs s = sparse_decode_args(a, q, cache, cache_format, k_scale, indices, topk_length,
                                                extra_cache, extra_cache_format, extra_k_scale, extra_indices,
                                                extra_topk_length, attn_sink, softmax_scale, out, lse);
        Exec e = make_exec(a, stream, workspace);
        run_released([](const SparseDecodeArgs& x, const Exec& y) { sparse_decode(x, y); }, s, e);
      },
      arg("q"), arg("cache"), arg("cache_format"), arg("k_scale"), arg("indices"), arg("topk_length").none(),
      arg("extra_cache").none(), arg("extra_cache_format"), arg("extra_k_scale"), arg("extra_indices").none(),
      arg("extra_topk_length").none(), arg("attn_sink").none(), arg("softmax_scale").none(), arg("out"),
      arg("lse"), arg("workspace").none(), arg("stream"));

  // ----------------------------------------------------------------- sparse_prefill
  m.def(
      "sparse_prefill_workspace_size",
      [](nb::handle q, nb::handle kv, nb::handle indices, nb::handle topk_length, nb::handle attn_sink,
         OptFloat softmax_scale, nb::handle out, nb::handle lse, nb::handle max_logits, nb::handle cache,
         const std::string& cache_format) {
        Arrays a;
        return sparse_prefill_workspace_size(sparse_prefill_args(a, q, kv, indices, topk_length, attn_sink,
                                                                 softmax_scale, out, lse, max_logits, cache,
                                                                 cache_format));
      },
      arg("q"), arg("kv").none(), arg("indices"), arg("topk_length").none(), arg("attn_sink").none(),
      arg("softmax_scale").none(), arg("out"), arg("lse"), arg("max_logits"), arg("cache").none() = nb::none(),
      arg("cache_format") = "");
  m.def(
      "sparse_prefill",
      [](nb::handle q, nb::handle kv, nb::handle indices, nb::handle topk_length, nb::handle attn_sink,
         OptFloat softmax_scale, nb::handle out, nb::handle lse, nb::handle max_logits, nb::handle workspace,
         uintptr_t stream, nb::handle cache, const std::string& cache_format) {
        Arrays a;
        SparsePrefillArgs s = sparse_prefill_args(a, q, kv, indices, topk_length, attn_sink, softmax_scale, out, lse,
                                                  max_logits, cache, cache_format);
        Exec e = make_exec(a, stream, workspace);
        run_released([](const SparsePrefillArgs& x, const Exec& y) { sparse_prefill(x, y); }, s, e);
      },
      arg("q"), arg("kv").none(), arg("indices"), arg("topk_length").none(), arg("attn_sink").none(),
      arg("softmax_scale").none(), arg("out"), arg("lse"), arg("max_logits"), arg("workspace").none(),
      arg("stream"), arg("cache").none() = nb::none(), arg("cache_format") = "");

  // ------------------------------------------------------------------- dense_decode
  m.def(
      "dense_decode_workspace_size",
      [](nb::handle q, nb::handle cache, const std::string& cache_format, float k_scale, nb::handle block_table,
         nb::handle seqlens, bool causal, float q_scale, nb::handle attn_sink, OptFloat softmax_scale,
         nb::handle out, nb::handle lse) {
        Arrays a;
        return dense_decode_workspace_size(dense_decode_args(a, q, cache, cache_format, k_scale, block_table,
                                                             seqlens, causal, q_scale, attn_sink, softmax_scale,
                                                             out, lse));
      },
      arg("q"), arg("cache"), arg("cache_format"), arg("k_scale"), arg("block_table"), arg("seqlens"),
      arg("causal"), arg("q_scale"), arg("attn_sink").none(), arg("softmax_scale").none(), arg("out"),
      arg("lse"));
  m.def(
      "dense_decode",
      [](nb::handle q, nb::handle cache, const std::string& cache_format, float k_scale, nb::handle block_table,
         nb::handle seqlens, bool causal, float q_scale, nb::handle attn_sink, OptFloat softmax_scale,
         nb::handle out, nb::handle lse, nb::handle workspace, uintptr_t stream) {
        Arrays a;
        DenseDecodeArgs s = dense_decode_args(a, q, cache, cache_format, k_scale, block_table, seqlens, causal,
                                              q_scale, attn_sink, softmax_scale, out, lse);
        Exec e = make_exec(a, stream, workspace);
        run_released([](const DenseDecodeArgs& x, const Exec& y) { dense_decode(x, y); }, s, e);
      },
      arg("q"), arg("cache"), arg("cache_format"), arg("k_scale"), arg("block_table"), arg("seqlens"),
      arg("causal"), arg("q_scale"), arg("attn_sink").none(), arg("softmax_scale").none(), arg("out"),
      arg("lse"), arg("workspace").none(), arg("stream"));

  // ------------------------------------------------------------------- merge_states
  m.def(
      "merge_states",
      [](nb::handle out_parts, nb::handle lse_parts, nb::handle attn_sink, nb::handle out, nb::handle lse,
         uintptr_t stream) {
        Arrays a;
        MergeStatesArgs s;
        s.out_parts = a.view(out_parts, "out_parts");
        s.lse_parts = a.view(lse_parts, "lse_parts");
        s.attn_sink = a.view(attn_sink, "attn_sink");
        s.out = a.view(out, "out");
        s.lse = a.view(lse, "lse");
        Exec e = make_exec(a, stream);
        run_released([](const MergeStatesArgs& x, const Exec& y) { merge_states(x, y); }, s, e);
      },
      arg("out_parts"), arg("lse_parts"), arg("attn_sink").none(), arg("out"), arg("lse"), arg("stream"));

  // ------------------------------------------------------------------- dcp_rescale
  m.def(
      "dcp_rescale",
      [](nb::handle out_local, nb::handle lse_all, int rank, nb::handle attn_sink, nb::handle scaled, nb::handle lse,
         uintptr_t stream) {
        Arrays a;
        DcpRescaleArgs s;
        s.out_local = a.view(out_local, "out_local");
        s.lse_all = a.view(lse_all, "lse_all");
        s.rank = rank;
        s.attn_sink = a.view(attn_sink, "attn_sink");
        s.scaled = a.view(scaled, "scaled");
        s.lse = a.view(lse, "lse");
        Exec e = make_exec(a, stream);
        run_released([](const DcpRescaleArgs& x, const Exec& y) { dcp_rescale(x, y); }, s, e);
      },
      arg("out_local"), arg("lse_all"), arg("rank"), arg("attn_sink").none(), arg("scaled"), arg("lse"),
      arg("stream"));

  // ------------------------------------------------------------ write_cache / gather_cache
  m.def(
      "write_cache",
      [](nb::handle kv_c, nb::handle k_pe, nb::handle slot_mapping, nb::handle cache,
         const std::string& cache_format, float k_scale, uintptr_t stream) {
        Arrays a;
        WriteCacheArgs s;
        s.kv_c = a.view(kv_c, "kv_c");
        s.k_pe = a.view(k_pe, "k_pe");
        s.slot_mapping = a.view(slot_mapping, "slot_mapping");
        s.cache = make_cache(a, cache, cache_format, k_scale, "cache");
        Exec e = make_exec(a, stream);
        run_released([](const WriteCacheArgs& x, const Exec& y) { write_cache(x, y); }, s, e);
      },
      arg("kv_c"), arg("k_pe"), arg("slot_mapping"), arg("cache"), arg("cache_format"), arg("k_scale"),
      arg("stream"));
  m.def(
      "gather_cache",
      [](nb::handle cache, const std::string& cache_format, float k_scale, nb::handle slots, nb::handle out,
         uintptr_t stream) {
        Arrays a;
        GatherCacheArgs s;
        s.cache = make_cache(a, cache, cache_format, k_scale, "cache");
        s.slots = a.view(slots, "slots");
        s.out = a.view(out, "out");
        Exec e = make_exec(a, stream);
        run_released([](const GatherCacheArgs& x, const Exec& y) { gather_cache(x, y); }, s, e);
      },
      arg("cache"), arg("cache_format"), arg("k_scale"), arg("slots"), arg("out"), arg("stream"));
}

}  // namespace smla::py
