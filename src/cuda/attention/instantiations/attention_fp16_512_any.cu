#include "cuda/attention/attention_instantiate.cuh"

namespace smla::cuda {
SMLA_INSTANTIATE_ATTENTION(true, 512, kAnyFormat)
}  // namespace smla::cuda
