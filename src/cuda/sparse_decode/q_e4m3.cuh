// fp8 q (e4m3) loaded 8 bytes at a time: the 64-row tiles' Q (kernel.cuh, load_q, converted to
// bf16 at the stores) and the FP8 tiles' (consumer_fp8.cuh).
#pragma once

#include <cstdint>

#include "cuda/attention/attention_params.h"
#include "cuda/sparse_decode/work.cuh"

namespace smla::cuda::sparse_decode_family {

// Chunk i = threadIdx.x + k * kThreads (row i / (kD / 8), bytes 8 (i % (kD / 8)) ..) of this
// tile's token: e4m3 bytes, zeros past the tile's real heads or its kRows rows; rows whose
// address is not 8-byte aligned are read a byte at a time.
template <int kRows, int kD, int kThreads, int kPer>
__device__ __forceinline__ void load_q_e4m3_chunks(const AttnParams& p, const Work& w, uint2 (&b)[kPer]) {
  constexpr int kChunks = kD / 8;
  constexpr int kTotal = kRows * kChunks;
  const uint8_t* q8 = static_cast<const uint8_t*>(p.q) + w.req * p.q_sb + w.t * p.q_st + w.head0 * p.q_sh;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int i = static_cast<int>(threadIdx.x) + k * kThreads;
    const int r = i / kChunks, ch = i % kChunks;
    b[k] = make_uint2(0, 0);
    if (i < kTotal && r < w.heads) {
      const uint8_t* src = q8 + r * p.q_sh + ch * 8;
      if ((reinterpret_cast<uintptr_t>(src) & 7) == 0) {
        b[k] = __ldg(reinterpret_cast<const uint2*>(src));
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) (e < 4 ? b[k].x : b[k].y) |= static_cast<uint32_t>(__ldg(src + e)) << (8 * (e & 3));
      }
    }
  }
}

}  // namespace smla::cuda::sparse_decode_family
