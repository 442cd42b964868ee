// Host-side pieces shared by the metadata entry points: the argument check every index
// tensor gets, and the CPU loop over rows.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "api/validate.h"
#include "reference/parallel.h"
#include "smla/tensor.h"

namespace smla::meta {

// dtype and shape; on the device of `ref`; inputs need a packed last dimension (rows may be
// strided, e.g. a slice of a larger block table), outputs must be fully packed so that no
// two elements share memory; on CUDA, aligned to the element size.
inline void check_index_tensor(const char* name, const TensorView& t, DType dtype,
                               std::initializer_list<int64_t> shape, const char* ref_name,
                               const TensorView& ref, bool is_output) {
  detail::check_tensor(name, t, {dtype}, shape);
  detail::check_same_device(name, t, ref_name, ref.device);
  detail::check_inner_contiguous(name, t, is_output ? t.ndim : 1);
  if (t.device.type == DeviceType::cuda) detail::check_aligned(name, t, static_cast<int>(dtype_size(dtype)));
}

inline void check_at_least(const char* name, int64_t value, int64_t lo) {
  detail::check_value(name, value >= lo, "at least " + std::to_string(lo), std::to_string(value));
}

// Rows are independent and cheap: threads only pay off for large inputs.
template <typename F>
void for_each_row(int64_t rows, int64_t work_per_row, F&& body) {
  constexpr int64_t kSerialWork = int64_t{1} << 16;
  constexpr int64_t kChunkWork = int64_t{1} << 14;
  work_per_row = std::max<int64_t>(work_per_row, 1);
  if (rows * work_per_row <= kSerialWork) {
    for (int64_t i = 0; i < rows; ++i) body(i);
    return;
  }
  int64_t chunk = std::max<int64_t>(1, kChunkWork / work_per_row);
  int64_t chunks = (rows + chunk - 1) / chunk;
  ref::parallel_for(chunks, [&](int64_t c) {
    int64_t end = std::min(rows, (c + 1) * chunk);
    for (int64_t i = c * chunk; i < end; ++i) body(i);
  });
}

}  // namespace smla::meta
