// Choosing the backend from where the tensors live.
#pragma once

#include "smla/error.h"
#include "smla/tensor.h"

#if SMLA_WITH_CUDA
#include "cuda/cuda_backend.h"
#define SMLA_RUN_CUDA(call) call
#else
#define SMLA_RUN_CUDA(call) \
  throw ::smla::RuntimeError("smla was built without CUDA: tensors on cuda cannot be processed")
#endif

namespace smla::detail {
inline bool on_cuda(const TensorView& t) { return t.device.type == DeviceType::cuda; }
}  // namespace smla::detail
