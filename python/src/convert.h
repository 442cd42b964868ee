// Python objects -> smla argument types. The binding converts and dispatches, nothing else:
// every rule about shapes, dtypes and values is checked by the C++ core.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "smla/formats.h"
#include "smla/ops.h"
#include "smla/tensor.h"

namespace smla::py {

namespace nb = nanobind;

// Keeps the imported arrays (and with them the producer's tensors) alive for one call.
class Arrays {
 public:
  // A tensor argument: None (absent), a DLPack capsule or DLPack-capable object, or a pair
  // (tensor, dtype name) that reinterprets a uint8 tensor as another 1-byte dtype (how the
  // Python layer passes float8 tensors to any torch version). `name` is the argument's name
  // in error messages.
  TensorView view(nb::handle obj, const char* name);

 private:
  std::vector<nb::ndarray<>> keep_;
};

// "bf16", "fp8_ds_mla", ... -> CacheFormat, else smla::Error naming `name`.
CacheFormat parse_cache_format(const std::string& format, const char* name);

// A paged cache from its tensor, format and k_scale.
PagedCache make_cache(Arrays& arrays, nb::handle data, const std::string& format, float k_scale,
                      const char* name);

// The integer stream handle (cudaStream_t; 0 = the default stream) and an optional uint8
// workspace tensor.
Exec make_exec(Arrays& arrays, uintptr_t stream, nb::handle workspace = nb::none());

}  // namespace smla::py
