#include <random>

#include "cli/commands.h"
#include "smla/formats.h"

namespace smla::cli {

Op parse_op(const std::string& flag, const std::string& v) {
  std::string all;
  for (Op op : {Op::sparse_decode, Op::sparse_prefill, Op::dense_decode, Op::merge_states, Op::write_cache,
                Op::gather_cache}) {
    if (v == op_name(op)) return op;
    all += (all.empty() ? "" : "|") + std::string(op_name(op));
  }
  throw UsageError("--" + flag + " must be one of " + all + ", got '" + v + "'");
}

CacheFormat parse_cache_format(const std::string& flag, const std::string& v) {
  CacheFormat f;
  if (parse_format(v.c_str(), &f)) return f;
  throw UsageError("--" + flag + " must be one of bf16|fp16|fp8_e4m3|fp8_ds_mla|fp8_model1, got '" + v + "'");
}

DType parse_q_dtype(const std::string& flag, const std::string& v) {
  if (v == "bf16" || v == "bfloat16") return DType::bf16;
  if (v == "fp16" || v == "float16") return DType::f16;
  if (v == "fp8_e4m3" || v == "float8_e4m3fn") return DType::fp8_e4m3;
  throw UsageError("--" + flag + " must be one of bf16|fp16|fp8_e4m3, got '" + v + "'");
}

uint64_t seed_from(const Args& a) {
  if (auto s = a.opt_integer("seed")) return static_cast<uint64_t>(*s);
  std::random_device rd;
  // Printed seeds stay short enough to retype.
  return (static_cast<uint64_t>(rd()) << 16 ^ rd()) & 0xffffffffffull;
}

bool cuda_usable() { return built_with_cuda() && cuda_device_available(); }

}  // namespace smla::cli
