#include "cli/buffer.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "smla/error.h"

#if SMLA_WITH_CUDA
#include <cuda_runtime.h>

#include "cuda/common/device_info.h"
#endif

namespace smla::cli {

#if SMLA_WITH_CUDA
namespace {
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw RuntimeError(std::string(what) + ": " + cudaGetErrorString(e));
}
}  // namespace
#else
namespace {
[[noreturn]] void no_cuda() {
  throw RuntimeError("this smla binary was built without CUDA (configure with -DSMLA_CUDA=ON)");
}
}  // namespace
#endif

// Device fills and copies run on the legacy default stream while the timed calls run on the
// CLI's non-blocking stream, which does not wait for it: each one is finished before returning.
Buffer::Buffer(size_t bytes, Device device) : bytes_(bytes), device_(device) {
  if (bytes == 0) return;
  if (device.type == DeviceType::cpu) {
    // calloc hands out lazily zeroed pages: a multi-GB cache costs only the pages written.
    ptr_ = std::calloc(bytes, 1);
    if (!ptr_) throw std::bad_alloc();
    return;
  }
#if SMLA_WITH_CUDA
  check(cudaSetDevice(device.index), "cudaSetDevice");
  check(cudaMalloc(&ptr_, bytes), ("cudaMalloc of " + std::to_string(bytes) + " bytes").c_str());
  check(cudaMemset(ptr_, 0, bytes), "cudaMemset");
  check(cudaDeviceSynchronize(), "cudaMemset");
#else
  no_cuda();
#endif
}

Buffer::~Buffer() { release(); }

Buffer::Buffer(Buffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_), device_(o.device_) {
  o.ptr_ = nullptr;
  o.bytes_ = 0;
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    device_ = o.device_;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

void Buffer::release() {
  if (!ptr_) return;
  if (device_.type == DeviceType::cpu) {
    std::free(ptr_);
  } else {
#if SMLA_WITH_CUDA
    cudaFree(ptr_);
#endif
  }
  ptr_ = nullptr;
  bytes_ = 0;
}

void Buffer::fill(uint8_t byte) {
  if (!ptr_) return;
  if (device_.type == DeviceType::cpu) {
    std::memset(ptr_, byte, bytes_);
    return;
  }
#if SMLA_WITH_CUDA
  check(cudaMemset(ptr_, byte, bytes_), "cudaMemset");
  check(cudaDeviceSynchronize(), "cudaMemset");
#else
  no_cuda();
#endif
}

void Buffer::copy_from(const Buffer& src) {
  if (src.bytes_ != bytes_) throw RuntimeError("Buffer::copy_from: sizes differ");
  if (!ptr_) return;
  if (device_.type == DeviceType::cpu && src.device_.type == DeviceType::cpu) {
    std::memcpy(ptr_, src.ptr_, bytes_);
    return;
  }
#if SMLA_WITH_CUDA
  check(cudaMemcpy(ptr_, src.ptr_, bytes_, cudaMemcpyDefault), "cudaMemcpy");
  check(cudaDeviceSynchronize(), "cudaMemcpy");
#else
  no_cuda();
#endif
}

void* cuda_stream() {
#if SMLA_WITH_CUDA
  static cudaStream_t stream = [] {
    cudaStream_t s = nullptr;
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    return s;
  }();
  return stream;
#else
  no_cuda();
#endif
}

void cuda_synchronize() {
#if SMLA_WITH_CUDA
  check(cudaStreamSynchronize(static_cast<cudaStream_t>(cuda_stream())), "cudaStreamSynchronize");
  check(cudaGetLastError(), "CUDA kernel");
#else
  no_cuda();
#endif
}

const char* cuda_device_description() {
#if SMLA_WITH_CUDA
  static std::string desc = [] {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) return std::string();
    const double gib = static_cast<double>(p.totalGlobalMem) / (1ull << 30);
    // The peak memory bandwidth an SM, as the launch rules read it (DeviceInfo), where reported.
    char bw[64] = "";
    if (const double g = cuda::current_device_info().mem_gbps_per_sm; g > 0)
      std::snprintf(bw, sizeof bw, ", %.1f GB/s of memory an SM", g);
    return std::string(p.name) + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) + ", " +
           std::to_string(p.multiProcessorCount) + " SMs, " + std::to_string(static_cast<int>(gib + 0.5)) + " GiB" + bw + ")";
  }();
  return desc.c_str();
#else
  return "";
#endif
}

}  // namespace smla::cli
