// merge_states: one warp per (token, head) row; parts whose lse is not finite are skipped.
#include <cuda_bf16.h>

#include "cuda/common/sink.cuh"
#include "cuda/common/cuda_check.h"
#include "cuda/cuda_backend.h"

namespace smla::cuda {

namespace {

struct MergeParams {
  const void* parts;
  bool parts_bf16;
  int64_t p_sn, p_st, p_sh;
  const float* lse_parts;
  int64_t lp_sn, lp_st, lp_sh;
  const float* sink;
  int64_t sink_st;
  void* out;
  bool out_bf16;
  int64_t o_st, o_sh;
  float* lse;
  int64_t l_st, l_sh;
  int n, T, h, d_v;
};

__global__ void merge_states_kernel(const MergeParams p) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (row >= static_cast<int64_t>(p.T) * p.h) return;
  const int t = static_cast<int>(row / p.h), hh = static_cast<int>(row % p.h);
  float mx = -INFINITY;
  for (int i = 0; i < p.n; ++i) {
    const float l = p.lse_parts[i * p.lp_sn + t * p.lp_st + hh * p.lp_sh];
    if (isfinite(l)) mx = fmaxf(mx, l);
  }
  float lse = -INFINITY;
  if (mx != -INFINITY) {
    float sum = 0.f;
    for (int i = 0; i < p.n; ++i) {
      const float l = p.lse_parts[i * p.lp_sn + t * p.lp_st + hh * p.lp_sh];
      if (isfinite(l)) sum += expf(l - mx);
    }
    lse = mx + logf(sum);
  }
  const float f = (lse == -INFINITY) ? 0.f : (p.sink ? sink_factor_dev(p.sink[hh * p.sink_st], lse) : 1.f);
  for (int d = lane; d < p.d_v; d += 32) {
    float acc = 0.f;
    if (lse != -INFINITY) {
      for (int i = 0; i < p.n; ++i) {
        const float l = p.lse_parts[i * p.lp_sn + t * p.lp_st + hh * p.lp_sh];
        if (!isfinite(l)) continue;
        const int64_t off = i * p.p_sn + t * p.p_st + hh * p.p_sh + d;
        const float v = p.parts_bf16 ? __bfloat162float(static_cast<const __nv_bfloat16*>(p.parts)[off])
                                     : static_cast<const float*>(p.parts)[off];
        acc += expf(l - lse) * v;
      }
    }
    const int64_t o = t * p.o_st + hh * p.o_sh + d;
    if (p.out_bf16) static_cast<__nv_bfloat16*>(p.out)[o] = __float2bfloat16_rn(acc * f);
    else static_cast<float*>(p.out)[o] = acc * f;
  }
  if (lane == 0) p.lse[t * p.l_st + hh * p.l_sh] = lse;
}

}  // namespace

void merge_states(const MergeStatesArgs& a, const Exec& exec) {
  MergeParams p;
  p.parts = a.out_parts.data;
  p.parts_bf16 = a.out_parts.dtype == DType::bf16;
  p.p_sn = a.out_parts.stride[0];
  p.p_st = a.out_parts.stride[1];
  p.p_sh = a.out_parts.stride[2];
  p.lse_parts = a.lse_parts.ptr<const float>();
  p.lp_sn = a.lse_parts.stride[0];
  p.lp_st = a.lse_parts.stride[1];
  p.lp_sh = a.lse_parts.stride[2];
  p.sink = a.attn_sink.ptr<const float>();
  p.sink_st = a.attn_sink.stride[0];
  p.out = a.out.data;
  p.out_bf16 = a.out.dtype == DType::bf16;
  p.o_st = a.out.stride[0];
  p.o_sh = a.out.stride[1];
  p.lse = a.lse.ptr<float>();
  p.l_st = a.lse.stride[0];
  p.l_sh = a.lse.stride[1];
  p.n = static_cast<int>(a.out_parts.shape[0]);
  p.T = static_cast<int>(a.out_parts.shape[1]);
  p.h = static_cast<int>(a.out_parts.shape[2]);
  p.d_v = static_cast<int>(a.out_parts.shape[3]);
  const int64_t rows = static_cast<int64_t>(p.T) * p.h;
  if (rows == 0) return;
  constexpr int kWarps = 8;
  merge_states_kernel<<<static_cast<unsigned>((rows + kWarps - 1) / kWarps), kWarps * 32, 0, as_stream(exec.stream)>>>(p);
  SMLA_CUDA_CHECK_LAUNCH();
}

}  // namespace smla::cuda
