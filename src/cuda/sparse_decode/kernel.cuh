// The warp-specialized sparse-decode kernel (sm_90a): one CTA per (split of a request's key
// list, head tile, query token):
//   WG0, WG1  consumers: 64-row tiles on wgmma (consumer_wide.cuh), 16/32-row tiles on
//             mma.sync (consumer_narrow.cuh);
//   WG2 (64-row tiles), WG2 + WG3 (16/32-row tiles)  producers: gather and dequantize 64-key
//             blocks into two K tiles (producer.cuh); two 64-row tiles of one token may run as
//             a cluster pair that shares the gathers.
// Producer and consumers meet on mbarriers only ("full" per K tile: the rows are in; "empty":
// every consumer warp is done with it), so gathers and dequantization overlap the MMAs.
// docs/design/sparse_decode_sm90.md has the design and its numbers.
#pragma once

#include <cstdint>

#include "cuda/attention/attention_params.h"
#include "cuda/common/barriers.cuh"
#include "cuda/common/cluster.cuh"
#include "cuda/sparse_decode/config.h"
#include "cuda/sparse_decode/consumer_narrow.cuh"
#include "cuda/sparse_decode/consumer_wide.cuh"
#include "cuda/sparse_decode/producer.cuh"
#include "cuda/sparse_decode/work.cuh"

namespace smla::cuda::sparse_decode_family {

// Q rows r < heads of this tile's token into the core-matrix tile; padded rows are zeros (their
// scores are finite and they are never written out).
template <int kRows, int kD>
__device__ __forceinline__ void load_q(const AttnParams& p, const Work& w, uint8_t* smem) {
  constexpr int kChunks = kD / 8;
  for (int i = threadIdx.x; i < kRows * kChunks; i += cta_threads(kRows)) {
    const int r = i / kChunks, ch = i % kChunks;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (r < w.heads) {
      const uint16_t* row = static_cast<const uint16_t*>(p.q) + w.req * p.q_sb + w.t * p.q_st + (w.head0 + r) * p.q_sh;
      v = __ldg(reinterpret_cast<const uint4*>(row) + ch);
    }
    *reinterpret_cast<uint4*>(smem + Smem<kRows, kD>::q + (r >> 3) * 16 * kD + ch * 128 + (r & 7) * 16) = v;
  }
}

// kPair: launched as two-CTA clusters along grid.y (config.h, kPairCtas). A separate
// instantiation, so that kernels which never pair carry none of its code.
template <int kRows, int kD, int kFmt, bool kPair>
__global__ void __launch_bounds__(cta_threads(kRows), 1) sparse_decode_kernel(const __grid_constant__ AttnParams p) {
  extern __shared__ __align__(128) uint8_t smem[];
  using S = Smem<kRows, kD>;
  Work w = make_work(p);
  if (!w.active) return;  // uniform across the CTA (and across a pair: both own the same keys)
  if constexpr (kPair) {
    w.pair = true;
    w.rank = static_cast<int>(cluster_ctarank());
  }

  if (threadIdx.x == 0) {
    uint64_t* bars = reinterpret_cast<uint64_t*>(smem + S::bars);
    for (int s = 0; s < kStages; ++s) {
      mbar_init(bars + s, producer_threads(kRows));  // full: every producer thread
      // empty: one arrive per consumer warp (of both CTAs of a pair)
      mbar_init(bars + kStages + s, (kConsumerThreads / 32) * (w.pair ? kPairCtas : 1));
    }
  }
  load_q<kRows, kD>(p, w, smem);
  fence_proxy_async();  // Q is read by wgmma
  __syncthreads();
  if constexpr (kPair) cluster_sync();  // the peer's barriers are initialized before anyone writes or arrives there

  const int wg = threadIdx.x / 128;
  constexpr int kEntry = launch_regs(cta_threads(kRows));
  constexpr bool kBf16 = kFmt == static_cast<int>(CacheFormat::bf16);
  if constexpr (kRows == 64) {
    if (wg == 0) {
      setmaxnreg_to<kRegsWg0, kEntry>();
      consume_wg0<kD>(p, w, smem);
    } else if (wg == 1) {
      setmaxnreg_to<kRegsWg1, kEntry>();
      consume_wg1<kD>(p, w, smem);
    } else {
      setmaxnreg_to<kRegsProducerWide, kEntry>();
      if constexpr (kBf16) produce_bf16<kRows, kD>(p, w, smem);
      else produce_packed<kRows, kFmt>(p, w, smem);
    }
  } else {
    if (wg < 2) {
      setmaxnreg_to<kRegsConsumerNarrow, kEntry>();
      consume_narrow<kRows, kD>(p, w, smem);
    } else {
      setmaxnreg_to<kRegsProducerNarrow, kEntry>();
      if constexpr (kBf16) produce_bf16<kRows, kD>(p, w, smem);
      else produce_packed<kRows, kFmt>(p, w, smem);
    }
  }
  if constexpr (kPair) cluster_sync();  // no CTA leaves while its peer may still write or arrive in its shared memory
}

}  // namespace smla::cuda::sparse_decode_family
