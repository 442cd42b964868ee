#include <algorithm>
#include <random>

#include "cli/commands.h"
#include "smla/formats.h"

namespace smla::cli {

std::vector<Op> caps_ops() {
  // Read from the library's table, so an operation added there is listed without a CLI change.
  std::vector<Op> ops;
  for (const Capability& c : capabilities())
    if (std::find(ops.begin(), ops.end(), c.op) == ops.end()) ops.push_back(c.op);
  return ops;
}

std::vector<CacheFormat> all_formats() {
  return {CacheFormat::bf16, CacheFormat::fp16, CacheFormat::fp8_e4m3, CacheFormat::fp8_ds_mla,
          CacheFormat::fp8_model1};
}

namespace {

template <typename T, typename Name>
std::string join_or(const std::vector<T>& items, Name name) {
  std::string s;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) s += i + 1 == items.size() ? " or " : ", ";
    s += name(items[i]);
  }
  return s;
}

}  // namespace

std::string op_list(const std::vector<Op>& ops) { return join_or(ops, op_name); }

std::string format_list() { return join_or(all_formats(), format_name); }

Op parse_op(const std::string& flag, const std::string& v, const std::vector<Op>& accepted,
            const std::string& which) {
  for (Op op : accepted)
    if (v == op_name(op)) return op;
  throw UsageError("--" + flag + " must be one of " + op_list(accepted) + " (" + which + "), got '" + v + "'");
}

CacheFormat parse_cache_format(const std::string& flag, const std::string& v) {
  CacheFormat f;
  if (parse_format(v.c_str(), &f)) return f;
  throw UsageError("--" + flag + " must be one of " + format_list() + ", got '" + v + "'");
}

DType parse_q_dtype(const std::string& flag, const std::string& v) {
  if (v == "bf16" || v == "bfloat16") return DType::bf16;
  if (v == "fp16" || v == "float16") return DType::f16;
  if (v == "fp8_e4m3" || v == "float8_e4m3fn") return DType::fp8_e4m3;
  throw UsageError("--" + flag + " must be one of bf16, fp16 or fp8_e4m3, got '" + v + "'");
}

uint64_t seed_from(const Args& a) {
  if (auto s = a.opt_integer("seed")) return static_cast<uint64_t>(*s);
  std::random_device rd;
  // Printed seeds stay short enough to retype.
  return (static_cast<uint64_t>(rd()) << 16 ^ rd()) & 0xffffffffffull;
}

bool cuda_usable() { return built_with_cuda() && cuda_device_available(); }

}  // namespace smla::cli
