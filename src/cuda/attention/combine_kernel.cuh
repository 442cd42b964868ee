// Merges the split-KV partials of requests that were split (SPEC §3 merge), applies the sink
// once, and writes the final out/lse. Requests with one split were written directly by the
// attention kernel and are skipped here.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/attention/attention_params.h"
#include "cuda/common/sink.cuh"
#include "smla/formats.h"

namespace smla::cuda {

inline constexpr int kCombineWarps = 4;

// grid (b, s_q, ceil(h_q / 4)), 4 warps: warp w merges head 4 * blockIdx.z + w; lane l owns
// columns 4l + 128k. Splits are read four at a time so their loads are in flight together.
__global__ void __launch_bounds__(kCombineWarps * 32) combine_splits_kernel(const AttnParams p) {
  const int req = blockIdx.x, t = blockIdx.y;
  const int base = __ldg(p.split_offsets + req);
  const int n = __ldg(p.split_offsets + req + 1) - base;
  if (n <= 1) return;
  const int lane = threadIdx.x & 31;
  const int h = blockIdx.z * kCombineWarps + (threadIdx.x >> 5);
  if (h >= p.h_q) return;
  auto part_row = [&](int j) { return (static_cast<int64_t>(base + j) * p.s_q + t) * p.h_q + h; };
  float mx = -INFINITY;
  for (int j = 0; j < n; ++j) mx = fmaxf(mx, p.part_lse[part_row(j)]);
  float lse = -INFINITY;
  if (mx != -INFINITY) {
    float sum = 0.f;
    for (int j = 0; j < n; ++j) sum += expf(p.part_lse[part_row(j)] - mx);
    lse = mx + logf(sum);
  }
  float acc[4][4] = {};
  if (lse != -INFINITY) {
#pragma unroll 4
    for (int j = 0; j < n; ++j) {
      const int64_t prow = part_row(j);
      const float w = expf(p.part_lse[prow] - lse);  // 0 for empty splits (lse -inf)
      const float4* src = reinterpret_cast<const float4*>(p.part_o + prow * kDv);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float4 v = src[lane + 32 * k];
        acc[k][0] += w * v.x;
        acc[k][1] += w * v.y;
        acc[k][2] += w * v.z;
        acc[k][3] += w * v.w;
      }
    }
  }
  const float f = (lse == -INFINITY) ? 0.f : (p.sink ? sink_factor_dev(__ldg(p.sink + h * p.sink_st), lse) : 1.f);
  uint16_t* orow = static_cast<uint16_t*>(p.out) + req * p.o_sb + t * p.o_st + h * p.o_sh;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
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
  if (lane == 0) p.lse[req * p.l_sb + t * p.l_st + h * p.l_sh] = lse;
}

}  // namespace smla::cuda
