// The launcher of one attention kernel instantiation; included only by the files under
// instantiations/, one per (element type, d_qk, format), so the kernels compile in parallel.
#pragma once

#include "cuda/attention/attention_dispatch.h"
#include "cuda/attention/attention_kernel.cuh"
#include "cuda/common/cuda_check.h"
#include "cuda/common/per_device.h"

namespace smla::cuda {

template <int NG, bool F16, int D, int FMT>
void launch_attention_kernel(const AttnParams& p, dim3 grid, cudaStream_t stream) {
  const size_t smem = attention_smem_bytes(NG, D, F16, FMT, p.raw_stride);
  // Raised on demand: the dynamic shared-memory limit is an attribute of the function on each
  // device (per_device.h).
  raise_dynamic_smem<attention_kernel<NG, F16, D, FMT>>(smem);
  attention_kernel<NG, F16, D, FMT><<<grid, attention_threads(NG), smem, stream>>>(p);
  SMLA_CUDA_CHECK_LAUNCH();
}

#define SMLA_INSTANTIATE_ATTENTION(F16, D, FMT)                                                   \
  template void launch_attention_kernel<1, F16, D, FMT>(const AttnParams&, dim3, cudaStream_t);  \
  template void launch_attention_kernel<2, F16, D, FMT>(const AttnParams&, dim3, cudaStream_t);  \
  template void launch_attention_kernel<3, F16, D, FMT>(const AttnParams&, dim3, cudaStream_t);  \
  template void launch_attention_kernel<4, F16, D, FMT>(const AttnParams&, dim3, cudaStream_t);

}  // namespace smla::cuda
