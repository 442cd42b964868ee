// merge_states (SPEC §3, §4.4): host validation and dispatch.
#include <string>

#include "api/dispatch.h"
#include "api/validate.h"
#include "reference/reference.h"
#include "smla/ops.h"

namespace smla {
namespace {

using detail::kAny;

void validate(const MergeStatesArgs& a) {
  detail::check_tensor("out_parts", a.out_parts, {DType::f32, DType::bf16}, {kAny, kAny, kAny, kAny});
  detail::check_inner_contiguous("out_parts", a.out_parts, 1);
  const Device dev = a.out_parts.device;
  const int64_t n = a.out_parts.shape[0], T = a.out_parts.shape[1], h = a.out_parts.shape[2],
                d_v = a.out_parts.shape[3];
  detail::check_value("out_parts", n >= 1 && h >= 1 && d_v >= 1,
                      "a tensor of shape (n, T, h, d_v) with n >= 1, h >= 1 and d_v >= 1", describe(a.out_parts));

  detail::check_tensor_on("lse_parts", a.lse_parts, {DType::f32}, {n, T, h}, 0, "out_parts", dev);
  detail::check_optional_vector("attn_sink", a.attn_sink, DType::f32, h, "out_parts", dev);

  detail::check_tensor_on("out", a.out, {DType::bf16, DType::f32}, {T, h, d_v}, 1, "out_parts", dev);
  detail::check_tensor_on("lse", a.lse, {DType::f32}, {T, h}, 0, "out_parts", dev);

  detail::check_outputs_distinct({{"out", &a.out}, {"lse", &a.lse}},
                                 {{"out_parts", &a.out_parts}, {"lse_parts", &a.lse_parts}, {"attn_sink", &a.attn_sink}});

  // Element alignment only: any d_v is allowed, so rows of odd width must stay loadable
  // one element at a time.
  if (detail::on_cuda(a.out_parts)) {
    detail::check_aligned("out_parts", a.out_parts, static_cast<int>(dtype_size(a.out_parts.dtype)));
    detail::check_aligned("lse_parts", a.lse_parts, 4);
    detail::check_aligned("out", a.out, static_cast<int>(dtype_size(a.out.dtype)));
    detail::check_aligned("lse", a.lse, 4);
  }
}

}  // namespace

void merge_states(const MergeStatesArgs& a, [[maybe_unused]] const Exec& exec) {
  validate(a);
  // No rows: nothing to launch, so no backend has to handle an empty grid.
  if (a.out_parts.shape[1] == 0) return;
  if (detail::on_cuda(a.out_parts)) {
    SMLA_RUN_CUDA(cuda::merge_states(a, exec));
  } else {
    ref::merge_states(a);
  }
}

}  // namespace smla
