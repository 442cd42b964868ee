#include "cuda/sparse_decode/instantiate.cuh"

namespace smla::cuda::sparse_decode_family {
SMLA_INSTANTIATE_SPARSE_DECODE(576, kDenseTma)
}  // namespace smla::cuda::sparse_decode_family
