// A tensor the CLI owns: host bytes (where inputs are built and results judged) and, once
// uploaded, a device copy of the same bytes. Hands out TensorViews on either device.
#pragma once

#include <cstdint>
#include <vector>

#include "cli/buffer.h"
#include "smla/formats.h"
#include "smla/tensor.h"

namespace smla::cli {

struct Array {
  DType dtype = DType::u8;
  std::vector<int64_t> shape, stride;  // elements
  Buffer host, dev;

  // Zeroed, row-major.
  static Array make(DType dtype, std::vector<int64_t> shape);
  // Zeroed, explicit strides; `bytes` at least what the strides reach.
  static Array make_strided(DType dtype, std::vector<int64_t> shape, std::vector<int64_t> stride, size_t bytes);

  bool present() const { return !host.empty(); }
  int64_t numel() const;
  template <typename T>
  T* h() const {
    return static_cast<T*>(host.data());
  }

  // dev <- host (allocating dev on first use) and host <- dev.
  void upload();
  void download();
  // Device memory of the same size, without copying (for outputs).
  void allocate_device();

  // The view on `device` (kCPU: the host bytes), keeping only the first `keep` entries of
  // dimension `dim` when keep >= 0. An absent array gives an absent view.
  TensorView view(Device device, int64_t keep = -1, int dim = 0) const;
};

// `n` int32 values, each `value` (a topk_length whose every list is full).
Array filled_i32(int64_t n, int32_t value);

// A paged cache of `num_blocks` pages of `page_size` tokens in `format`, with the natural page
// stride (fp8_model1: rounded up to 576 bytes as its writers allocate). Element formats get
// [num_blocks, page, h_kv, d_qk] when h_kv_dim, else [num_blocks, page, d_qk].
Array make_cache_array(CacheFormat format, int d_qk, int64_t num_blocks, int page_size, bool h_kv_dim);
PagedCache paged_cache(const Array& a, CacheFormat format, Device device, float k_scale = 1.0f);

}  // namespace smla::cli
