#include "cuda/sparse_decode/instantiate.cuh"

namespace smla::cuda::sparse_decode_family {
#if SMLA_SD_E4M3_FP8
// The FP8 tiles serve 64 rows only (config.h kDenseE4m3Fp8).
template void launch_instance<64, 576, kDenseE4m3Fp8, false>(const AttnParams&, dim3, bool, cudaStream_t);
#endif
}  // namespace smla::cuda::sparse_decode_family
