#include "cuda/attention/attention_instantiate.cuh"

namespace smla::cuda {
SMLA_INSTANTIATE_ATTENTION(false, 576, kAnyFormat)
}  // namespace smla::cuda
