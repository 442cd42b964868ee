// Capabilities (include/smla/capabilities.h) and the format constants Python needs to size
// caches.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <cstring>

#include "convert.h"
#include "smla/capabilities.h"
#include "smla/error.h"

namespace smla::py {
namespace {

using nb::arg;

constexpr Op kOps[] = {Op::sparse_decode, Op::sparse_prefill, Op::dense_decode,
                       Op::merge_states,  Op::write_cache,    Op::gather_cache};
constexpr DType kDTypes[] = {DType::f32, DType::f64, DType::bf16, DType::f16,
                             DType::fp8_e4m3, DType::i32, DType::i64, DType::u8};

Op parse_op(const std::string& s) {
  for (Op op : kOps)
    if (s == op_name(op)) return op;
  throw Error("op", "one of sparse_decode, sparse_prefill, dense_decode, merge_states, write_cache, gather_cache",
              "'" + s + "'");
}

Backend parse_backend(const std::string& s) {
  if (s == "cpu") return Backend::cpu;
  if (s == "cuda_sm90" || s == "cuda") return Backend::cuda_sm90;
  throw Error("backend", "cpu or cuda_sm90", "'" + s + "'");
}

DType parse_dtype(const std::string& s, const char* name) {
  for (DType t : kDTypes)
    if (s == dtype_name(t)) return t;
  throw Error(name, "a dtype name such as bfloat16 or float8_e4m3fn", "'" + s + "'");
}

}  // namespace

void bind_capabilities(nb::module_& m) {
  m.def(
      "why_not",
      [](const std::string& op, const std::string& backend, const std::string& format, const std::string& q_dtype,
         int d_qk, int h_q, int h_kv, int page_size, int topk, int s_q) -> std::optional<std::string> {
        KernelConfig c;
        c.op = parse_op(op);
        c.backend = parse_backend(backend);
        c.format = parse_cache_format(format, "format");
        c.q_dtype = parse_dtype(q_dtype, "q_dtype");
        c.d_qk = d_qk;
        c.h_q = h_q;
        c.h_kv = h_kv;
        c.page_size = page_size;
        c.topk = topk;
        c.s_q = s_q;
        return why_not(c);
      },
      arg("op"), arg("backend"), arg("format"), arg("q_dtype"), arg("d_qk"), arg("h_q"), arg("h_kv"),
      arg("page_size"), arg("topk"), arg("s_q"));

  m.def("capabilities", [] {
    nb::list rows;
    for (const Capability& c : capabilities()) {
      nb::dict d;
      d["op"] = op_name(c.op);
      d["backend"] = backend_name(c.backend);
      d["architectures"] = c.architectures;
      d["q_dtypes"] = c.q_dtypes;
      d["formats"] = c.formats;
      d["d_qk"] = c.d_qk;
      d["h_q"] = c.h_q;
      d["page_sizes"] = c.page_sizes;
      d["topk"] = c.topk;
      d["s_q"] = c.s_q;
      rows.append(d);
    }
    return rows;
  });
  m.def("built_with_cuda", &built_with_cuda);
  m.def("cuda_device_available", &cuda_device_available);

  m.def(
      "bytes_per_token",
      [](const std::string& format, int d_qk) {
        return smla::bytes_per_token(parse_cache_format(format, "cache_format"), d_qk);
      },
      arg("cache_format"), arg("d_qk"));
  m.def("model1_aligned_page_bytes", &Model1Layout::aligned_page_bytes, arg("page_size"));
  m.attr("D_V") = kDv;
  m.attr("D_ROPE") = kDRope;
}

}  // namespace smla::py
