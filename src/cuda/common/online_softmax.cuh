// The online softmax of the attention kernels, in the log2 domain, for the two fragment rows
// (g and g + 8) a thread holds in the mma.sync / wgmma accumulator layout. Masked logits are
// -inf; a row with no valid key so far keeps m = -inf and l = 0 (no NaN from -inf - -inf).
#pragma once

#include <cstdint>

namespace smla::cuda {

// The log2 domain's conversions: lse = ln 2 * (m + log2 l); exp(x) = exp2(x * log2 e).
inline constexpr float kLn2 = 0.6931471805599453f;
inline constexpr float kLog2e = 1.4426950408889634f;

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

// Scores of kNT 8-key column tiles in the accumulator fragment (elements e and 2 + e of tile nt
// are rows g and g + 8 at key nt * 8 + 2 c + e). The block's masked keys (their bit of `valid`
// clear) become -inf, unscaled; a block whose keys are all valid (most of them, and the test is
// uniform across the CTA) skips the bit tests. Returns each row's maximum over this thread's
// raw logits: the scale (positive) enters later, with each exponent's FFMA.
template <int kNT>
__device__ __forceinline__ void mask_rowmax(float (&sc)[kNT][4], uint64_t valid, int c, float& mx0, float& mx1) {
  constexpr uint64_t kAll = kNT >= 8 ? ~0ull : (1ull << (8 * kNT)) - 1;
  if ((valid & kAll) != kAll) {
    const uint64_t v = valid >> (2 * c);
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        if (!((v >> (nt * 8 + e)) & 1u)) sc[nt][e] = sc[nt][2 + e] = -INFINITY;
      }
    }
  }
  mx0 = -INFINITY;
  mx1 = -INFINITY;
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt) {
    mx0 = fmaxf(mx0, fmaxf(sc[nt][0], sc[nt][1]));
    mx1 = fmaxf(mx1, fmaxf(sc[nt][2], sc[nt][3]));
  }
}

// 2^x on the MUFU unit alone: results below 2^-126 become 0 (next to the row maximum's 1 they
// add nothing), where exp2f wraps each MUFU.EX2 in four instructions for subnormal results.
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
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

// Lazy rescaling: the reference maximum moves only when a block's maximum exceeds it by more
// than kLazyRescaleLog2, so O and l are rescaled in few blocks. Exponentials then reach at most
// 2^kLazyRescaleLog2, which bf16 P and the fp32 sums hold with the same relative precision; l
// stays the sum of exp2(s - m) for the m kept, so lse = m + log2(l) is unchanged.
inline constexpr float kLazyRescaleLog2 = 8.f;

// As update_max; -inf + 8 = -inf, so the first finite maximum always moves the reference.
__device__ __forceinline__ float update_max_lazy(RowState& st, float block_max, float& m_use) {
  const float m_new = block_max > st.m + kLazyRescaleLog2 ? block_max : st.m;
  m_use = m_new == -INFINITY ? 0.f : m_new;
  const float alpha = m_new == st.m ? 1.f : exp2f(st.m - m_use);
  st.m = m_new;
  return alpha;
}

}  // namespace smla::cuda
