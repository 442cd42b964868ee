// The FP8 tiles' shared memory (config.h Fp8Smem, kDenseE4m3Fp8): where each tile and barrier
// lives, the e4m3 descriptors' steps, and the barriers' counts.
#pragma once

#include <cstdint>

#include "cuda/common/barriers.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/common/wgmma_fp8.cuh"
#include "cuda/sparse_decode/config.h"

namespace smla::cuda::sparse_decode_family {

struct Fp8Tiles {
  using S = Fp8Smem;
  uint8_t* smem;
  // K tile of stage s: nine boxes of 64 keys x 64 one-byte columns (the TMA unit's layout).
  __device__ uint8_t* k_tile(int s) const { return smem + S::k + s * S::kKBytes; }
  // V^T of stage s: row n = value column n, its 64 keys in 64 bytes.
  __device__ uint8_t* vt_tile(int s) const { return smem + S::vt + s * S::kVtBytes; }
  // P x 256 in e4m3: part 0 the rounded values (hi), part 1 what they left (lo); row = head.
  __device__ uint8_t* p_tile(int part) const { return smem + S::p + part * S::kPBytes; }
  __device__ uint32_t* valid(int s) const { return reinterpret_cast<uint32_t*>(smem + S::valid + kValidBytes * s); }
  __device__ uint64_t* bars() const { return reinterpret_cast<uint64_t*>(smem + S::bars); }
  __device__ uint64_t* k_full(int s) const { return bars() + s; }
  __device__ uint64_t* k_empty(int s) const { return bars() + S::kKStages + s; }
  __device__ uint64_t* v_full(int s) const { return bars() + 2 * S::kKStages + s; }
  __device__ uint64_t* v_empty(int s) const { return bars() + 2 * S::kKStages + S::kVStages + s; }
  __device__ uint64_t* aux() const { return bars() + 2 * S::kKStages + 2 * S::kVStages; }
  // 16-byte units from k-step 0 to k-step ks (32 values) of Q or a K tile.
  __device__ static uint32_t qk_step(int ks) { return static_cast<uint32_t>(((ks >> 1) * S::kBox + (ks & 1) * 32) / 16); }
  // B descriptor of V^T value columns col0 .. col0 + 127, keys 0..31 (k-step kk: + 2 kk units).
  __device__ uint64_t vt_desc(int s, int col0) const { return gmma_desc_sw64(smem_addr(vt_tile(s) + col0 * 64)); }
};

// K full: the TMA bytes (one arrive); K empty: WG0's warps after QK^T and the producer's four
// transposing warps; V^T full: the four transposing warps; V^T empty: both consumer
// warpgroups' warps after P V; aux: a partial block's boxes.
__device__ __forceinline__ void init_fp8_barriers(uint8_t* smem) {
  if (threadIdx.x != 0) return;
  const Fp8Tiles t{smem};
  for (int s = 0; s < Fp8Smem::kKStages; ++s) {
    mbar_init(t.k_full(s), 1);
    mbar_init(t.k_empty(s), 8);
  }
  for (int s = 0; s < Fp8Smem::kVStages; ++s) {
    mbar_init(t.v_full(s), 4);
    mbar_init(t.v_empty(s), 8);
  }
  mbar_init(t.aux(), 1);
  fence_mbarrier_init();  // the TMA boxes complete on k_full and aux
}

}  // namespace smla::cuda::sparse_decode_family
