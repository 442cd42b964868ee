// Per-device state of host launch code. A kernel's function attributes (its dynamic
// shared-memory limit) and what depends on the device (the SMs, the clusters an occupancy query
// finds resident) belong to the device current at the call: a process that serves several GPUs
// must set and read them on each, not once for the first device it happened to use.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include <cuda_runtime.h>

#include "cuda/common/cuda_check.h"

namespace smla::cuda {

// Devices of one process tracked per value; calls on a device past the last are recomputed
// every time (correct, only slower).
inline constexpr int kTrackedDevices = 64;

inline int current_device() {
  int dev = 0;
  SMLA_CUDA_CHECK(cudaGetDevice(&dev));
  return dev;
}

// Raises kKernel's dynamic shared-memory limit to at least `bytes` on the current device, once
// per device and size. The limit only ever grows (under a lock, so that a call that set a smaller
// one cannot undo a larger one another thread's launch relies on).
template <auto kKernel>
void raise_dynamic_smem(size_t bytes) {
  static std::atomic<size_t> set_to[kTrackedDevices] = {};
  static std::mutex mu;
  const int dev = current_device();
  const bool tracked = dev >= 0 && dev < kTrackedDevices;
  if (tracked && set_to[dev].load(std::memory_order_acquire) >= bytes) return;
  std::lock_guard<std::mutex> lock(mu);
  size_t now = 0;
  if (tracked) {
    now = set_to[dev].load(std::memory_order_relaxed);
  } else {
    cudaFuncAttributes attr{};
    SMLA_CUDA_CHECK(cudaFuncGetAttributes(&attr, kKernel));
    now = static_cast<size_t>(attr.maxDynamicSharedSizeBytes);
  }
  if (now >= bytes) return;
  SMLA_CUDA_CHECK(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  if (tracked) set_to[dev].store(bytes, std::memory_order_release);
}

// `compute()`'s value for the current device, computed once per device (Tag: one cache per
// call site; the value must be positive, 0 marks "not yet").
template <class Tag, class F>
int64_t once_per_device(F compute) {
  static std::atomic<int64_t> value[kTrackedDevices] = {};
  const int dev = current_device();
  if (dev < 0 || dev >= kTrackedDevices) return compute();
  int64_t v = value[dev].load(std::memory_order_acquire);
  if (v == 0) {
    v = compute();
    value[dev].store(v, std::memory_order_release);
  }
  return v;
}

}  // namespace smla::cuda
