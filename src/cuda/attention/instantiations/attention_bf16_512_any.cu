#include "cuda/attention/attention_instantiate.cuh"

namespace smla::cuda {
SMLA_INSTANTIATE_ATTENTION(false, 512, kAnyFormat)
}  // namespace smla::cuda
