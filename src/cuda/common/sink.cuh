// The sink's factor 1 / (1 + exp(sink - lse)) with the infinities exact (SPEC §3).
#pragma once

namespace smla::cuda {

__device__ __forceinline__ float sink_factor_dev(float sink, float lse) {
  if (sink == INFINITY) return 0.f;
  if (sink == -INFINITY) return 1.f;
  return 1.f / (1.f + expf(sink - lse));
}

}  // namespace smla::cuda
