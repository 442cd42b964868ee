// One launcher per (rows, d_qk, format); included only by instantiations/*.cu so that the
// kernels compile in parallel.
#pragma once

#include <algorithm>
#include <cstdint>

#include "cuda/common/cuda_check.h"
#include "cuda/common/device_info.h"
#include "cuda/common/pdl.cuh"
#include "cuda/sparse_decode/kernel.cuh"

namespace smla::cuda::sparse_decode_family {

// One kernel launch; kPair: as clusters of two CTAs along grid.y (config.h, kPairCtas).
template <int kRows, int kD, int kFmt, bool kPair>
void launch_kernel(const AttnParams& p, dim3 grid, cudaStream_t stream) {
  constexpr size_t kSmem = Smem<kRows, kD>::bytes;
  constexpr auto kernel = sparse_decode_kernel<kRows, kD, kFmt, kPair>;
  // The dynamic shared-memory limit is an attribute of the function: raised once.
  static const bool configured = [] {
    SMLA_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmem)));
    return true;
  }();
  (void)configured;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  AttnParams args = p;
  cfg.blockDim = dim3(cta_threads(kRows));
  cfg.dynamicSmemBytes = kSmem;
  cfg.stream = stream;
  // Programmatic dependent of the split schedule kernel (the kernel waits for it before it
  // reads anything); clusters of two for pairs.
  cudaLaunchAttribute attrs[2] = {pdl_attribute(), {}};
  attrs[1].id = cudaLaunchAttributeClusterDimension;
  attrs[1].val.clusterDim.x = 1;
  attrs[1].val.clusterDim.y = kPair ? kPairCtas : 1;
  attrs[1].val.clusterDim.z = 1;
  cfg.attrs = attrs;
  cfg.numAttrs = kPair ? 2 : 1;
  if constexpr (kPersistentTile<kRows, kFmt == static_cast<int>(CacheFormat::bf16)>) {
    // Persistent CTAs (measurement build): the launch grid becomes the unit grid, walked by as
    // many CTAs (pairs: clusters of two) as can be resident at once, one per SM.
    static const int64_t resident = [&cfg] {
      if constexpr (!kPair) return static_cast<int64_t>(current_device_info().sm_count);
      int clusters = 0;
      cudaLaunchConfig_t one = cfg;
      one.gridDim = dim3(1, kPairCtas, 1);
      SMLA_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, kernel, &one));
      return static_cast<int64_t>(clusters);
    }();
    args.unit_gx = static_cast<int>(grid.x);
    args.unit_gy = static_cast<int>(grid.y);
    args.unit_gz = static_cast<int>(grid.z);
    const int64_t units = static_cast<int64_t>(grid.x) * (grid.y / (kPair ? kPairCtas : 1)) * grid.z;
    cfg.gridDim = dim3(static_cast<unsigned>(std::max<int64_t>(1, std::min(units, resident))), kPair ? kPairCtas : 1, 1);
  }
  SMLA_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, args));
}

// pair: clusters of two CTAs along grid.y (two head tiles of one token) that share each block's
// gathers; only 64-row tiles of packed formats have a pair kernel (launch.cu decides).
template <int kRows, int kD, int kFmt>
void launch_instance(const AttnParams& p, dim3 grid, bool pair, cudaStream_t stream) {
  if constexpr (kRows == 64 && kFmt != static_cast<int>(CacheFormat::bf16)) {
    if (pair) return launch_kernel<kRows, kD, kFmt, true>(p, grid, stream);
  }
  launch_kernel<kRows, kD, kFmt, false>(p, grid, stream);
}

#define SMLA_INSTANTIATE_SPARSE_DECODE(D, FMT)                                                      \
  template void launch_instance<16, D, FMT>(const AttnParams&, dim3, bool, cudaStream_t);                \
  template void launch_instance<32, D, FMT>(const AttnParams&, dim3, bool, cudaStream_t);                \
  template void launch_instance<64, D, FMT>(const AttnParams&, dim3, bool, cudaStream_t);

}  // namespace smla::cuda::sparse_decode_family
