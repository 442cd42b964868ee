#include "cuda/sparse_decode/instantiate.cuh"

namespace smla::cuda::sparse_decode_family {
SMLA_INSTANTIATE_SPARSE_DECODE_NARROW(576, static_cast<int>(CacheFormat::fp8_e4m3))
#if SMLA_SD_E4M3_WIDE
// 64-row tiles (and their pairs and persistent kernels) for fp8_e4m3 dense decode above 32 heads
template void launch_instance<64, 576, static_cast<int>(CacheFormat::fp8_e4m3), false>(const AttnParams&, dim3, bool,
                                                                                       cudaStream_t);
#endif
}  // namespace smla::cuda::sparse_decode_family
