// The online softmax of the attention kernels, in the log2 domain, for the two fragment rows
// (g and g + 8) a thread holds in the mma.sync / wgmma accumulator layout. Masked logits are
// -inf; a row with no valid key so far keeps m = -inf and l = 0 (no NaN from -inf - -inf).
#pragma once

namespace smla::cuda {

struct RowState {
  float m = -INFINITY;  // running maximum of the scaled logits (log2 domain)
  float l = 0.f;        // running sum of exp2(s - m), this thread's columns only
};

// Max over the four lanes that share a fragment row.
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// Moves the running maximum to include `block_max`; returns the factor the row's earlier O and
// l are scaled by, and sets `m_use`, the maximum the block's exponentials are taken against.
__device__ __forceinline__ float update_max(RowState& st, float block_max, float& m_use) {
  const float m_new = fmaxf(st.m, block_max);
  m_use = m_new == -INFINITY ? 0.f : m_new;
  const float alpha = exp2f(st.m - m_use);
  st.m = m_new;
  return alpha;
}

}  // namespace smla::cuda
