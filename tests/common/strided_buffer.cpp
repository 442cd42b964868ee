#include "common/strided_buffer.h"

#include <algorithm>
#include <cstring>

namespace smla::test {

std::vector<int64_t> packed_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t st = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    s[d] = st;
    st *= shape[d];
  }
  return s;
}

TensorView StridedLayout::view_at(void* first) const {
  TensorView v;
  v.data = first;
  v.dtype = dtype;
  v.ndim = static_cast<int>(shape.size());
  for (int d = 0; d < v.ndim; ++d) {
    v.shape[d] = shape[d];
    v.stride[d] = stride[d];
  }
  return v;
}

std::vector<int64_t> StridedLayout::offsets() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<int64_t> offs;
  offs.reserve(n);
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t c = 0; c < n; ++c) {
    int64_t off = base;
    for (size_t d = 0; d < shape.size(); ++d) off += idx[d] * stride[d];
    offs.push_back(off);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return offs;
}

int64_t StridedLayout::storage_elements() const {
  int64_t extent = 1;
  for (size_t d = 0; d < shape.size(); ++d) extent += std::max<int64_t>(shape[d] - 1, 0) * stride[d];
  return extent + 2 * base;
}

StridedLayout make_layout(DType dtype, std::vector<int64_t> shape, std::vector<int64_t> stride, int64_t margin) {
  StridedLayout l;
  l.dtype = dtype;
  l.base = margin;
  if (stride.empty()) stride = packed_strides(shape);
  l.shape = std::move(shape);
  l.stride = std::move(stride);
  return l;
}

size_t count_written_outside(const StridedLayout& layout, const void* storage, size_t count, size_t elem_size,
                             const void* poison) {
  std::vector<bool> inside(count, false);
  for (int64_t o : layout.offsets()) inside[o] = true;
  const auto* bytes = static_cast<const uint8_t*>(storage);
  size_t touched = 0;
  for (size_t i = 0; i < count; ++i)
    if (!inside[i] && std::memcmp(bytes + i * elem_size, poison, elem_size) != 0) ++touched;
  return touched;
}

}  // namespace smla::test
