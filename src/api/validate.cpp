#include "api/validate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace smla::detail {

std::string dtypes_string(std::initializer_list<DType> dtypes) {
  std::string s;
  size_t i = 0, n = dtypes.size();
  for (DType d : dtypes) {
    if (i > 0) s += (i + 1 == n) ? " or " : ", ";
    s += dtype_name(d);
    ++i;
  }
  return s;
}

std::string expected_shape_string(std::initializer_list<int64_t> shape) {
  std::ostringstream os;
  os << "(";
  size_t i = 0;
  for (int64_t s : shape) {
    os << (i++ ? ", " : "");
    if (s == kAny) os << "*"; else os << s;
  }
  if (shape.size() == 1) os << ",";
  os << ")";
  return os.str();
}

std::string strides_string(const TensorView& t) {
  std::ostringstream os;
  os << "(";
  for (int i = 0; i < t.ndim; ++i) os << (i ? ", " : "") << t.stride[i];
  if (t.ndim == 1) os << ",";
  os << ")";
  return os.str();
}

void require_present(const char* name, const TensorView& t, const char* what) {
  if (!t.present()) throw Error(name, std::string("given (") + what + ")", "nothing");
}

void check_tensor(const char* name, const TensorView& t, std::initializer_list<DType> dtypes,
                  std::initializer_list<int64_t> shape) {
  std::string expected = dtypes_string(dtypes) + " of shape " + expected_shape_string(shape);
  if (!t.present()) throw Error(name, expected, "nothing");
  bool ok = false;
  for (DType d : dtypes) ok |= (d == t.dtype);
  ok &= (t.ndim == static_cast<int>(shape.size()));
  if (ok) {
    int i = 0;
    for (int64_t s : shape) {
      if (s != kAny && t.shape[i] != s) ok = false;
      if (t.shape[i] < 0) ok = false;
      ++i;
    }
  }
  if (!ok) throw Error(name, expected, describe(t));
}

void check_device_known(const char* name, Device d) {
  const bool known = d.type == DeviceType::cpu || (d.type == DeviceType::cuda && d.index >= 0);
  if (!known) throw Error(name, "on cpu or a cuda device", "on " + device_name(d));
}

void check_same_device(const char* name, const TensorView& t, const char* ref_name, Device ref) {
  check_device_known(ref_name, ref);
  if (t.present() && !(t.device == ref))
    throw Error(name, "on " + device_name(ref) + " like " + ref_name, "on " + device_name(t.device));
}

void check_inner_contiguous(const char* name, const TensorView& t, int dims) {
  for (int i = 0; i < t.ndim; ++i)
    if (t.stride[i] < 0)
      throw Error(name, "non-negative strides", "strides " + strides_string(t));
  if (!t.inner_contiguous(dims)) {
    std::string what = dims == 1 ? "its last dimension contiguous (stride 1)"
                                 : "its last " + std::to_string(dims) + " dimensions packed row-major";
    throw Error(name, "a tensor with " + what, "strides " + strides_string(t));
  }
}

void check_aligned(const char* name, const TensorView& t, int bytes) {
  if (!t.present()) return;
  auto addr = reinterpret_cast<uintptr_t>(t.data);
  int64_t es = static_cast<int64_t>(dtype_size(t.dtype));
  bool ok = addr % bytes == 0;
  for (int i = 0; i + 1 < t.ndim; ++i)
    if (t.shape[i] > 1 && (t.stride[i] * es) % bytes != 0) ok = false;
  if (!ok)
    throw Error(name, "aligned to " + std::to_string(bytes) + " bytes (data pointer and outer strides)",
                "address % " + std::to_string(bytes) + " = " + std::to_string(addr % bytes) +
                    " and strides " + strides_string(t));
}

void check_cache_aligned(const char* name, const PagedCache& c) {
  if (!c.data.present()) return;
  TensorView pages = c.data;
  pages.ndim = 2;  // only the page stride is an outer stride the device relies on
  check_aligned(name, pages, 16);
}

