// Merges the split-KV partials of requests that were split (SPEC §3 merge), applies the sink
// once, and writes the final out/lse. Requests with one split were written directly by the
// attention kernel and are skipped here.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/attention/attention_params.h"
#include "cuda/attention/split_lookup.cuh"
#include "cuda/common/online_softmax.cuh"
#include "cuda/common/pdl.cuh"
#include "cuda/common/sink.cuh"
#include "smla/formats.h"

namespace smla::cuda {

inline constexpr int kCombineWarps = 4;
// The prefetch (SMLA_COMBINE_PREFETCH): where several warps merge a head, each warp loads its
// first kPre = 4 splits' partial rows before it reduces the splits' lse, so the two round trips
// overlap. =1 everywhere several warps merge a head: mixed in same-call A/Bs (2026-12-02, sparse
// V3.2 h128 unless noted, µs): b1 21.04 / 21.58 -> 20.67 / 21.06, b2 28.19 / 27.98 -> 27.01 /
// 27.25, b4 level, but b8 34.0 / 34.0 -> 36.0 / 35.6 and dense bf16 b8 54.3 / 54.8 -> 56.5 /
// 56.9: the b8 grid (1024 CTAs) fits one wave at the plain kernel's 62 registers (8 CTAs an SM)
// and needs two at the prefetch's 96 (5). =2 (default) takes the prefetch only where the grid
// fits one wave of it (attention_launch.cu): b1 21.08 / 21.07 -> 20.59 / 20.67, b2 28.2 / 28.0
// -> 26.85 / 26.83, b4 and b8 level, dense bf16 b1 and b8 level (same call, 2026-12-02). 0: none.
#ifndef SMLA_COMBINE_PREFETCH
#define SMLA_COMBINE_PREFETCH 2
#endif
// The compact merge (SMLA_COMBINE_COMPACT=1, the default since the sixty-seventh pass) for code
// run once a CTA: the splits' rows addressed from one base and step made once; each lane holds its
// split's lse from one read (the maximum, the sum and its weight from it; a weight reaches the
// loops through shared memory, not by a second read); the MUFU unit's ex2 / lg2 (absolute lse
// error ~3e-7 against SPEC §6's 1e-5). The prefetching kernel 1264 -> 976 SASS instructions; on
// an H100 (same call, V3.2 topk 2048, µs) b1 h128 16.56 / 16.51 -> 16.13 / 16.19, b2 h128 20.86
// -> 20.61, rows without splits level. 0 (a measurement build): the lse loops unrolled around
// expf / logf, each weight read again.
#ifndef SMLA_COMBINE_COMPACT
#define SMLA_COMBINE_COMPACT 1
#endif
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// grid (b, s_q, ceil(h_q * kWarpsPerHead / 4)), 4 warps. kWarpsPerHead warps merge one head:
// warp `sub` of them takes splits sub, sub + kWarpsPerHead, ... (lane l: columns 4l + 128k) and
// they sum through shared memory (many splits, as at small batch: more loads in flight per head).
// Every warp computes the merged lse itself, its lanes reading the splits' lse together.
// kPre: the splits each warp loads before the lse reduction (0 or 4; kWarpsPerHead > 1 only).
// kTail: sparse prefill's tail split (sparse_decode config.h kTailMerge): heads from p.comb_h0,
// and max_logits too, the largest of the parts' (p.part_max).
template <int kWarpsPerHead, int kPre = 0, bool kTail = false>
__global__ void __launch_bounds__(kCombineWarps * 32) combine_splits_kernel(const AttnParams p) {
  constexpr int kHeadsPerCta = kCombineWarps / kWarpsPerHead;
  pdl_wait();  // launched as a programmatic dependent of the attention kernel
  const int req = blockIdx.x, t = blockIdx.y;
  int first, n;
  request_splits(p, req, first, n);
  if (n <= 1) return;  // uniform across the CTA
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int sub = warp % kWarpsPerHead;
  const int h = (kTail ? p.comb_h0 : 0) + blockIdx.z * kHeadsPerCta + warp / kWarpsPerHead;
  const bool real = h < p.h_q;
  // (kTail: the rows hold the tail's head tile only, sparse_decode epilogue.cuh part_row)
#if SMLA_COMBINE_COMPACT
  const int64_t row_step = static_cast<int64_t>(p.s_q) * (kTail ? p.heads_tile : p.h_q);
  const int64_t row0 = kTail ? (static_cast<int64_t>(first) * p.s_q + t) * p.heads_tile + h - p.comb_h0
                             : (static_cast<int64_t>(first) * p.s_q + t) * p.h_q + h;
  auto part_row = [&](int j) { return row0 + j * row_step; };
#else
  auto part_row = [&](int j) {
    return kTail ? (static_cast<int64_t>(first + j) * p.s_q + t) * p.heads_tile + h - p.comb_h0
                 : (static_cast<int64_t>(first + j) * p.s_q + t) * p.h_q + h;
  };
#endif

  // kPre: this warp's first splits' rows, loaded before the lse reduction needs them
  static_assert(kPre == 0 || kWarpsPerHead > 1, "the prefetch serves several warps a head");
  float4 pre[kPre > 0 ? kPre : 1][4];
#pragma unroll
  for (int u = 0; u < kPre; ++u) {
    const int j = sub + u * kWarpsPerHead;
#pragma unroll
    for (int k = 0; k < 4; ++k)
      pre[u][k] = real && j < n ? reinterpret_cast<const float4*>(p.part_o + part_row(j) * kDv)[lane + 32 * k]
                                : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  float lse = -INFINITY;
#if SMLA_COMBINE_COMPACT
  // Lane l: split l's lse (then its weight); splits from 32 on (rare) are read in the loops.
  float mine = -INFINITY, w_mine = 0.f;
  if (real) {
    mine = lane < n ? p.part_lse[part_row(lane)] : -INFINITY;
    float mx = mine;
#pragma unroll 1
    for (int j = lane + 32; j < n; j += 32) mx = fmaxf(mx, p.part_lse[part_row(j)]);
    mx = warp_max(mx);
    if (mx != -INFINITY) {
      const float mx2 = mx * kLog2e;
      float sum = exp2_ftz(fmaf(mine, kLog2e, -mx2));  // 0 for an empty split (lse -inf)
#pragma unroll 1
      for (int j = lane + 32; j < n; j += 32) sum += exp2_ftz(fmaf(p.part_lse[part_row(j)], kLog2e, -mx2));
      lse = mx + __log2f(warp_sum(sum)) * kLn2;
      w_mine = exp2_ftz((mine - lse) * kLog2e);
    }
  }
  // Split j's weight: lane j's, through shared memory (a shuffle here, where the compiler cannot
  // prove the warp converged, compiles to collective code around each), or read for j >= 32.
  __shared__ float w_of[kCombineWarps][32];
  w_of[warp][lane] = w_mine;
  __syncwarp();
  auto weight = [&](int j) { return j < 32 ? w_of[warp][j] : exp2_ftz((p.part_lse[part_row(j)] - lse) * kLog2e); };
#else
  if (real) {
    float mx = -INFINITY;
    for (int j = lane; j < n; j += 32) mx = fmaxf(mx, p.part_lse[part_row(j)]);
    mx = warp_max(mx);
    if (mx != -INFINITY) {
      float sum = 0.f;
      for (int j = lane; j < n; j += 32) sum += expf(p.part_lse[part_row(j)] - mx);
      lse = mx + logf(warp_sum(sum));
    }
  }
  auto weight = [&](int j) { return expf(p.part_lse[part_row(j)] - lse); };  // 0 for empty splits
#endif
  float acc[4][4] = {};
  auto add = [&](int k, float w, const float4& v) {
    acc[k][0] += w * v.x;
    acc[k][1] += w * v.y;
    acc[k][2] += w * v.z;
    acc[k][3] += w * v.w;
  };
  if (lse != -INFINITY) {
#pragma unroll
    for (int u = 0; u < kPre; ++u) {
      const int j = sub + u * kWarpsPerHead;
      if (j < n) {
        const float w = weight(j);
#pragma unroll
        for (int k = 0; k < 4; ++k) add(k, w, pre[u][k]);
      }
    }
#pragma unroll 4
    for (int j = sub + kPre * kWarpsPerHead; j < n; j += kWarpsPerHead) {
      const int64_t prow = part_row(j);
      const float w = weight(j);
      const float4* src = reinterpret_cast<const float4*>(p.part_o + prow * kDv);
#pragma unroll
      for (int k = 0; k < 4; ++k) add(k, w, src[lane + 32 * k]);
    }
  }
  // Columns this lane writes: 4 lane + 128 k (one warp per head), or 128 sub + 4 lane (k = 0
  // only) after the warps of a head summed their partials.
  constexpr int kw = kWarpsPerHead > 1 ? 1 : 4;
  const int col0 = kWarpsPerHead > 1 ? 128 * sub : 0;
  if constexpr (kWarpsPerHead > 1) {
    __shared__ float4 red[kCombineWarps][kDv / 4];
#pragma unroll
    for (int k = 0; k < 4; ++k) red[warp][lane + 32 * k] = make_float4(acc[k][0], acc[k][1], acc[k][2], acc[k][3]);
    __syncthreads();
    const int w0 = warp - sub;
    float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int i = 0; i < kWarpsPerHead; ++i) {
      const float4 v = red[w0 + i][32 * sub + lane];
      s.x += v.x;
      s.y += v.y;
      s.z += v.z;
      s.w += v.w;
    }
    acc[0][0] = s.x;
    acc[0][1] = s.y;
    acc[0][2] = s.z;
    acc[0][3] = s.w;
  }
  if (!real) return;
  const float f = (lse == -INFINITY) ? 0.f : (p.sink ? sink_factor_dev(__ldg(p.sink + h * p.sink_st), lse) : 1.f);
  uint16_t* orow = static_cast<uint16_t*>(p.out) + req * p.o_sb + t * p.o_st + h * p.o_sh + col0;
#pragma unroll
  for (int k = 0; k < kw; ++k) {
    uint2 v;
    if (p.out_f16) {
      __half2 a = __floats2half2_rn(acc[k][0] * f, acc[k][1] * f), b = __floats2half2_rn(acc[k][2] * f, acc[k][3] * f);
      v = make_uint2(*reinterpret_cast<uint32_t*>(&a), *reinterpret_cast<uint32_t*>(&b));
    } else {
      __nv_bfloat162 a = __floats2bfloat162_rn(acc[k][0] * f, acc[k][1] * f),
                     b = __floats2bfloat162_rn(acc[k][2] * f, acc[k][3] * f);
      v = make_uint2(*reinterpret_cast<uint32_t*>(&a), *reinterpret_cast<uint32_t*>(&b));
    }
    *reinterpret_cast<uint2*>(orow + 4 * (lane + 32 * k)) = v;
  }
  if (sub == 0 && lane == 0) p.lse[req * p.l_sb + t * p.l_st + h * p.l_sh] = lse;
  if constexpr (kTail) {
    if (sub == 0 && lane == 0 && p.max_logits != nullptr) {
      float mx = -INFINITY;
      for (int j = 0; j < n; ++j) mx = fmaxf(mx, p.part_max[part_row(j)]);
      p.max_logits[req * p.m_sb + t * p.m_st + h * p.m_sh] = mx;
    }
  }
}

}  // namespace smla::cuda
