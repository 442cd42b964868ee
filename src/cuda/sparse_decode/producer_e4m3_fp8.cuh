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
// kSpread: register j of the lanes of key group q holds key 16 q + (j ^ q), and the lanes of odd
// column groups store column b ^ 1 at the step of column b, so that a warp's sixteen-byte loads
// and stores of one step cover both row parities and both swizzle phases: 4 wavefronts, where
// the plain order puts the 32 lanes on 64 bytes of banks (8). The transposes' byte permutes,
// given other selectors, put keys and columns in place at no extra instruction
// (bench/micro/fp8_pv_transpose.cu checks both orders against float64 on the device).
template <bool kSpread = kFp8SpreadTranspose>
__device__ __forceinline__ void transpose_values(const uint8_t* k, uint8_t* vt, int t) {
  const int q = t & 3, cg = t >> 2;  // keys 16 q .., value columns 16 cg ..
  const uint8_t* src = k + (cg >> 2) * Fp8Smem::kBox;  // the box of columns 16 cg .. + 15
  const int jx = kSpread ? q : 0, bx = kSpread ? cg & 1 : 0;
  // transpose_4x4_bytes's selectors for words in the order j ^ jx and columns b ^ bx.
  const uint32_t flip = (jx & 1 ? 0x1111u : 0u) ^ (jx & 2 ? 0x4444u : 0u);
  const uint32_t s_lo = bx ? 0x4051u : 0x5140u, s_hi = bx ? 0x6273u : 0x7362u;
  // sw64_offset(16 q + (j ^ jx), chunk) and sw64_offset(16 cg + 4 wd + (b ^ bx), q) as a
  // constant of the step XOR one value of the thread (the swizzle and jx, bx touch bits 4-7 only):
  // one LOP3 an address, nothing kept across the steps.
  const uint8_t* rows = src + q * 1024;
  const uint32_t x = (static_cast<uint32_t>(jx) << 6) | (static_cast<uint32_t>((cg & 3) ^ (jx >> 1)) << 4);
  const uint32_t y = (static_cast<uint32_t>(bx) << 6) | (static_cast<uint32_t>(q) << 4);
  auto step = [](int hi, int lo) { return static_cast<uint32_t>(lo * 64 + ((((hi & 1) << 1) | (lo >> 1)) << 4)); };
  uint4 row[16];
#pragma unroll
  for (int j = 0; j < 16; ++j) row[j] = *reinterpret_cast<const uint4*>(rows + (j >> 2) * 256 + (step(j >> 2, j & 3) ^ x));
#pragma unroll
  for (int wd = 0; wd < 4; ++wd) {  // value columns 16 cg + 4 wd .. + 3
    uint32_t col[4][4];             // col[b][m]: column 4 wd + (b ^ bx), keys 16 q + 4 m .. + 3
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      auto word = [&](int j) { return reinterpret_cast<const uint32_t*>(&row[4 * m + j])[wd]; };
      uint32_t o[4];
      transpose_4x4_bytes(word(0), word(1), word(2), word(3), o, 0x5410u ^ flip, 0x7632u ^ flip, s_lo, s_hi);
#pragma unroll
      for (int b = 0; b < 4; ++b) col[b][m] = o[b];
    }
#pragma unroll
    for (int b = 0; b < 4; ++b)
      *reinterpret_cast<uint4*>(vt + cg * 1024 + wd * 256 + (step(wd, b) ^ y)) = make_uint4(col[b][0], col[b][1], col[b][2], col[b][3]);
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
