// The FP8 tiles' producer warpgroup (kDenseE4m3Fp8): warp 0 keeps up to three 64-key blocks of
// raw e4m3 pages in flight by the TMA unit (DensePageWalk, boxes of 64 one-byte columns), and
// all four warps transpose each block's values (columns 0..511 of its K tile) into K-major V^T
// for the P V wgmmas. Thread t takes keys 16 (t % 4) .. + 15 of value columns 16 (t / 4) .. + 15:
// sixteen 16-byte loads, 4 x 4 byte transposes, sixteen 16-byte stores (bench/micro/
// fp8_pv_transpose.cu: ~1600 cycles a block for one warpgroup, 2026-12-01).
#pragma once

#include <cstdint>

#include "cuda/common/fp8.cuh"
#include "cuda/sparse_decode/dense_page_walk.cuh"
#include "cuda/sparse_decode/fp8_tiles.cuh"

namespace smla::cuda::sparse_decode_family {

// The values of K tile `k` (keys x columns 0..511, boxes of 64 columns) into V^T tile `vt`.
__device__ __forceinline__ void transpose_values(const uint8_t* k, uint8_t* vt, int t) {
  const int q = t & 3, cg = t >> 2;  // keys 16 q .., value columns 16 cg ..
  const uint8_t* src = k + (cg >> 2) * Fp8Smem::kBox;  // the box of columns 16 cg .. + 15
  uint4 row[16];
#pragma unroll
  for (int j = 0; j < 16; ++j) row[j] = *reinterpret_cast<const uint4*>(src + sw64_offset(16 * q + j, cg & 3));
#pragma unroll
  for (int wd = 0; wd < 4; ++wd) {  // value columns 16 cg + 4 wd .. + 3
    uint32_t col[4][4];             // col[b][m]: column 4 wd + b, keys 16 q + 4 m .. + 3
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      auto word = [&](int j) { return reinterpret_cast<const uint32_t*>(&row[4 * m + j])[wd]; };
      uint32_t o[4];
      transpose_4x4_bytes(word(0), word(1), word(2), word(3), o);
#pragma unroll
      for (int b = 0; b < 4; ++b) col[b][m] = o[b];
    }
#pragma unroll
    for (int b = 0; b < 4; ++b)
      *reinterpret_cast<uint4*>(vt + sw64_offset(16 * cg + 4 * wd + b, q)) = make_uint4(col[b][0], col[b][1], col[b][2], col[b][3]);
  }
}

inline __device__ void produce_e4m3_fp8(const AttnParams& p, const Work& w, uint8_t* smem) {
  constexpr int kK = Fp8Smem::kKStages, kBoxes = 576 / 64;
  const Fp8Tiles t{smem};
  const int pt = static_cast<int>(threadIdx.x) - kConsumerThreads, warp = pt >> 5, lane = pt & 31;
  const int nb = w.kb_end - w.kb_begin;
  if (nb <= 0) return;
  DensePageWalk<64> walk(p, w, lane, t.aux());  // warp 0's (the other warps never load)
  int issued = 0;
  for (int i = 0; i < nb; ++i) {
    if (warp == 0) {
      for (; issued < nb && issued < i + kK; ++issued) {
        const int n = issued, s = n % kK;
        walk.template load<kBoxes>(w.kb_begin + n, t.k_tile(s), t.k_full(s), t.valid(s), 0, kBoxes, [&] {
          if (n >= kK) mbar_wait(t.k_empty(s), ((n / kK) - 1) & 1);
        });
      }
    }
    const int sk = i % kK, sv = i & 1;
    mbar_wait(t.k_full(sk), (i / kK) & 1);
    if (i >= Fp8Smem::kVStages) mbar_wait(t.v_empty(sv), ((i >> 1) - 1) & 1);
    transpose_values(t.k_tile(sk), t.vt_tile(sv), pt);
    fence_proxy_async();  // V^T is read by wgmma
    __syncwarp();
    if (lane == 0) {
      mbar_arrive(t.v_full(sv));
      mbar_arrive(t.k_empty(sk));
    }
  }
}

}  // namespace smla::cuda::sparse_decode_family
