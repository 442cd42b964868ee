// Declarations of the attention kernel instantiations (defined under instantiations/).
#pragma once

#include <cuda_runtime.h>

#include "cuda/attention/attention_params.h"

namespace smla::cuda {

inline constexpr int kAnyFormat = -1;  // the format is read at run time

template <int NG, bool F16, int D, int FMT>
void launch_attention_kernel(const AttnParams& p, dim3 grid, cudaStream_t stream);

}  // namespace smla::cuda
