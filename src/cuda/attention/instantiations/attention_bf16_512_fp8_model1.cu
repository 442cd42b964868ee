#include "cuda/attention/attention_instantiate.cuh"

namespace smla::cuda {
SMLA_INSTANTIATE_ATTENTION(false, 512, static_cast<int>(CacheFormat::fp8_model1))
}  // namespace smla::cuda
