#include "convert.h"

#include <nanobind/stl/string.h>

#include <cstring>
#include <iterator>

#include "smla/error.h"

namespace smla::py {
namespace {

// DLPack codes (dlpack.h); float8_e4m3fn is 10 since DLPack 1.1. Spelled as numbers so
// the binding builds with nanobind versions that predate the float8 codes.
constexpr uint8_t kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLFloat8E4M3FN = 10;
constexpr int32_t kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13;

// The other DLPack device types, named in the error that rejects them (no backend runs there).
std::string dlpack_device_text(int32_t type) {
  static constexpr const char* kNames[] = {nullptr, nullptr, nullptr,   nullptr,     "OpenCL", nullptr,
                                           nullptr, "Vulkan", "Metal",  "VPI",       "ROCm",   "ROCm host",
                                           "ext_dev", nullptr, "oneAPI", "WebGPU",   "Hexagon", "MAIA"};
  std::string s = "DLPack device type " + std::to_string(type);
  if (type >= 0 && type < static_cast<int32_t>(std::size(kNames)) && kNames[type])
    s += std::string(" (") + kNames[type] + ")";
  return s;
}

bool dtype_from_dlpack(nb::dlpack::dtype t, DType* out) {
  if (t.lanes != 1) return false;
  switch (t.code) {
    case kDLFloat:
      if (t.bits == 32) { *out = DType::f32; return true; }
      if (t.bits == 64) { *out = DType::f64; return true; }
      if (t.bits == 16) { *out = DType::f16; return true; }
      return false;
    case kDLBfloat:
      if (t.bits == 16) { *out = DType::bf16; return true; }
      return false;
    case kDLInt:
      if (t.bits == 32) { *out = DType::i32; return true; }
      if (t.bits == 64) { *out = DType::i64; return true; }
      return false;
    case kDLUInt:
      if (t.bits == 8) { *out = DType::u8; return true; }
      return false;
    case kDLFloat8E4M3FN:
      if (t.bits == 8) { *out = DType::fp8_e4m3; return true; }
      return false;
    default:
      return false;
  }
}

std::string dlpack_dtype_text(nb::dlpack::dtype t) {
  return "DLPack dtype (code " + std::to_string(t.code) + ", " + std::to_string(t.bits) +
         " bits, " + std::to_string(t.lanes) + " lanes)";
}

constexpr const char* kDtypes =
    "a tensor of float32, float64, bfloat16, float16, float8_e4m3fn, int32, int64 or uint8";

// Zero-size tensors may carry a null data pointer, which smla reads as "absent". Such a
// tensor has no element to address, so a non-null stand-in is given: a distinct, aligned
// one per argument, so that the core's aliasing and alignment checks still hold.
constexpr int kEmptySlots = 32, kEmptySlotBytes = 256;
alignas(kEmptySlotBytes) unsigned char g_empty_tensor_storage[kEmptySlots * kEmptySlotBytes];

}  // namespace

TensorView Arrays::view(nb::handle obj, const char* name) {
  TensorView v;
  if (obj.is_none()) return v;

  nb::handle src = obj;
  std::optional<DType> override_dtype;
  if (nb::isinstance<nb::tuple>(obj)) {
    nb::tuple pair = nb::borrow<nb::tuple>(obj);
    if (pair.size() != 2 || !nb::isinstance<nb::str>(pair[1]))
      throw Error(name, "a tensor or a (tensor, dtype name) pair", "a tuple of " + std::to_string(pair.size()));
    src = pair[0];
    std::string dt = nb::cast<std::string>(pair[1]);
    if (dt != "float8_e4m3fn") throw Error(name, "reinterpreted as float8_e4m3fn", "'" + dt + "'");
    override_dtype = DType::fp8_e4m3;
  }

  nb::ndarray<> arr;
  if (!nb::try_cast(src, arr, false)) {
    std::string tp = nb::cast<std::string>(nb::str(src.type().attr("__name__")));
    throw Error(name, "a tensor (torch.Tensor or another DLPack array)", "an object of type " + tp);
  }
  if (arr.ndim() > static_cast<size_t>(kMaxDims))
    throw Error(name, "a tensor of at most " + std::to_string(kMaxDims) + " dimensions",
                std::to_string(arr.ndim()) + " dimensions");

  DType dtype;
  if (!dtype_from_dlpack(arr.dtype(), &dtype)) throw Error(name, kDtypes, dlpack_dtype_text(arr.dtype()));
  if (override_dtype) {
    if (dtype != DType::u8) throw Error(name, "a uint8 tensor to reinterpret as float8_e4m3fn", dtype_name(dtype));
    dtype = *override_dtype;
  }

  // Pinned host memory is host memory, and managed memory is addressable by the device, so
  // both map onto a backend; any other device type is refused here, by name.
  switch (arr.device_type()) {
    case kDLCPU:
    case kDLCUDAHost:
      v.device = kCPU;
      break;
    case kDLCUDA:
    case kDLCUDAManaged:
      v.device = cuda_device(arr.device_id());
      break;
    default:
      throw Error(name, "on cpu or a cuda device", "on " + dlpack_device_text(arr.device_type()));
  }

  v.dtype = dtype;
  v.ndim = static_cast<int>(arr.ndim());
  int64_t numel = 1;
  for (int d = 0; d < v.ndim; ++d) {
    v.shape[d] = static_cast<int64_t>(arr.shape(d));
    v.stride[d] = arr.stride(d);
    numel *= v.shape[d];
  }
  v.data = arr.data();
  if (v.data == nullptr && numel == 0)
    v.data = g_empty_tensor_storage + (keep_.size() % kEmptySlots) * kEmptySlotBytes;
  if (v.data == nullptr) throw Error(name, "a tensor with data", "a null data pointer");
  keep_.push_back(std::move(arr));
  return v;
}

CacheFormat parse_cache_format(const std::string& format, const char* name) {
  CacheFormat f;
  if (!parse_format(format.c_str(), &f))
    throw Error(name, "one of bf16, fp16, fp8_e4m3, fp8_ds_mla, fp8_model1", "'" + format + "'");
  return f;
}

PagedCache make_cache(Arrays& arrays, nb::handle data, const std::string& format, float k_scale,
                      const char* name) {
  PagedCache c;
  c.data = arrays.view(data, name);
  c.format = parse_cache_format(format, (std::string(name) + "_format").c_str());
  c.k_scale = k_scale;
  return c;
}

Exec make_exec(Arrays& arrays, uintptr_t stream, nb::handle workspace) {
  Exec e;
  e.stream = reinterpret_cast<void*>(stream);
  TensorView ws = arrays.view(workspace, "workspace");
  if (ws.present()) {
    e.workspace.data = ws.data;
    e.workspace.bytes = static_cast<size_t>(ws.numel()) * dtype_size(ws.dtype);
  }
  return e;
}

}  // namespace smla::py
