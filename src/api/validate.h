// Host-side argument checks shared by every entry point. Each throws smla::Error naming the
// argument, what was expected and what was given, e.g.
//   attn_sink must be float32 of shape (16,), got bfloat16 (16,)
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <utility>

#include "smla/capabilities.h"
#include "smla/error.h"
#include "smla/formats.h"
#include "smla/ops.h"
#include "smla/tensor.h"

namespace smla::detail {

inline constexpr int64_t kAny = -1;  // a shape entry that may take any size

std::string dtypes_string(std::initializer_list<DType> dtypes);
std::string expected_shape_string(std::initializer_list<int64_t> shape);

// Dtype and shape in one rule; `shape` entries of kAny match any size.
void check_tensor(const char* name, const TensorView& t, std::initializer_list<DType> dtypes,
                  std::initializer_list<int64_t> shape);
void require_present(const char* name, const TensorView& t, const char* what);
// A device the backends run on: cpu, or cuda with an index >= 0.
void check_device_known(const char* name, Device d);
// `ref` (the device of `ref_name`) is checked with check_device_known first, so every entry
// point, which compares its tensors with one reference this way, rejects a device no backend
// runs on (otherwise such a view would fall through to the CPU backend); then `t`, when
// present, must be on `ref`.
void check_same_device(const char* name, const TensorView& t, const char* ref_name, Device ref);
// The last `dims` dimensions packed row-major, all strides non-negative.
void check_inner_contiguous(const char* name, const TensorView& t, int dims);
// Data pointer and every outer stride multiple of `bytes` (vector loads on the device).
void check_aligned(const char* name, const TensorView& t, int bytes);
// A cache on the device: base pointer and page stride aligned to 16 bytes. Inside a page only
// the packed formats' own offsets count (fp8_model1's [page_size, 584] view is a byte count,
// not its layout), so the inner strides are not checked.
void check_cache_aligned(const char* name, const PagedCache& c);
// The backend's capability table (smla/capabilities.h) admits the configuration: what
// why_not() reports is what a call enforces. Calls with no query rows pass.
void check_backend_supports(const KernelConfig& config, int64_t rows);
void check_value(const char* name, bool ok, const std::string& expected, const std::string& given);
// A paged cache: dims, dtype for its format, packed rows, page stride covers a page.
void check_paged_cache(const char* name, const PagedCache& c, std::initializer_list<CacheFormat> allowed);
// Two tensors must not share memory with an output (an output that aliases an input
// would make the result depend on the order of writes).
// Besides the same data pointer, two dense views (each a permutation of a packed layout) whose
// bytes meet are rejected; other layouts are not judged.
void check_no_alias(const char* out_name, const TensorView& out, const char* in_name, const TensorView& in);
// An output none of whose elements are written twice: no stride 0 on a dimension longer than 1
// (a broadcast view). check_outputs_distinct applies it to its outputs.
void check_no_self_overlap(const char* name, const TensorView& t);
std::string strides_string(const TensorView& t);

// The rules several entry points share, each in the order it checks them.
using NamedTensor = std::pair<const char*, const TensorView*>;

// check_tensor, then check_inner_contiguous over the last `contiguous_dims` dimensions, then
// check_same_device against `ref_name`.
void check_tensor_on(const char* name, const TensorView& t, std::initializer_list<DType> dtypes,
                     std::initializer_list<int64_t> shape, int contiguous_dims, const char* ref_name, Device ref);
// An optional [n] tensor of `dtype` (per-request lengths, per-head sinks): when present, any
// non-negative stride, on the device of `ref_name`.
void check_optional_vector(const char* name, const TensorView& t, DType dtype, int64_t n, const char* ref_name,
                           Device ref);
// softmax_scale, when given: a positive finite float (the value printed with %g).
void check_softmax_scale(const std::optional<float>& scale);
// No output shares memory with an input (each input against every output, in order), nor
// with an output named before it.
void check_outputs_distinct(std::initializer_list<NamedTensor> outputs, std::initializer_list<NamedTensor> inputs);
// check_aligned on each tensor, in order.
void check_each_aligned(std::initializer_list<NamedTensor> tensors, int bytes);
// A caller's workspace for a launch that needs `need` bytes (0: none, anything passes): at least
// that many, present, 16-byte aligned; `size_query` names the function that reports `need`.
void check_workspace(const Workspace& ws, size_t need, const char* size_query);

}  // namespace smla::detail
