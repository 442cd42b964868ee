// Test buffers with a strided view: storage filled with a poison value, a TensorView over
// part of it (optionally `margin` elements in, so reads before and after the view show),
// the storage offsets of the view's elements, and a check that nothing outside the view
// was written.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "smla/tensor.h"

namespace smla::test {

// Row-major strides of a packed tensor of `shape`.
std::vector<int64_t> packed_strides(const std::vector<int64_t>& shape);

// The dtype, shape and strides of a view that starts `base` elements into its storage.
struct StridedLayout {
  DType dtype = DType::f32;
  int64_t base = 0;
  std::vector<int64_t> shape, stride;

  // The view, given a pointer to its first element (storage + base).
  TensorView view_at(void* first) const;
  // Storage offsets of the view's elements (base included), in row-major order of its shape.
  std::vector<int64_t> offsets() const;
  // Storage elements the view spans, plus `base` elements of margin before and after it.
  int64_t storage_elements() const;
};

// `stride` empty = packed; `margin` elements before and after the view.
StridedLayout make_layout(DType dtype, std::vector<int64_t> shape, std::vector<int64_t> stride,
                          int64_t margin = 0);

// Elements of `storage` (`count` elements of `elem_size` bytes) outside the view of `layout`
// whose bytes differ from the `elem_size` bytes at `poison`.
size_t count_written_outside(const StridedLayout& layout, const void* storage, size_t count, size_t elem_size,
                             const void* poison);

// Storage plus a view over part of it; the view's pointer is taken at use, so copies stay valid.
template <typename T>
struct Buffer : StridedLayout {
  std::vector<T> data;

  TensorView view() const { return view_at(const_cast<T*>(data.data()) + base); }
  std::vector<T> values() const {
    std::vector<T> v;
    for (int64_t o : offsets()) v.push_back(data[o]);
    return v;
  }
  // Writes `v` (the view's elements in row-major order) into the view.
  void fill_view(const std::vector<T>& v) {
    const auto offs = offsets();
    for (size_t k = 0; k < offs.size(); ++k) data[offs[k]] = v[k];
  }
};

// Storage holding `fill` everywhere; `stride` empty = packed; `margin` elements of `fill`
// before and after the view catch reads outside it.
template <typename T>
Buffer<T> make_buffer(DType dtype, std::vector<int64_t> shape, std::vector<int64_t> stride, T fill,
                      int64_t margin = 0) {
  Buffer<T> b;
  static_cast<StridedLayout&>(b) = make_layout(dtype, std::move(shape), std::move(stride), margin);
  b.data.assign(b.storage_elements(), fill);
  return b;
}

// Elements of the storage outside the view must still hold the poison.
template <typename T>
void expect_outside_untouched(const Buffer<T>& b, T poison, const char* what) {
  EXPECT_EQ(count_written_outside(b, b.data.data(), b.data.size(), sizeof(T), &poison), 0u)
      << what << ": elements outside the view were written";
}

}  // namespace smla::test
