// The wgmma descriptors of a K tile, for both consumers: core matrices (config.h Smem,
// tile_offset), or kSw the TMA unit's boxes of 64 columns x 64 rows with the 128-byte swizzle
// (config.h kSwizzled). K is read K-major (QK^T, S^T = K Q^T), V = the same tile MN-major.
// Steps are in 16-byte units of a descriptor's start address.
#pragma once

#include <cstdint>

#include "cuda/common/wgmma.cuh"

namespace smla::cuda::sparse_decode_family {

template <int kD, bool kSw>
struct KTileDesc {
  static constexpr int kRowGroup = 16 * kD;  // no swizzle: bytes of 8 rows
  static constexpr int kBox = 64 * 128;      // kSw: bytes of one 64-column box
  // K at the tile's address `a`, k-step 0; k_step(ks): from k-step 0 to k-step ks (16 columns).
  __device__ static uint64_t k(uint32_t a) { return kSw ? gmma_desc_sw128(a, 16, 1024) : gmma_desc(a, 128, kRowGroup); }
  __device__ static uint32_t k_step(int ks) { return kSw ? ((ks >> 2) * kBox + (ks & 3) * 32) / 16 : ks * 16; }
  // Byte offset of value column `col` (a multiple of 64) in the tile.
  static constexpr uint32_t v_col(int col) { return kSw ? col / 64 * kBox : col / 8 * 128; }
  // V from value column `col`, keys 0..15; kVKStep: to the next 16 keys.
  __device__ static uint64_t v(uint32_t a, int col) {
    return kSw ? gmma_desc_sw128(a + v_col(col), kBox, 1024) : gmma_desc(a + v_col(col), kRowGroup, 128);
  }
  static constexpr uint32_t kVKStep = kSw ? 2048 / 16 : 2 * kRowGroup / 16;
};

}  // namespace smla::cuda::sparse_decode_family
