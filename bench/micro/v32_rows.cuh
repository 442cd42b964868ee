// What the microbenchmarks of random V3.2 row gathers share (l2_dirty_lines.cu, ring_depth.cu,
// bulk_issue_rate.cu, row_copy_path.cu): the row and its ring pitch, b128's cache of random
// slots, the flush, the device clock, and a one-wave gather's setup.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <random>
#include <vector>

#include "cuda/common/cuda_check.h"
#include "cuda/common/globaltimer.cuh"

namespace v32_rows {

constexpr int kRowBytes = 656;  // fp8_ds_mla: 512 e4m3, 4 fp32 scales, 64 bf16
constexpr int kStride = 672;    // the ring's row pitch
constexpr int kKeys = 64;       // rows a block
constexpr int kSlotBytes = kKeys * kStride;
constexpr int64_t kCacheRows = 128LL * 32768;      // b128's cache: 2.75 GB
constexpr size_t kFlushBytes = size_t(512) << 20;  // the benchmarks' L2 flush before every timed run

__device__ __forceinline__ uint64_t now_ns() { return smla::cuda::globaltimer_ns(); }

// The cache (every byte 0x11) and the flush buffer, on the device.
struct Buffers {
  uint8_t* cache = nullptr;
  uint8_t* flush = nullptr;
};
inline Buffers make_buffers() {
  Buffers b;
  SMLA_CUDA_CHECK(cudaMalloc(&b.cache, kCacheRows * kRowBytes));
  SMLA_CUDA_CHECK(cudaMalloc(&b.flush, kFlushBytes));
  SMLA_CUDA_CHECK(cudaMemset(b.cache, 0x11, kCacheRows * kRowBytes));
  return b;
}

// n random slots of the cache (seed 7), on the device.
inline int* random_slots(size_t n) {
  std::vector<int> h(n);
  std::mt19937_64 rng(7);
  for (auto& v : h) v = static_cast<int>(rng() % kCacheRows);
  int* d = nullptr;
  SMLA_CUDA_CHECK(cudaMalloc(&d, n * sizeof(int)));
  SMLA_CUDA_CHECK(cudaMemcpy(d, h.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  return d;
}

// A one-wave gather's setup (ring_depth.cu, row_copy_path.cu): the SMs, one CTA each up to 128,
// the cache and flush buffers, and two waves' worth of random slots for `blocks` blocks a CTA.
struct Gather {
  int sms = 0, ctas = 0;
  Buffers buf;
  int* slots = nullptr;
};
inline Gather make_gather(int blocks) {
  Gather g;
  SMLA_CUDA_CHECK(cudaDeviceGetAttribute(&g.sms, cudaDevAttrMultiProcessorCount, 0));
  g.ctas = g.sms < 128 ? g.sms : 128;
  g.buf = make_buffers();
  g.slots = random_slots(static_cast<size_t>(2 * g.ctas) * blocks * kKeys);
  return g;
}

}  // namespace v32_rows
