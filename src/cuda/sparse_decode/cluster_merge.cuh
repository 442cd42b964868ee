// The splits of one request's head tile and token merged inside the kernel (p.cluster_merge, the
// kernels of config.h kClusterMergeOf): they run as one cluster of n CTAs along grid.x (split
// slot x = request n + split, rank = split), each leaves its normalized partial rows and their lse
// in its own shared memory, and after a cluster barrier each CTA merges 1 / n of the tile's
// columns from all n (distributed shared memory) into `out` and `lse`, sink applied, as the
// combine kernel (attention/combine_kernel.cuh) does from the partials in global memory. No
// float32 partials leave the SMs and no second launch follows. Every thread of every CTA passes
// the two cluster barriers (the producer warps too: kernel.cuh).
#pragma once

#include <cstdint>

#include "cuda/attention/attention_params.h"
#include "cuda/common/barriers.cuh"
#include "cuda/common/cluster.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/common/sink.cuh"
#include "cuda/sparse_decode/config.h"
#include "cuda/sparse_decode/epilogue.cuh"

namespace smla::cuda::sparse_decode_family {

// kRows heads of kStride floats each at `rows` (this CTA's partial O, already times its final
// factor), their lse at `lse_own` (natural log, -inf: no key), `tab` float[(kMaxMergeSplits + 1)
// kRows] of scratch; kT threads (tid 0 .. kT - 1) of this CTA, synchronized by named barrier
// kBarFinal among themselves.
template <int kRows, int kStride, int kT>
__device__ __forceinline__ void cluster_merge_rows(const AttnParams& p, const Work& w, const float* rows, const float* lse_own,
                                                   float* tab, int tid) {
  const int n = p.cluster_merge;
  const uint32_t rank = cluster_ctarank();
  cluster_sync();  // every split's rows and lse are in its shared memory
  // the splits' lse per head, tab[j kRows + h]
  for (int i = tid; i < n * kRows; i += kT) tab[i] = ld_cluster_f32(map_to_cta(smem_addr(lse_own + i % kRows), i / kRows));
  named_bar_sync(kBarFinal, kT);
  // each head's merged lse (tab[n kRows + h]) and the splits' weights in place of their lse
  if (tid < kRows) {
    float mx = -INFINITY;
    for (int j = 0; j < n; ++j) mx = fmaxf(mx, tab[j * kRows + tid]);
    float lse = -INFINITY;
    if (mx != -INFINITY) {
      float sum = 0.f;
      for (int j = 0; j < n; ++j) sum += expf(tab[j * kRows + tid] - mx);
      lse = mx + logf(sum);
    }
    for (int j = 0; j < n; ++j) tab[j * kRows + tid] = lse == -INFINITY ? 0.f : expf(tab[j * kRows + tid] - lse);
    tab[n * kRows + tid] = lse;
  }
  named_bar_sync(kBarFinal, kT);
  // this CTA's share of the tile's 16-byte pieces: all n splits' loads in flight, then the sum
  constexpr int kPieces = kRows * (kDv / 4);
  const int per = (kPieces + n - 1) / n, q0 = static_cast<int>(rank) * per, q1 = min(q0 + per, kPieces);
  Work out = w;
  out.n_splits = 1;  // store_o4 / store_lse: the final rows
  for (int q = q0 + tid; q < q1; q += kT) {
    const int h = q / (kDv / 4), cl = 4 * (q % (kDv / 4));
    const uint32_t a = smem_addr(rows + h * kStride + cl);
    float4 v[kMaxMergeSplits];
#pragma unroll
    for (int j = 0; j < kMaxMergeSplits; ++j)
      if (j < n) v[j] = ld_cluster_v4(map_to_cta(a, j));
    float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int j = 0; j < kMaxMergeSplits; ++j)
      if (j < n) {
        const float wj = tab[j * kRows + h];
        s.x += wj * v[j].x, s.y += wj * v[j].y, s.z += wj * v[j].z, s.w += wj * v[j].w;
      }
    if (h < w.heads) {
      const float lse = tab[n * kRows + h];
      const float f = lse == -INFINITY ? 0.f : (p.sink ? sink_factor_dev(__ldg(p.sink + (w.head0 + h) * p.sink_st), lse) : 1.f);
      store_o4(p, out, w.head0 + h, cl, make_float4(s.x * f, s.y * f, s.z * f, s.w * f));
    }
  }
  if (rank == 0 && tid < w.heads) store_lse(p, out, w.head0 + tid, tab[n * kRows + tid]);
  cluster_sync();  // no CTA leaves while a peer may still read its shared memory
}

}  // namespace smla::cuda::sparse_decode_family
