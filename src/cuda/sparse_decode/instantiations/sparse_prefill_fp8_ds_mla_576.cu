#include "cuda/sparse_decode/instantiate.cuh"

namespace smla::cuda::sparse_decode_family {
SMLA_INSTANTIATE_SPARSE_DECODE_LOGITS(576, static_cast<int>(CacheFormat::fp8_ds_mla))
}  // namespace smla::cuda::sparse_decode_family
