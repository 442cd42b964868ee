// Host-side argument checks shared by every entry point. Each throws smla::Error naming the
// argument, what was expected and what was given, e.g.
//   attn_sink must be float32 of shape (16,), got bfloat16 (16,)
#pragma once

#include <initializer_list>
#include <string>

#include "smla/error.h"
#include "smla/formats.h"
#include "smla/tensor.h"

namespace smla::detail {

inline constexpr int64_t kAny = -1;  // a shape entry that may take any size

std::string dtypes_string(std::initializer_list<DType> dtypes);
std::string expected_shape_string(std::initializer_list<int64_t> shape);

// Dtype and shape in one rule; `shape` entries of kAny match any size.
void check_tensor(const char* name, const TensorView& t, std::initializer_list<DType> dtypes,
                  std::initializer_list<int64_t> shape);
void require_present(const char* name, const TensorView& t, const char* what);
void check_same_device(const char* name, const TensorView& t, const char* ref_name, Device ref);
// The last `dims` dimensions packed row-major, all strides non-negative.
void check_inner_contiguous(const char* name, const TensorView& t, int dims);
// Data pointer and every outer stride multiple of `bytes` (vector loads on the device).
void check_aligned(const char* name, const TensorView& t, int bytes);
// A cache on the device: base pointer and page stride aligned to 16 bytes. Inside a page only
// the packed formats' own offsets count (fp8_model1's [page_size, 584] view is a byte count,
// not its layout), so the inner strides are not checked.
void check_cache_aligned(const char* name, const PagedCache& c);
void check_value(const char* name, bool ok, const std::string& expected, const std::string& given);
// A paged cache: dims, dtype for its format, packed rows, page stride covers a page.
void check_paged_cache(const char* name, const PagedCache& c, std::initializer_list<CacheFormat> allowed);
// Two tensors must not share memory with an output (an output that aliases an input
// would make the result depend on the order of writes).
void check_no_alias(const char* out_name, const TensorView& out, const char* in_name, const TensorView& in);
std::string strides_string(const TensorView& t);

}  // namespace smla::detail
