// CUDA runtime error handling: every runtime call is checked; failures become RuntimeError.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "smla/error.h"

#define SMLA_CUDA_CHECK(expr)                                                                   \
  do {                                                                                          \
    cudaError_t smla_err_ = (expr);                                                             \
    if (smla_err_ != cudaSuccess)                                                               \
      throw ::smla::RuntimeError(std::string("CUDA error in ") + #expr + ": " +                 \
                                 cudaGetErrorString(smla_err_));                                \
  } while (0)

// After a launch: catches invalid configurations without synchronizing.
#define SMLA_CUDA_CHECK_LAUNCH() SMLA_CUDA_CHECK(cudaGetLastError())

namespace smla::cuda {
inline cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }
}  // namespace smla::cuda
