// A 64-row K tile handed over in two column halves (A: boxes 0-3, the values of O's left half;
// B: the rest), each with its own full and empty barriers (config.h Smem::alt_bars): the
// alternating and seesaw consumers (SMLA_SD_ALT).
#pragma once

#include <cstdint>

#include "cuda/common/barriers.cuh"
#include "cuda/common/wgmma.cuh"
#include "cuda/sparse_decode/config.h"
#include "cuda/sparse_decode/producer.cuh"

namespace smla::cuda::sparse_decode_family {

template <int kD>
struct AltStage {
  uint64_t* bars;    // full[kStages], empty[kStages] of the A halves
  uint64_t* bars_b;  // the same of the B halves
  int s;
  uint32_t* valid;
  uint32_t tile;
  __device__ AltStage(uint8_t* smem, int stage) : s(stage) {
    using S = Smem<64, kD>;
    bars = reinterpret_cast<uint64_t*>(smem + S::bars);
    bars_b = reinterpret_cast<uint64_t*>(smem + S::alt_bars);
    valid = reinterpret_cast<uint32_t*>(smem + S::valid + kValidBytes * s);
    tile = smem_addr(smem + S::k + s * S::kKBytes);
  }
  // (Selected by arithmetic, not by indexing an array of pointers, which would live in local memory.)
  __device__ uint64_t* full(int half) const { return (half ? bars_b : bars) + s; }
  __device__ uint64_t* empty(int half) const { return (half ? bars_b : bars) + kStages + s; }
  __device__ void release(int half, int lane) const {
    __syncwarp();
    mbar_arrive_if(empty(half), lane == 0);
  }
  __device__ uint64_t valid_mask() const { return block_valid_mask(valid); }
};

}  // namespace smla::cuda::sparse_decode_family
