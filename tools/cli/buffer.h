// Owned memory on the host or on the CUDA device, and the few CUDA runtime calls the CLI
// makes (all of them in buffer.cpp and timing.cpp, behind SMLA_WITH_CUDA). Without CUDA in
// the build every device request throws smla::RuntimeError.
#pragma once

#include <cstddef>
#include <cstdint>

#include "smla/tensor.h"

namespace smla::cli {

class Buffer {
 public:
  Buffer() = default;
  // Zeroed memory of `bytes` bytes on `device`.
  Buffer(size_t bytes, Device device);
  ~Buffer();
  Buffer(Buffer&& o) noexcept;
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  bool empty() const { return ptr_ == nullptr; }

  void fill(uint8_t byte);
  // Same size, any pair of devices; synchronous.
  void copy_from(const Buffer& src);

 private:
  void release();
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  Device device_ = kCPU;
};

// The stream every CUDA call of the CLI runs on (created on first use).
void* cuda_stream();
void cuda_synchronize();
// Device name and memory, for reports ("NVIDIA H200, 139 GiB"); empty without CUDA.
const char* cuda_device_description();

}  // namespace smla::cli
