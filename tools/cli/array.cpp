#include "cli/array.h"

#include <algorithm>

#include "smla/error.h"

namespace smla::cli {

Array Array::make(DType dtype, std::vector<int64_t> shape) {
  std::vector<int64_t> stride(shape.size());
  int64_t s = 1;
  for (size_t k = shape.size(); k-- > 0;) {
    stride[k] = s;
    s *= shape[k];
  }
  return make_strided(dtype, std::move(shape), std::move(stride), static_cast<size_t>(s) * dtype_size(dtype));
}

Array Array::make_strided(DType dtype, std::vector<int64_t> shape, std::vector<int64_t> stride, size_t bytes) {
  Array a;
  a.dtype = dtype;
  a.shape = std::move(shape);
  a.stride = std::move(stride);
  int64_t last = 0;
  bool empty = false;
  for (size_t k = 0; k < a.shape.size(); ++k) {
    empty |= a.shape[k] == 0;
    last += (a.shape[k] - 1) * a.stride[k];
  }
  const size_t reach = empty ? 0 : static_cast<size_t>(last + 1) * dtype_size(dtype);
  // Never a null pointer: a present view of an empty tensor still has data.
  a.host = Buffer(std::max<size_t>({bytes, reach, 16}), kCPU);
  return a;
}

int64_t Array::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

void Array::allocate_device() {
  if (dev.empty() && !host.empty()) dev = Buffer(host.bytes(), cuda_device(0));
}

void Array::upload() {
  if (host.empty()) return;
  allocate_device();
  dev.copy_from(host);
}

void Array::download() {
  if (host.empty() || dev.empty()) return;
  host.copy_from(dev);
}

TensorView Array::view(Device device, int64_t keep, int dim) const {
  TensorView v;
  if (host.empty()) return v;
  const Buffer& b = device.type == DeviceType::cpu ? host : dev;
  if (b.empty()) throw RuntimeError("a device view of an array that was never uploaded");
  v.data = b.data();
  v.dtype = dtype;
  v.ndim = static_cast<int>(shape.size());
  for (int k = 0; k < v.ndim; ++k) {
    v.shape[k] = shape[k];
    v.stride[k] = stride[k];
  }
  if (keep >= 0) v.shape[dim] = std::min(keep, shape[dim]);
  v.device = device;
  return v;
}

Array filled_i32(int64_t n, int32_t value) {
  Array a = Array::make(DType::i32, {n});
  for (int64_t i = 0; i < n; ++i) a.h<int32_t>()[i] = value;
  return a;
}

Array make_cache_array(CacheFormat format, int d_qk, int64_t num_blocks, int page_size, bool h_kv_dim) {
  const int64_t page = page_size;
  if (is_packed_format(format)) {
    const int64_t bpt = bytes_per_token(format, d_qk);
    const int64_t page_bytes =
        format == CacheFormat::fp8_model1 ? Model1Layout::aligned_page_bytes(page_size) : page * bpt;
    return Array::make_strided(DType::u8, {num_blocks, page, bpt}, {page_bytes, bpt, 1},
                               static_cast<size_t>(num_blocks * page_bytes));
  }
  const DType dt = format == CacheFormat::bf16 ? DType::bf16 : format == CacheFormat::fp16 ? DType::f16 : DType::fp8_e4m3;
  if (h_kv_dim) return Array::make(dt, {num_blocks, page, 1, d_qk});
  return Array::make(dt, {num_blocks, page, d_qk});
}

PagedCache paged_cache(const Array& a, CacheFormat format, Device device, float k_scale) {
  PagedCache c;
  c.data = a.view(device);
  c.format = format;
  c.k_scale = k_scale;
  return c;
}

}  // namespace smla::cli
