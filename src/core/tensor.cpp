#include "smla/tensor.h"

#include <sstream>

namespace smla {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: case DType::i32: return 4;
    case DType::f64: case DType::i64: return 8;
    case DType::bf16: case DType::f16: return 2;
    case DType::fp8_e4m3: case DType::u8: return 1;
  }
  return 0;
}

// Names follow torch's dtype names, so Python users read the same words.
const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::f64: return "float64";
    case DType::bf16: return "bfloat16";
    case DType::f16: return "float16";
    case DType::fp8_e4m3: return "float8_e4m3fn";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
    case DType::u8: return "uint8";
  }
  return "?";
}

// A Device is plain data: a type outside the enum (or an index a view was built with by
// mistake) is spelled out, so that the error rejecting it can say what it was.
std::string device_name(Device d) {
  switch (d.type) {
    case DeviceType::cpu:
      return d.index == 0 ? std::string("cpu") : "cpu:" + std::to_string(d.index);
    case DeviceType::cuda:
      return "cuda:" + std::to_string(d.index);
  }
  return "device type " + std::to_string(static_cast<int>(d.type));
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= shape[i];
  return n;
}

bool TensorView::inner_contiguous(int dims) const {
  int64_t expect = 1;
  for (int i = ndim - 1; i >= ndim - dims && i >= 0; --i) {
    if (shape[i] != 1 && stride[i] != expect) return false;
    expect *= shape[i];
  }
  return true;
}

bool TensorView::is_contiguous() const { return inner_contiguous(ndim); }

TensorView make_view(void* data, DType dtype, std::initializer_list<int64_t> shape, Device device) {
  TensorView t;
  t.data = data;
  t.dtype = dtype;
  t.device = device;
  t.ndim = static_cast<int>(shape.size());
  int i = 0;
  for (int64_t s : shape) t.shape[i++] = s;
  int64_t st = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    t.stride[d] = st;
    st *= t.shape[d];
  }
  return t;
}

TensorView make_strided_view(void* data, DType dtype, std::initializer_list<int64_t> shape,
                             std::initializer_list<int64_t> strides, Device device) {
  TensorView t = make_view(data, dtype, shape, device);
  int i = 0;
  for (int64_t s : strides) t.stride[i++] = s;
  return t;
}

std::string shape_string(const TensorView& t) {
  std::ostringstream os;
  os << "(";
  for (int i = 0; i < t.ndim; ++i) os << (i ? ", " : "") << t.shape[i];
  if (t.ndim == 1) os << ",";
  os << ")";
  return os.str();
}

std::string describe(const TensorView& t) {
  if (!t.present()) return "nothing";
  return std::string(dtype_name(t.dtype)) + " " + shape_string(t);
}

}  // namespace smla