void check_backend_supports(const KernelConfig& config, int64_t rows) {
  if (rows == 0) return;  // an empty call launches nothing, whatever its shape
  auto u = check_support(config);
  // A build without CUDA is not bad input: the dispatch reports it as smla::RuntimeError
  // (API.md, Errors). check_support names it last, so every other reason still comes first.
  if (u && u->argument == "backend" && !built_with_cuda()) return;
  if (u) throw Error(u->argument, u->expected, u->given);
}

void check_value(const char* name, bool ok, const std::string& expected, const std::string& given) {
  if (!ok) throw Error(name, expected, given);
}

void check_paged_cache(const char* name, const PagedCache& c, std::initializer_list<CacheFormat> allowed) {
  bool fmt_ok = false;
  std::string fmts;
  size_t i = 0;
  for (CacheFormat f : allowed) {
    fmt_ok |= (f == c.format);
    fmts += (i ? (i + 1 == allowed.size() ? " or " : ", ") : "");
    fmts += format_name(f);
    ++i;
  }
  std::string sname = std::string(name) + ".format";
  if (!fmt_ok) throw Error(sname, fmts, format_name(c.format));
  const TensorView& d = c.data;
  std::string dname = std::string(name);
  if (!d.present()) throw Error(dname, "a paged cache tensor", "nothing");
  if (d.ndim != 3 && d.ndim != 4)
    throw Error(dname, "a tensor of shape (num_blocks, page_size, [h_kv,] row)", describe(d));
  switch (c.format) {
    case CacheFormat::bf16:
    case CacheFormat::fp16:
    case CacheFormat::fp8_e4m3: {
      DType want = c.format == CacheFormat::bf16 ? DType::bf16
                 : c.format == CacheFormat::fp16 ? DType::f16 : DType::fp8_e4m3;
      if (d.dtype != want)
        throw Error(dname, std::string(dtype_name(want)) + " for format " + format_name(c.format),
                    describe(d));
      int64_t row = d.shape[d.ndim - 1];
      if (row != 576 && row != 512)
        throw Error(dname, "rows of d_qk = 576 or 512 elements", describe(d));
      break;
    }
    case CacheFormat::fp8_ds_mla:
    case CacheFormat::fp8_model1: {
      int bpt = bytes_per_token(c.format, 0);
      if (d.dtype != DType::u8 || d.shape[d.ndim - 1] != bpt)
        throw Error(dname, "uint8 rows of " + std::to_string(bpt) + " bytes for format " + format_name(c.format),
                    describe(d));
      if (d.ndim == 4 && d.shape[2] != 1)
        throw Error(dname, std::string("h_kv = 1 for format ") + format_name(c.format), describe(d));
      break;
    }
  }
  if (d.shape[0] < 0 || d.shape[1] < 1)
    throw Error(dname, "num_blocks >= 0 and page_size >= 1", describe(d));
  check_inner_contiguous(name, d, d.ndim - 1);
  int64_t page_elems = 1;
  for (int k = 1; k < d.ndim; ++k) page_elems *= d.shape[k];
  if (d.shape[0] > 1 && d.stride[0] < page_elems)
    throw Error(dname, "a page stride of at least " + std::to_string(page_elems) + " elements (one page)",
                std::to_string(d.stride[0]));
  if (c.format == CacheFormat::fp8_e4m3)
    check_value((std::string(name) + ".k_scale").c_str(), std::isfinite(c.k_scale) && c.k_scale > 0,
                "a positive finite float", std::to_string(c.k_scale));
}

