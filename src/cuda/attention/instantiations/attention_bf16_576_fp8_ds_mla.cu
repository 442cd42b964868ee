#include "cuda/attention/attention_instantiate.cuh"

namespace smla::cuda {
SMLA_INSTANTIATE_ATTENTION(false, 576, static_cast<int>(CacheFormat::fp8_ds_mla))
}  // namespace smla::cuda
