// Non-owning tensor view: the one way every operation receives arrays.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace smla {

enum class DType : uint8_t { f32, f64, bf16, f16, fp8_e4m3, i32, i64, u8 };

enum class DeviceType : uint8_t { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;
  bool operator==(const Device&) const = default;
};

inline constexpr Device kCPU{DeviceType::cpu, 0};
inline Device cuda_device(int index = 0) { return {DeviceType::cuda, index}; }

size_t dtype_size(DType t);
const char* dtype_name(DType t);
std::string device_name(Device d);

inline constexpr int kMaxDims = 6;

// Shapes and strides are in elements. A view with data == nullptr is "absent"
// (used for optional arguments).
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::f32;
  int ndim = 0;
  std::array<int64_t, kMaxDims> shape{};
  std::array<int64_t, kMaxDims> stride{};
  Device device = kCPU;

  bool present() const { return data != nullptr; }
  int64_t numel() const;
  int64_t size(int dim) const { return shape[dim < 0 ? dim + ndim : dim]; }
  bool is_contiguous() const;
  // True when the last `dims` dimensions are packed row-major (outer dims free).
  bool inner_contiguous(int dims) const;

  template <typename T>
  T* ptr() const { return static_cast<T*>(data); }
  // Element pointer at a multi-index (host-side address arithmetic only).
  template <typename T>
  T* at(std::initializer_list<int64_t> idx) const {
    int64_t off = 0;
    int d = 0;
    for (int64_t i : idx) off += i * stride[d++];
    return static_cast<T*>(data) + off;
  }
};

// Contiguous row-major view.
TensorView make_view(void* data, DType dtype, std::initializer_list<int64_t> shape,
                     Device device = kCPU);
// View with explicit strides (elements).
TensorView make_strided_view(void* data, DType dtype, std::initializer_list<int64_t> shape,
                             std::initializer_list<int64_t> strides, Device device = kCPU);

// "bfloat16 (2, 3)" — the form used in error messages.
std::string describe(const TensorView& t);
std::string shape_string(const TensorView& t);

}  // namespace smla