namespace {

// A view's bytes [lo, hi), for a non-empty dense view.
void byte_extent(const TensorView& t, uintptr_t& lo, uintptr_t& hi) {
  int64_t last = 0;
  for (int i = 0; i < t.ndim; ++i) last += (t.shape[i] - 1) * t.stride[i];
  const int64_t es = static_cast<int64_t>(dtype_size(t.dtype));
  lo = reinterpret_cast<uintptr_t>(t.data);
  hi = lo + static_cast<uintptr_t>((last + 1) * es);
}

// Its elements fill their extent exactly, each once (a permutation of a packed layout): then
// two such views share memory exactly where their extents meet. Every stride that counts is
// then positive (a dimension of size 1 adds nothing to the extent, whatever its stride).
bool dense(const TensorView& t) {
  int64_t sizes[kMaxDims], strides[kMaxDims];
  int n = 0;
  for (int i = 0; i < t.ndim; ++i)
    if (t.shape[i] > 1) sizes[n] = t.shape[i], strides[n++] = t.stride[i];
  for (int i = 1; i < n; ++i)  // insertion sort by stride: at most kMaxDims dimensions
    for (int j = i; j > 0 && strides[j] < strides[j - 1]; --j) {
      std::swap(strides[j], strides[j - 1]);
      std::swap(sizes[j], sizes[j - 1]);
    }
  int64_t expected = 1;
  for (int i = 0; i < n; ++i) {
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

}  // namespace

void check_no_alias(const char* out_name, const TensorView& out, const char* in_name, const TensorView& in) {
  if (!out.present() || !in.present()) return;
  if (out.data == in.data)
    throw Error(out_name, std::string("a buffer distinct from ") + in_name, "the same data pointer");
  // Where both views are dense their extents meeting means shared elements; other layouts
  // (padded rows, interleaved views) are left alone rather than rejected on a guess.
  if (out.numel() == 0 || in.numel() == 0 || !dense(out) || !dense(in)) return;
  uintptr_t olo, ohi, ilo, ihi;
  byte_extent(out, olo, ohi);
  byte_extent(in, ilo, ihi);
  if (olo < ihi && ilo < ohi)
    throw Error(out_name, std::string("a buffer distinct from ") + in_name, "memory overlapping it");
}

void check_no_self_overlap(const char* name, const TensorView& t) {
  if (!t.present() || t.numel() == 0) return;  // no elements, none written twice
  for (int i = 0; i < t.ndim; ++i)
    if (t.shape[i] > 1 && t.stride[i] == 0)
      throw Error(name, "a tensor whose elements do not overlap (no stride 0 on a dimension longer than 1)",
                  describe(t) + " with strides " + strides_string(t));
}

void check_tensor_on(const char* name, const TensorView& t, std::initializer_list<DType> dtypes,
                     std::initializer_list<int64_t> shape, int contiguous_dims, const char* ref_name, Device ref) {
  check_tensor(name, t, dtypes, shape);
  check_inner_contiguous(name, t, contiguous_dims);
  check_same_device(name, t, ref_name, ref);
}

void check_optional_vector(const char* name, const TensorView& t, DType dtype, int64_t n, const char* ref_name,
                           Device ref) {
  if (!t.present()) return;
  check_tensor_on(name, t, {dtype}, {n}, 0, ref_name, ref);
}

void check_softmax_scale(const std::optional<float>& scale) {
  if (!scale) return;
  const float s = *scale;
  char given[32];
  std::snprintf(given, sizeof(given), "%g", static_cast<double>(s));
  check_value("softmax_scale", std::isfinite(s) && s > 0, "a positive finite float", given);
}

void check_outputs_distinct(std::initializer_list<NamedTensor> outputs, std::initializer_list<NamedTensor> inputs) {
  for (const auto& [out_name, out] : outputs) check_no_self_overlap(out_name, *out);
  for (const auto& [in_name, in] : inputs)
    for (const auto& [out_name, out] : outputs) check_no_alias(out_name, *out, in_name, *in);
  for (auto later = outputs.begin(); later != outputs.end(); ++later)
    for (auto earlier = outputs.begin(); earlier != later; ++earlier)
      check_no_alias(later->first, *later->second, earlier->first, *earlier->second);
}

void check_each_aligned(std::initializer_list<NamedTensor> tensors, int bytes) {
  for (const auto& [name, t] : tensors) check_aligned(name, *t, bytes);
}

void check_workspace(const Workspace& ws, size_t need, const char* size_query) {
  if (need == 0) return;
  if (ws.bytes < need || ws.data == nullptr)
    throw Error("workspace", "at least " + std::to_string(need) + " bytes (see " + size_query + ")",
                std::to_string(ws.bytes) + " bytes" + (ws.data == nullptr ? " at a null address" : ""));
  const auto misalign = reinterpret_cast<uintptr_t>(ws.data) % 16;
  if (misalign != 0) throw Error("workspace", "aligned to 16 bytes", "address % 16 = " + std::to_string(misalign));
}

}  // namespace smla::detail
