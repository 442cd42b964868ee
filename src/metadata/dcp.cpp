// Decode context parallelism (SPEC §4.6): which rank holds a token, how many of a sequence's
// tokens each rank holds, and which of a request's top-k keys a rank reads.
#include <algorithm>
#include <string>

#include "api/dispatch.h"
#include "api/validate.h"
#include "metadata/host_common.h"
#include "metadata/index_math.h"
#include "smla/metadata.h"

namespace smla {

namespace {

void check_layout(DcpLayout d) {
  meta::check_at_least("DcpLayout.world", d.world, 1);
  meta::check_at_least("DcpLayout.interleave", d.interleave, 1);
}

void check_rank(DcpLayout d, int rank) {
  detail::check_value("rank", rank >= 0 && rank < d.world,
                      "between 0 and world - 1 = " + std::to_string(d.world - 1), std::to_string(rank));
}

// One request at a time, as the CUDA kernel's CTA: each row packs its kept slots, then the
// request's largest count goes to topk_length.
void dcp_local_topk_host(const TensorView& positions, const TensorView& table, int page_size, DcpLayout d, int rank,
                         const TensorView& slots, const TensorView& counts, const TensorView& topk_length) {
  const int64_t b = positions.size(0), s_q = positions.size(1), k = positions.size(2), max_blocks = table.size(1);
  meta::for_each_row(b, s_q * k, [&](int64_t i) {
    const int32_t* row = table.ptr<const int32_t>() + i * table.stride[0];
    int32_t longest = 0;
    for (int64_t j = 0; j < s_q; ++j) {
      const int32_t* pos = positions.ptr<const int32_t>() + i * positions.stride[0] + j * positions.stride[1];
      int32_t* out = slots.ptr<int32_t>() + (i * s_q + j) * k;
      int64_t kept = 0;
      for (int64_t e = 0; e < k; ++e) {
        int32_t slot = meta::dcp_rank_slot(row, max_blocks, pos[e], page_size, d.world, d.interleave, rank);
        if (slot >= 0) out[kept++] = slot;
      }
      std::fill(out + kept, out + k, -1);
      // kept <= k <= INT32_MAX (checked).
      counts.ptr<int32_t>()[i * s_q + j] = static_cast<int32_t>(kept);
      longest = std::max(longest, static_cast<int32_t>(kept));
    }
    if (topk_length.present()) topk_length.ptr<int32_t>()[i] = longest;
  });
}

}  // namespace

int dcp_owner_rank(int64_t p, DcpLayout d) {
  check_layout(d);
  return static_cast<int>(meta::dcp_owner(p, d.world, d.interleave));
}

int64_t dcp_local_position(int64_t p, DcpLayout d) {
  check_layout(d);
  return meta::dcp_local_pos(p, d.world, d.interleave);
}

int64_t dcp_local_length(int64_t L, DcpLayout d, int rank) {
  check_layout(d);
  check_rank(d, rank);
  return meta::dcp_local_len(L, d.world, d.interleave, rank);
}

void dcp_local_seqlens(const TensorView& seqlens, DcpLayout d, int rank, const TensorView& out,
                       [[maybe_unused]] const Exec& exec) {
  meta::check_index_tensor("seqlens", seqlens, DType::i32, {detail::kAny}, "seqlens", seqlens, false);
  meta::check_index_tensor("out", out, DType::i32, {seqlens.size(0)}, "seqlens", seqlens, true);
  check_layout(d);
  check_rank(d, rank);
  detail::check_no_alias("out", out, "seqlens", seqlens);
  if (detail::on_cuda(seqlens)) {
    SMLA_RUN_CUDA(cuda::dcp_local_seqlens(seqlens, d, rank, out, exec));
  } else {
    const int32_t* in = seqlens.ptr<const int32_t>();
    int32_t* o = out.ptr<int32_t>();
    // The local length never exceeds max(L, 0), so it fits int32.
    meta::for_each_row(seqlens.size(0), 1, [&](int64_t i) {
      o[i] = static_cast<int32_t>(meta::dcp_local_len(in[i], d.world, d.interleave, rank));
    });
  }
}

void dcp_local_topk(const TensorView& positions, const TensorView& block_table, int page_size, DcpLayout d, int rank,
                    const TensorView& slots, const TensorView& counts, const TensorView& topk_length,
                    [[maybe_unused]] const Exec& exec) {
  using detail::kAny;
  const char* ref = "positions";
  meta::check_index_tensor("positions", positions, DType::i32, {kAny, kAny, kAny}, ref, positions, false);
  meta::check_index_tensor("block_table", block_table, DType::i32, {kAny, kAny}, ref, positions, false);
  // One row per request in both: a mismatch is reported against the shorter of the two.
  const int64_t b = std::max(positions.size(0), block_table.size(0));
  meta::check_index_tensor("positions", positions, DType::i32, {b, kAny, kAny}, ref, positions, false);
  meta::check_index_tensor("block_table", block_table, DType::i32, {b, kAny}, ref, positions, false);
  const int64_t s_q = positions.size(1), k = positions.size(2);
  meta::check_at_least("page_size", page_size, 1);
  check_layout(d);
  check_rank(d, rank);
  // A count is at most k, and counts are int32.
  detail::check_value("positions", k <= meta::kInt32Max, "rows of at most 2147483647 entries (k)",
                      "k = " + std::to_string(k));
  meta::check_index_tensor("slots", slots, DType::i32, {b, s_q, k}, ref, positions, true);
  meta::check_index_tensor("counts", counts, DType::i32, {b, s_q}, ref, positions, true);
  if (topk_length.present())
    meta::check_index_tensor("topk_length", topk_length, DType::i32, {b}, ref, positions, true);
  detail::check_outputs_distinct({{"slots", &slots}, {"counts", &counts}, {"topk_length", &topk_length}},
                                 {{"positions", &positions}, {"block_table", &block_table}});
  if (detail::on_cuda(positions)) {
    SMLA_RUN_CUDA(cuda::dcp_local_topk(positions, block_table, page_size, d, rank, slots, counts, topk_length, exec));
  } else {
    dcp_local_topk_host(positions, block_table, page_size, d, rank, slots, counts, topk_length);
  }
}

}  // namespace smla
