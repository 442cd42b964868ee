// One launcher per (rows, d_qk, format); included only by instantiations/*.cu so that the
// kernels compile in parallel.
#pragma once

#include "cuda/common/cuda_check.h"
#include "cuda/sparse_decode/kernel.cuh"

namespace smla::cuda::sparse_decode_family {

template <int kRows, int kD, int kFmt>
void launch_instance(const AttnParams& p, dim3 grid, cudaStream_t stream) {
  constexpr size_t kSmem = Smem<kRows, kD>::bytes;
  // The dynamic shared-memory limit is an attribute of the function: raised once.
  static const bool configured = [] {
    SMLA_CUDA_CHECK(cudaFuncSetAttribute(sparse_decode_kernel<kRows, kD, kFmt>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmem)));
    return true;
  }();
  (void)configured;
  sparse_decode_kernel<kRows, kD, kFmt><<<grid, kThreads, kSmem, stream>>>(p);
  SMLA_CUDA_CHECK_LAUNCH();
}

#define SMLA_INSTANTIATE_SPARSE_DECODE(D, FMT)                                                      \
  template void launch_instance<16, D, FMT>(const AttnParams&, dim3, cudaStream_t);                \
  template void launch_instance<32, D, FMT>(const AttnParams&, dim3, cudaStream_t);                \
  template void launch_instance<64, D, FMT>(const AttnParams&, dim3, cudaStream_t);

}  // namespace smla::cuda::sparse_decode_family
