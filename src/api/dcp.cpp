// dcp_rescale and dcp_combine (smla/dcp.h): host validation and dispatch.
#include <string>

#include "api/dispatch.h"
#include "api/validate.h"
#include "reference/reference.h"
#include "smla/dcp.h"

namespace smla {
namespace {

using detail::kAny;

// [T, h, d_v] partial with h a multiple of the world size; returns h / N.
int64_t check_partial(const TensorView& out_local, int64_t world) {
  detail::check_tensor("out_local", out_local, {DType::f32, DType::bf16}, {kAny, kAny, kAny});
  detail::check_inner_contiguous("out_local", out_local, 1);
  const int64_t h = out_local.shape[1];
  detail::check_value("out_local", h >= 1 && out_local.shape[2] >= 1 && h % world == 0,
                      "a tensor of shape (T, h, d_v) with h a positive multiple of the world size " +
                          std::to_string(world),
                      describe(out_local));
  return h / world;
}

void validate(const DcpRescaleArgs& a) {
  detail::check_tensor("lse_all", a.lse_all, {DType::f32}, {kAny, kAny, kAny});
  const int64_t N = a.lse_all.shape[0];
  detail::check_value("lse_all", N >= 1, "a tensor of shape (N, T, h) with N >= 1 ranks", describe(a.lse_all));
  const int64_t hr = check_partial(a.out_local, N);
  const Device dev = a.out_local.device;
  const int64_t T = a.out_local.shape[0], h = a.out_local.shape[1], d_v = a.out_local.shape[2];
  detail::check_tensor_on("lse_all", a.lse_all, {DType::f32}, {N, T, h}, 0, "out_local", dev);
  detail::check_value("rank", a.rank >= 0 && a.rank < N, "between 0 and " + std::to_string(N - 1),
                      std::to_string(a.rank));
  detail::check_optional_vector("attn_sink", a.attn_sink, DType::f32, h, "out_local", dev);
  detail::check_tensor_on("scaled", a.scaled, {DType::f32}, {N, T, hr, d_v}, 4, "out_local", dev);
  detail::check_tensor_on("lse", a.lse, {DType::f32}, {T, hr}, 0, "out_local", dev);
  detail::check_outputs_distinct({{"scaled", &a.scaled}, {"lse", &a.lse}},
                                 {{"out_local", &a.out_local}, {"lse_all", &a.lse_all}, {"attn_sink", &a.attn_sink}});
  if (detail::on_cuda(a.out_local))
    detail::check_each_aligned({{"out_local", &a.out_local}, {"lse_all", &a.lse_all}, {"attn_sink", &a.attn_sink},
                                {"scaled", &a.scaled}, {"lse", &a.lse}},
                               4);
}

void validate(const DcpCombineArgs& a) {
  detail::check_value("method",
                      a.method == DcpCombineMethod::reduce_scatter || a.method == DcpCombineMethod::all_to_all,
                      "reduce_scatter or all_to_all", std::to_string(static_cast<int>(a.method)));
  detail::check_value("world", a.world >= 1, "at least 1", std::to_string(a.world));
  detail::check_value("rank", a.rank >= 0 && a.rank < a.world, "between 0 and " + std::to_string(a.world - 1),
                      std::to_string(a.rank));
  const int64_t hr = check_partial(a.out_local, a.world);
  const Device dev = a.out_local.device;
  detail::check_value("out_local", detail::on_cuda(a.out_local), "a tensor on cuda (the combine runs over NCCL)",
                      "a tensor on " + device_name(dev));
  const int64_t T = a.out_local.shape[0], h = a.out_local.shape[1], d_v = a.out_local.shape[2];
  detail::check_tensor_on("lse_local", a.lse_local, {DType::f32}, {T, h}, 2, "out_local", dev);
  detail::check_optional_vector("attn_sink", a.attn_sink, DType::f32, h, "out_local", dev);
  detail::check_tensor_on("out", a.out, {DType::f32}, {T, hr, d_v}, 3, "out_local", dev);
  detail::check_tensor_on("lse", a.lse, {DType::f32}, {T, hr}, 0, "out_local", dev);
  detail::check_outputs_distinct({{"out", &a.out}, {"lse", &a.lse}},
                                 {{"out_local", &a.out_local}, {"lse_local", &a.lse_local}, {"attn_sink", &a.attn_sink}});
  detail::check_each_aligned({{"out_local", &a.out_local}, {"lse_local", &a.lse_local}, {"attn_sink", &a.attn_sink},
                              {"out", &a.out}, {"lse", &a.lse}},
                             4);
}

}  // namespace

void dcp_rescale(const DcpRescaleArgs& a, [[maybe_unused]] const Exec& exec) {
  validate(a);
  if (a.out_local.shape[0] == 0) return;  // no tokens: nothing to launch
  if (detail::on_cuda(a.out_local)) {
    SMLA_RUN_CUDA(cuda::dcp_rescale(a, exec));
  } else {
    ref::dcp_rescale(a);
  }
}

bool built_with_nccl() {
#if SMLA_WITH_NCCL
  return true;
#else
  return false;
#endif
}

size_t dcp_combine_workspace_size(const DcpCombineArgs& a) {
  validate(a);
#if SMLA_WITH_NCCL
  return cuda::dcp_combine_workspace_size(a);
#else
  throw RuntimeError("smla was built without NCCL: dcp_combine is not available");
#endif
}

void dcp_combine(const DcpCombineArgs& a, [[maybe_unused]] void* nccl_comm, [[maybe_unused]] const Exec& exec) {
  validate(a);
  detail::check_value("nccl_comm", nccl_comm != nullptr, "an ncclComm_t", "a null pointer");
#if SMLA_WITH_NCCL
  cuda::dcp_combine(a, nccl_comm, exec);
#else
  throw RuntimeError("smla was built without NCCL: dcp_combine is not available");
#endif
}

}  // namespace smla
