#include "cuda/sparse_decode/instantiate.cuh"

namespace smla::cuda::sparse_decode_family {
SMLA_INSTANTIATE_SPARSE_DECODE(576, static_cast<int>(CacheFormat::fp8_ds_mla))

// The 32-row decode tiles in roles (launch.cu ds32_decode_roles; config.h kRawRoles).
void launch_ds32_roles(const AttnParams& p, dim3 grid, cudaStream_t stream) {
  launch_kernel<32, 576, static_cast<int>(CacheFormat::fp8_ds_mla), false, false, false, true>(p, grid, 0, stream);
}
}  // namespace smla::cuda::sparse_decode_family
