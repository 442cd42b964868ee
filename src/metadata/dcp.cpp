// Decode context parallelism (SPEC §4.6): which rank holds a token and how many of a
// sequence's tokens each rank holds.
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

}  // namespace smla
