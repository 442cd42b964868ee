// The bf16 gather producer of the seesaw consumers on bf16 rows (config.h kBf16Seesaw): two
// producer warpgroups, one 32-key round of every block each. Block i lives in stage i % 2 and
// comes in two halves (A: boxes 0-3, the values of O's left half; B: the rest), each issued
// as soon as the consumers freed that half of the block two before (consumer_seesaw.cuh lists
// who frees what). The copies arrive on the half's "full" themselves
// (cp.async.mbarrier.arrive.noinc), so no producer thread waits for its loads and as many halves
// are in flight as are free.
#pragma once

#include <cstdint>

#include "cuda/common/barriers.cuh"
#include "cuda/common/gather.cuh"
#include "cuda/sparse_decode/config.h"
#include "cuda/sparse_decode/half_stage.cuh"
#include "cuda/sparse_decode/producer.cuh"

namespace smla::cuda::sparse_decode_family {

// Arrivals a half's "full" barrier expects: one per producer thread (its copies' completion),
// and for half A one more per producer warp (its valid words, written by the warp's lane 0).
inline constexpr int kSeesawBf16Producers = 256;
__host__ __device__ constexpr int seesaw_bf16_full_count(int half) {
  return kSeesawBf16Producers + (half == 0 ? kSeesawBf16Producers / 32 : 0);
}

template <int kD>
__device__ void produce_bf16_seesaw(const AttnParams& p, const Work& w, uint8_t* smem) {
  constexpr int kSplit = 4;  // boxes of half A
  const ProducerLane pl(w, consumer_threads(64));
  IndexQueue<> iq;
  init_queue<true>(iq, p, w, pl, 0);
  for (int kb = w.kb_begin; kb < w.kb_end; ++kb) {
    const int i = kb - w.kb_begin, use = i >> 1;  // the stage's use: its barriers' phase
    const AltStage<kD> st(smem, i & 1);
    if (i >= 2) mbar_wait(st.empty(0), (use - 1) & 1);
    const KeyAddr a = key_addr(p, w, pl.pos(kb, 0), iq.v[0]);
    const bool ok = a.page != nullptr;
    const uint8_t* src = bf16_row<kD>(p, a);
    const int j = pl.row_in_block(0);
    if constexpr (!kProducerIdle) copy_rows_sw128<kD, 0, kSplit>(st.tile, src, ok && !kNoGathers, pl, j);
    publish_valid<false>(st.valid, PeerStage{}, pl, pl.round, ok || kProducerIdle);
    if constexpr (kProducerIdle) mbar_arrive(st.full(0));  // experiment (variant 8): handed over unloaded
    else mbar_arrive_on_cp_async(st.full(0));
    if (pl.lane == 0) mbar_arrive(st.full(0));  // the warp's valid words
    if (i >= 2) mbar_wait(st.empty(1), (use - 1) & 1);
    if constexpr (kProducerIdle) {
      mbar_arrive(st.full(1));
    } else {
      copy_rows_sw128<kD, kSplit, kD / 64>(st.tile, src, ok && !kNoGathers, pl, j);
      mbar_arrive_on_cp_async(st.full(1));
    }
    rotate_queue<true>(iq, p, w, pl, 0, kb);
  }
  cp_async_wait_all();
}

}  // namespace smla::cuda::sparse_decode_family
