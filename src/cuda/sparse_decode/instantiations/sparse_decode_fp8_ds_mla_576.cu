#include "cuda/sparse_decode/instantiate.cuh"

namespace smla::cuda::sparse_decode_family {
SMLA_INSTANTIATE_SPARSE_DECODE(576, static_cast<int>(CacheFormat::fp8_ds_mla))

// The 32-row decode tiles in roles (launch.cu ds32_decode_roles; config.h kRawRoles).
void launch_ds32_roles(const AttnParams& p, dim3 grid, cudaStream_t stream) {
  launch_kernel<32, 576, static_cast<int>(CacheFormat::fp8_ds_mla), false, false, false, true>(p, grid, 0, stream);
}

// The 16-row decode tiles' merging kernel (config.h kClusterMergeOf): its clusters of n resident.
int64_t ds16_merge_clusters(int n) {
  return merge_clusters_resident<16, 576, static_cast<int>(CacheFormat::fp8_ds_mla)>(n);
}
}  // namespace smla::cuda::sparse_decode_family
