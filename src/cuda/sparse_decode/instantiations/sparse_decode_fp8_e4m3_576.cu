#include "cuda/sparse_decode/instantiate.cuh"

namespace smla::cuda::sparse_decode_family {
SMLA_INSTANTIATE_SPARSE_DECODE_NARROW(576, static_cast<int>(CacheFormat::fp8_e4m3))
}  // namespace smla::cuda::sparse_decode_family
