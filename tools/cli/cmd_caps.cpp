// `smla caps`: what each kernel family supports, and why a given configuration is not.
#include <algorithm>
#include <cstdint>
#include <iostream>

#include "cli/buffer.h"
#include "cli/commands.h"

namespace smla::cli {
namespace {

const std::vector<FlagSpec> kFlags = {
    {"op", "NAME", "sparse_decode, sparse_prefill, dense_decode, merge_states, write_cache or gather_cache"},
    {"format", "NAME", "bf16, fp16, fp8_e4m3, fp8_ds_mla or fp8_model1"},
    {"q_dtype", "NAME", "bf16, fp16 or fp8_e4m3"},
    {"d_qk", "N", "576 or 512"},
    {"h_q", "N", "query heads"},
    {"h_kv", "N", "key heads (dense_decode)"},
    {"page", "N", "page size in tokens"},
    {"topk", "N", "keys per query (sparse ops)"},
    {"s_q", "N", "query tokens per request"},
};

const char* kUsage =
    "usage: smla caps [--op NAME --format NAME --q_dtype NAME --d_qk N --h_q N --h_kv N --page N --topk N --s_q N]\n"
    "\n"
    "Without flags: the capability table of every kernel family. With any configuration flag:\n"
    "whether each backend supports that configuration (unset fields take KernelConfig's defaults:\n"
    "sparse_decode, bf16, q bf16, d_qk 576, h_q 128, h_kv 1, page 64, topk 2048, s_q 1), and why not.\n"
    "\n";

int as_int(const Args& a, const std::string& name, int fallback) {
  const int64_t v = a.integer(name, fallback);
  if (v < INT32_MIN || v > INT32_MAX) throw UsageError("--" + name + " is out of range: " + std::to_string(v));
  return static_cast<int>(v);
}

void print_header() {
  std::cout << "built with CUDA: " << (built_with_cuda() ? "yes" : "no")
            << "; CUDA device: " << (cuda_usable() ? cuda_device_description() : "none usable") << "\n\n";
}

void print_capabilities() {
  const std::vector<std::string> head{"operation", "backend", "architectures", "q dtypes", "formats",
                                      "d_qk",      "h_q",     "page sizes",    "topk",     "s_q"};
  std::vector<std::vector<std::string>> cells;
  for (const Capability& c : capabilities())
    cells.push_back({op_name(c.op), backend_name(c.backend), c.architectures, c.q_dtypes, c.formats, c.d_qk, c.h_q,
                     c.page_sizes, c.topk, c.s_q});
  std::vector<size_t> width(head.size());
  for (size_t k = 0; k < head.size(); ++k) {
    width[k] = head[k].size();
    for (const auto& r : cells) width[k] = std::max(width[k], r[k].size());
  }
  auto line = [&](const std::vector<std::string>& v) {
    std::cout << "|";
    for (size_t k = 0; k < v.size(); ++k) std::cout << " " << v[k] << std::string(width[k] - v[k].size(), ' ') << " |";
    std::cout << "\n";
  };
  line(head);
  std::cout << "|";
  for (size_t w : width) std::cout << std::string(w + 2, '-') << "|";
  std::cout << "\n";
  for (const auto& r : cells) line(r);
}

}  // namespace

int cmd_caps(const std::vector<std::string>& argv) {
  const Args a = Args::parse(argv, kFlags);
  if (a.help()) {
    std::cout << kUsage << "flags:\n" << flags_help(kFlags);
    return 0;
  }
  if (a.given().empty()) {
    print_header();
    print_capabilities();
    return 0;
  }
  KernelConfig c;
  if (a.has("op")) c.op = parse_op("op", a.str("op", ""));
  if (a.has("format")) c.format = parse_cache_format("format", a.str("format", ""));
  if (a.has("q_dtype")) c.q_dtype = parse_q_dtype("q_dtype", a.str("q_dtype", ""));
  c.d_qk = as_int(a, "d_qk", c.d_qk);
  c.h_q = as_int(a, "h_q", c.h_q);
  c.h_kv = as_int(a, "h_kv", c.h_kv);
  c.page_size = as_int(a, "page", c.page_size);
  c.topk = as_int(a, "topk", c.topk);
  c.s_q = as_int(a, "s_q", c.s_q);
  print_header();
  std::cout << op_name(c.op) << ": format " << format_name(c.format) << ", q " << dtype_name(c.q_dtype) << ", d_qk "
            << c.d_qk << ", h_q " << c.h_q << ", h_kv " << c.h_kv << ", page " << c.page_size << ", topk " << c.topk
            << ", s_q " << c.s_q << "\n";
  for (Backend b : {Backend::cpu, Backend::cuda_sm90}) {
    c.backend = b;
    const auto why = why_not(c);
    std::cout << "  " << backend_name(b) << ": " << (why ? "not supported: " + *why : std::string("supported")) << "\n";
  }
  return 0;
}

}  // namespace smla::cli
