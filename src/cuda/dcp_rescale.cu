// dcp_rescale on the device: one warp per (token, head), lanes over the value columns.
#include <cuda_bf16.h>

#include "cuda/common/cuda_check.h"
#include "cuda/common/sink.cuh"
#include "cuda/cuda_backend.h"

namespace smla::cuda {

namespace {

struct RescaleParams {
  const void* out_local;
  bool bf16;
  int64_t o_st, o_sh;
  const float* lse_all;
  int64_t l_sr, l_st, l_sh;
  const float* sink;
  int64_t sink_st;
  float* scaled;  // packed [N, T, h / N, d_v]
  float* lse;
  int64_t lse_st, lse_sh;
  int N, T, h, d_v, rank;
};

__global__ void dcp_rescale_kernel(const RescaleParams p) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (row >= static_cast<int64_t>(p.T) * p.h) return;
  const int t = static_cast<int>(row / p.h), head = static_cast<int>(row % p.h);
  float m = -INFINITY;
  for (int r = 0; r < p.N; ++r) {
    const float l = p.lse_all[r * p.l_sr + t * p.l_st + head * p.l_sh];
    if (isfinite(l)) m = fmaxf(m, l);
  }
  float lse = -INFINITY, w = 0.f;
  if (m != -INFINITY) {
    float sum = 0.f;
    for (int r = 0; r < p.N; ++r) {
      const float l = p.lse_all[r * p.l_sr + t * p.l_st + head * p.l_sh];
      if (isfinite(l)) sum += expf(l - m);
    }
    lse = m + logf(sum);
    const float mine = p.lse_all[p.rank * p.l_sr + t * p.l_st + head * p.l_sh];
    if (isfinite(mine)) w = expf(mine - lse);
    if (p.sink) w *= sink_factor_dev(p.sink[head * p.sink_st], lse);
  }
  const int hr = p.h / p.N, dest = head / hr, j = head % hr;
  float* dst = p.scaled + ((static_cast<int64_t>(dest) * p.T + t) * hr + j) * p.d_v;
  for (int k = lane; k < p.d_v; k += 32) {
    const int64_t src = t * p.o_st + head * p.o_sh + k;
    const float v = p.bf16 ? __bfloat162float(static_cast<const __nv_bfloat16*>(p.out_local)[src])
                           : static_cast<const float*>(p.out_local)[src];
    dst[k] = w == 0.f ? 0.f : v * w;
  }
  if (lane == 0 && dest == p.rank) p.lse[t * p.lse_st + j * p.lse_sh] = lse;
}

}  // namespace

void dcp_rescale(const DcpRescaleArgs& a, const Exec& exec) {
  RescaleParams p;
  p.out_local = a.out_local.data;
  p.bf16 = a.out_local.dtype == DType::bf16;
  p.o_st = a.out_local.stride[0];
  p.o_sh = a.out_local.stride[1];
  p.lse_all = a.lse_all.ptr<const float>();
  p.l_sr = a.lse_all.stride[0];
  p.l_st = a.lse_all.stride[1];
  p.l_sh = a.lse_all.stride[2];
  p.sink = a.attn_sink.ptr<const float>();
  p.sink_st = a.attn_sink.stride[0];
  p.scaled = a.scaled.ptr<float>();
  p.lse = a.lse.ptr<float>();
  p.lse_st = a.lse.stride[0];
  p.lse_sh = a.lse.stride[1];
  p.N = static_cast<int>(a.lse_all.shape[0]);
  p.T = static_cast<int>(a.out_local.shape[0]);
  p.h = static_cast<int>(a.out_local.shape[1]);
  p.d_v = static_cast<int>(a.out_local.shape[2]);
  p.rank = a.rank;
  const int64_t rows = static_cast<int64_t>(p.T) * p.h;
  constexpr int kWarps = 8;
  dcp_rescale_kernel<<<static_cast<unsigned>((rows + kWarps - 1) / kWarps), kWarps * 32, 0, as_stream(exec.stream)>>>(p);
  SMLA_CUDA_CHECK_LAUNCH();
}

}  // namespace smla::cuda
