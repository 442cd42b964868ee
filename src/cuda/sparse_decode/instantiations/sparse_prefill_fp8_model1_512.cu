#include "cuda/sparse_decode/instantiate.cuh"

namespace smla::cuda::sparse_decode_family {
SMLA_INSTANTIATE_SPARSE_DECODE_LOGITS(512, static_cast<int>(CacheFormat::fp8_model1))
}  // namespace smla::cuda::sparse_decode_family
