#include <deque>
#include <mutex>

#include "cuda/common/cuda_check.h"
#include "cuda/common/device_info.h"
#include "cuda/cuda_backend.h"

namespace smla::cuda {

const DeviceInfo& current_device_info() {
  static std::mutex mu;
  static std::deque<DeviceInfo> cache;  // grows at its end only: references handed out stay valid
  int dev = 0;
  SMLA_CUDA_CHECK(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() <= static_cast<size_t>(dev)) cache.resize(dev + 1);
  DeviceInfo& d = cache[dev];
  if (d.sm_count == 0) {
    int v = 0;
    SMLA_CUDA_CHECK(cudaDeviceGetAttribute(&d.major, cudaDevAttrComputeCapabilityMajor, dev));
    SMLA_CUDA_CHECK(cudaDeviceGetAttribute(&d.minor, cudaDevAttrComputeCapabilityMinor, dev));
    SMLA_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev));
    d.smem_per_sm = static_cast<size_t>(v);
    SMLA_CUDA_CHECK(cudaDeviceGetAttribute(&d.sm_count, cudaDevAttrMultiProcessorCount, dev));
    int khz = 0, bits = 0;
    if (cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth, dev) != cudaSuccess) {
      cudaGetLastError();
      khz = bits = 0;
    }
    if (d.sm_count > 0) d.mem_gbps_per_sm = 2.0 * khz * 1e3 * (bits / 8) / 1e9 / d.sm_count;
  }
  return d;
}

int device_sm_count() { return current_device_info().sm_count; }

// The kernels are built for sm_90a only: another architecture cannot run them.
bool device_available() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    cudaGetLastError();
    return false;
  }
  const DeviceInfo& d = current_device_info();
  return d.major == 9 && d.minor == 0;
}

}  // namespace smla::cuda
