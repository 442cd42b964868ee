// Helpers of the GPU tests: device buffers, host<->device mirrors of views and caches, and
// paged caches filled through the (separately tested) CPU writer.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "common/test_util.h"
#include "smla/smla.h"

namespace smla::test {

#define GPU_CHECK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr << ": " << cudaGetErrorString(expr)

struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) : bytes(n) {
    if (n && cudaMalloc(&ptr, n) != cudaSuccess) ptr = nullptr;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr(o.ptr), bytes(o.bytes) { o.ptr = nullptr; o.bytes = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr, o.ptr);
    std::swap(bytes, o.bytes);
    return *this;
  }
  ~DeviceBuffer() { if (ptr) cudaFree(ptr); }
};

template <typename T>
DeviceBuffer upload(const std::vector<T>& v) {
  DeviceBuffer b(std::max<size_t>(v.size() * sizeof(T), 16));
  cudaMemcpy(b.ptr, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
  return b;
}

template <typename T>
std::vector<T> download(const DeviceBuffer& b, size_t n) {
  std::vector<T> v(n);
  cudaMemcpy(v.data(), b.ptr, n * sizeof(T), cudaMemcpyDeviceToHost);
  return v;
}

// A call's workspace filled with 0xff bytes: the library may not rely on what an earlier call
// (or nothing) left in it, e.g. split_offsets written by the attention kernel for its combine.
inline DeviceBuffer poisoned_workspace(size_t n) {
  DeviceBuffer b(n);
  if (b.ptr) cudaMemset(b.ptr, 0xff, n);
  return b;
}

// The same view, pointing at device memory.
inline TensorView on_device(TensorView v, const DeviceBuffer& b) {
  v.data = b.ptr;
  v.device = cuda_device(0);
  return v;
}

// A paged cache of `num_blocks` pages with a page stride `pad` bytes larger than a page, every
// slot written from random bf16 through the CPU writer, and the gaps filled with 0xff (NaN in
// e4m3 and bf16) so that reading one would show.
struct TestCache {
  std::vector<uint8_t> bytes;
  PagedCache host;
  DeviceBuffer dev_bytes;
  PagedCache dev;
};

// scale_spread > 0 (one KV head): one token in 64 has its latent values times 2^scale_spread,
// the others times 2^-u with u uniform in 0 .. scale_spread / 2, so the packed formats' per-tile
// scales span binades and a 64-key block's largest scale differs from block to block.
TestCache make_cache(CacheFormat f, int64_t num_blocks, int page_size, int d_qk, int h_kv = 1,
                     float k_scale = 1.0f, int scale_spread = 0);

std::vector<float> bf16_vec_to_float(const std::vector<uint16_t>& v);
std::vector<double> to_double(const std::vector<float>& v);
// Random slots in [0, num_slots) with hostile entries mixed in at rate `bad`:
// -1, INT32_MIN, -7, num_slots, num_slots + 12345, INT32_MAX, and duplicates.
std::vector<int32_t> hostile_indices(size_t n, int64_t num_slots, double bad = 0.1);
bool any_nan_bf16(const std::vector<uint16_t>& v);

}  // namespace smla::test
