// `smla caps`: what each kernel family supports, and why a given configuration is not; as
// text or, with --json, as JSON for scripts.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <iostream>
#include <optional>

#include "cli/buffer.h"
#include "cli/commands.h"
#include "cli/report.h"

namespace smla::cli {
namespace {

const std::vector<FlagSpec>& flags() {
  static const std::vector<FlagSpec> f = {
      {"op", "NAME", op_list(caps_ops())},
      {"format", "NAME", format_list()},
      {"q_dtype", "NAME", "bf16, fp16 or fp8_e4m3"},
      {"d_qk", "N", "576 or 512"},
      {"h_q", "N", "query heads"},
      {"h_kv", "N", "key heads (dense_decode)"},
      {"page", "N", "page size in tokens"},
      {"topk", "N", "keys per query (sparse ops)"},
      {"s_q", "N", "query tokens per request"},
      {"json", "", "print JSON instead of text (the capability list, or the verdict on the configuration)"},
  };
  return f;
}

const char* kUsage =
    "usage: smla caps [--json] [--op NAME --format NAME --q_dtype NAME --d_qk N --h_q N --h_kv N --page N\n"
    "                 --topk N --s_q N]\n"
    "\n"
    "Without configuration flags: what every (operation, backend) pair supports. With any of them:\n"
    "whether each backend supports that configuration (unset fields take KernelConfig's defaults:\n"
    "sparse_decode, bf16, q bf16, d_qk 576, h_q 128, h_kv 1, page 64, topk 2048, s_q 1), and why not.\n"
    "--json prints the same as one JSON object: ranges as {\"min\", \"max\"} (null max: unbounded; a\n"
    "null range: the operation has no such parameter), each format with its key widths and query\n"
    "dtypes; the verdict with the argument, expected and given value of a refusal.\n"
    "\n";

int as_int(const Args& a, const std::string& name, int fallback) {
  const int64_t v = a.integer(name, fallback);
  if (v < INT32_MIN || v > INT32_MAX)
    throw UsageError("--" + name + " must be a 32-bit integer, got " + std::to_string(v));
  return static_cast<int>(v);
}

std::string bool_json(bool b) { return b ? "true" : "false"; }

// ---- the capability list, probed through check_support ----
//
// capabilities() describes each (op, backend) in words; the JSON gives numbers and lists,
// found by asking check_support, the library's own judge, about candidate configurations.

// The probes hold every other parameter at an accepted value, so a refusal naming another
// parameter is the build (no CUDA) or h_q not a multiple of h_kv: `param` itself passed.
bool passes(const KernelConfig& c, const std::string& param) {
  const auto u = check_support(c);
  return !u || u->argument != param;
}

struct FormatSupport {
  CacheFormat format;
  std::vector<int> d_qk;
  std::vector<DType> q_dtypes;  // empty: the op takes no query
};

// The key widths the formats define (SPEC §2) and the query dtypes an op may take.
const std::vector<int> kWidths{576, 512};
const std::vector<DType> kQueryDtypes{DType::bf16, DType::f16, DType::fp8_e4m3};

// Empty optional: the op reads no cache (it accepts any format, even at a width none has).
std::optional<std::vector<FormatSupport>> probe_formats(KernelConfig c) {
  bool any_refused = false;
  for (CacheFormat f : all_formats()) {
    c.format = f;
    c.d_qk = 1;
    any_refused |= !passes(c, "format") || !passes(c, "d_qk");
  }
  if (!any_refused) return std::nullopt;
  std::vector<FormatSupport> out;
  for (CacheFormat f : all_formats()) {
    c.format = f;
    FormatSupport s{f, {}, {}};
    for (int d : kWidths) {
      c.d_qk = d;
      c.q_dtype = DType::bf16;
      if (!passes(c, "format") || !passes(c, "d_qk")) continue;
      s.d_qk.push_back(d);
      // float32 is never a query dtype: when it passes, the op takes no query.
      c.q_dtype = DType::f32;
      if (passes(c, "q_dtype")) continue;
      for (DType q : kQueryDtypes) {
        c.q_dtype = q;
        if (passes(c, "q_dtype") && std::find(s.q_dtypes.begin(), s.q_dtypes.end(), q) == s.q_dtypes.end())
          s.q_dtypes.push_back(q);
      }
    }
    if (!s.d_qk.empty()) out.push_back(s);
  }
  return out;
}

int& field(KernelConfig& c, const std::string& param) {
  if (param == "h_q") return c.h_q;
  if (param == "h_kv") return c.h_kv;
  if (param == "page_size") return c.page_size;
  if (param == "topk") return c.topk;
  return c.s_q;
}

struct Range {
  int min = 1;
  std::optional<int> max;  // none: unbounded
};

// Empty optional: the op has no such parameter (it accepts 0, below every range).
std::optional<Range> probe_range(KernelConfig c, const std::string& param) {
  int& v = field(c, param);
  v = 0;
  if (passes(c, param)) return std::nullopt;
  Range r;
  // Ranges are intervals starting at small values; the first accepted one is the minimum.
  for (v = 1; v <= 4096 && !passes(c, param); ++v) {
  }
  r.min = v;
  v = INT_MAX;
  if (passes(c, param)) return r;
  int lo = r.min, hi = INT_MAX;  // passes at lo, not at hi
  while (hi - lo > 1) {
    v = lo + (hi - lo) / 2;
    (passes(c, param) ? lo : hi) = v;
  }
  r.max = lo;
  return r;
}

std::string range_json(const std::optional<Range>& r) {
  if (!r) return "null";
  return "{\"min\": " + std::to_string(r->min) + ", \"max\": " + (r->max ? std::to_string(*r->max) : "null") + "}";
}

// The library's wording ("at least 1", "between 1 and 128"); "-" when there is no such parameter.
std::string range_text(const std::optional<Range>& r) {
  if (!r) return "-";
  if (r->max && *r->max == r->min) return std::to_string(r->min);
  if (r->max) return "between " + std::to_string(r->min) + " and " + std::to_string(*r->max);
  return "at least " + std::to_string(r->min);
}

// One (op, backend) pair: the library's words and the probed numbers.
struct CapInfo {
  Capability cap;
  std::optional<std::vector<FormatSupport>> formats;
  std::optional<Range> h_q, h_kv, page_size, topk, s_q;
  bool h_q_multiple_of_h_kv = false;
};

CapInfo probe(const Capability& cap) {
  CapInfo i{cap, {}, {}, {}, {}, {}, {}, false};
  KernelConfig c;
  c.op = cap.op;
  c.backend = cap.backend;
  i.formats = probe_formats(c);
  // Ranges are probed at a configuration the format checks accept, so only the range refuses.
  if (i.formats && !i.formats->empty()) {
    c.format = i.formats->front().format;
    c.d_qk = i.formats->front().d_qk.front();
    if (!i.formats->front().q_dtypes.empty()) c.q_dtype = i.formats->front().q_dtypes.front();
  }
  i.h_q = probe_range(c, "h_q");
  i.h_kv = probe_range(c, "h_kv");
  i.page_size = probe_range(c, "page_size");
  i.topk = probe_range(c, "topk");
  i.s_q = probe_range(c, "s_q");
  // h_q must be a multiple of h_kv when 3 heads are refused over 2 key heads and 4 accepted.
  c.h_kv = 2;
  c.h_q = 3;
  const bool refuses_3 = !passes(c, "h_q");
  c.h_q = 4;
  i.h_q_multiple_of_h_kv = refuses_3 && passes(c, "h_q") && passes(c, "h_kv");
  return i;
}

// The backends the library names, in its order.
std::vector<Backend> backends() {
  std::vector<Backend> out;
  for (const Capability& c : capabilities())
    if (std::find(out.begin(), out.end(), c.backend) == out.end()) out.push_back(c.backend);
  return out;
}

bool in_this_build(Backend b) { return b == Backend::cpu || built_with_cuda(); }

std::string header_json() {
  return "  \"built_with_cuda\": " + bool_json(built_with_cuda()) + ",\n  \"cuda_device\": " +
         (cuda_usable() ? json_string(cuda_device_description()) : "null") + ",\n  \"cpu\": " +
         json_string(cpu_description()) + ",\n";
}

std::string formats_json(const std::optional<std::vector<FormatSupport>>& formats) {
  if (!formats) return "null";
  std::string fj = "[";
  for (size_t k = 0; k < formats->size(); ++k) {
    const FormatSupport& f = (*formats)[k];
    std::string d, q;
    for (int w : f.d_qk) d += (d.empty() ? "" : ", ") + std::to_string(w);
    for (DType t : f.q_dtypes) q += (q.empty() ? "" : ", ") + json_string(dtype_name(t));
    fj += std::string(k ? ", " : "") + "{\"format\": " + json_string(format_name(f.format)) + ", \"d_qk\": [" + d +
          "], \"q_dtypes\": " + (f.q_dtypes.empty() ? "null" : "[" + q + "]") + "}";
  }
  return fj + "]";
}

void print_capabilities_json() {
  std::string ops, bks;
  for (Op op : caps_ops()) ops += (ops.empty() ? "" : ", ") + json_string(op_name(op));
  for (Backend b : backends()) bks += (bks.empty() ? "" : ", ") + json_string(backend_name(b));
  std::cout << "{\n" << header_json() << "  \"operations\": [" << ops << "],\n  \"backends\": [" << bks
            << "],\n  \"capabilities\": [";
  bool first = true;
  for (const Capability& cap : capabilities()) {
    const CapInfo i = probe(cap);
    std::cout << (first ? "" : ",") << "\n    {\"op\": " << json_string(op_name(cap.op))
              << ", \"backend\": " << json_string(backend_name(cap.backend))
              << ", \"in_this_build\": " << bool_json(in_this_build(cap.backend))
              << ", \"architectures\": " << json_string(cap.architectures)
              << ",\n     \"formats\": " << formats_json(i.formats) << ",\n     \"h_q\": " << range_json(i.h_q)
              << ", \"h_kv\": " << range_json(i.h_kv)
              << ", \"h_q_multiple_of_h_kv\": " << bool_json(i.h_q_multiple_of_h_kv)
              << ", \"page_size\": " << range_json(i.page_size) << ", \"topk\": " << range_json(i.topk)
              << ", \"s_q\": " << range_json(i.s_q) << ",\n     \"text\": {\"formats\": " << json_string(cap.formats)
              << ", \"q_dtypes\": " << json_string(cap.q_dtypes) << ", \"d_qk\": " << json_string(cap.d_qk)
              << ", \"h_q\": " << json_string(cap.h_q) << ", \"page_sizes\": " << json_string(cap.page_sizes)
              << ", \"topk\": " << json_string(cap.topk) << ", \"s_q\": " << json_string(cap.s_q) << "}}";
    first = false;
  }
  std::cout << "\n  ]\n}\n";
}

// ---- text ----

void print_header() {
  std::cout << "built with CUDA: " << (built_with_cuda() ? "yes" : "no")
            << "; CUDA device: " << (cuda_usable() ? cuda_device_description() : "none usable") << "\n";
}

// "    label       value", wrapped; nothing when the operation has no such parameter.
void print_field(const std::string& label, const std::string& value) {
  if (value == "-") return;
  std::cout << wrap("    " + label + std::string(12 - std::min<size_t>(label.size(), 11), ' '), value, ", ");
}

// One block per operation, one sub-block per backend: as a table the ten columns ran to over
// 300 characters a line.
void print_capabilities() {
  std::vector<CapInfo> infos;
  for (const Capability& c : capabilities()) infos.push_back(probe(c));
  for (Op op : caps_ops()) {
    std::cout << "\n" << op_name(op) << "\n";
    for (const CapInfo& i : infos) {
      if (i.cap.op != op) continue;
      std::cout << "  " << backend_name(i.cap.backend) << ": " << i.cap.architectures
                << (in_this_build(i.cap.backend) ? "" : " (not in this build)") << "\n";
      print_field("formats", i.cap.formats);
      print_field("q dtypes", i.cap.q_dtypes);
      print_field("h_q", range_text(i.h_q) + (i.h_q && i.h_q_multiple_of_h_kv ? ", a multiple of h_kv" : ""));
      print_field("h_kv", range_text(i.h_kv));
      print_field("page size", range_text(i.page_size));
      print_field("topk", range_text(i.topk));
      print_field("s_q", range_text(i.s_q));
    }
  }
}

}  // namespace

int cmd_caps(const std::vector<std::string>& argv) {
  const Args a = Args::parse(argv, flags());
  if (a.help()) {
    std::cout << kUsage << "flags:\n" << flags_help(flags());
    return 0;
  }
  const bool json = a.flag("json");
  std::vector<std::string> config_flags = a.given();
  config_flags.erase(std::remove(config_flags.begin(), config_flags.end(), "json"), config_flags.end());
  if (config_flags.empty()) {
    if (json) {
      print_capabilities_json();
    } else {
      print_header();
      print_capabilities();
    }
    return 0;
  }
  KernelConfig c;
  if (a.has("op")) c.op = parse_op("op", a.str("op", ""), caps_ops(), "the operations of the library");
  if (a.has("format")) c.format = parse_cache_format("format", a.str("format", ""));
  if (a.has("q_dtype")) c.q_dtype = parse_q_dtype("q_dtype", a.str("q_dtype", ""));
  c.d_qk = as_int(a, "d_qk", c.d_qk);
  c.h_q = as_int(a, "h_q", c.h_q);
  c.h_kv = as_int(a, "h_kv", c.h_kv);
  c.page_size = as_int(a, "page", c.page_size);
  c.topk = as_int(a, "topk", c.topk);
  c.s_q = as_int(a, "s_q", c.s_q);
  if (json) {
    std::cout << "{\n" << header_json() << "  \"config\": {\"op\": " << json_string(op_name(c.op))
              << ", \"format\": " << json_string(format_name(c.format)) << ", \"q_dtype\": "
              << json_string(dtype_name(c.q_dtype)) << ", \"d_qk\": " << c.d_qk << ", \"h_q\": " << c.h_q
              << ", \"h_kv\": " << c.h_kv << ", \"page_size\": " << c.page_size << ", \"topk\": " << c.topk
              << ", \"s_q\": " << c.s_q << "},\n  \"backends\": [";
  } else {
    print_header();
    std::cout << op_name(c.op) << ": format " << format_name(c.format) << ", q " << dtype_name(c.q_dtype)
              << ", d_qk " << c.d_qk << ", h_q " << c.h_q << ", h_kv " << c.h_kv << ", page " << c.page_size
              << ", topk " << c.topk << ", s_q " << c.s_q << "\n";
  }
  bool first = true;
  for (Backend b : backends()) {
    c.backend = b;
    const auto u = check_support(c);
    if (json) {
      std::cout << (first ? "" : ",") << "\n    {\"backend\": " << json_string(backend_name(b))
                << ", \"supported\": " << bool_json(!u);
      if (u)
        std::cout << ", \"why\": " << json_string(u->sentence) << ", \"argument\": " << json_string(u->argument)
                  << ", \"expected\": " << json_string(u->expected) << ", \"given\": " << json_string(u->given);
      std::cout << "}";
    } else {
      std::cout << "  " << backend_name(b) << ": " << (u ? "not supported: " + u->sentence : "supported") << "\n";
    }
    first = false;
  }
  if (json) std::cout << "\n  ]\n}\n";
  return 0;
}

}  // namespace smla::cli
