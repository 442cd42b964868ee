// What each kernel family supports (SPEC §4.7). One table holds every (op, backend) row;
// why_not() and capabilities() both read it, so the answer and the listing cannot drift.
#include "smla/capabilities.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "smla/error.h"

#if SMLA_WITH_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace smla {

namespace {

constexpr int kUnbounded = std::numeric_limits<int>::max();

struct Range {
  int lo = 1;
  int hi = kUnbounded;  // inclusive
  bool contains(int v) const { return v >= lo && v <= hi; }
};

// A cache format the op reads, the key widths it takes in that format, and the query dtypes
// it pairs with (empty: the op has no query).
struct FormatRule {
  CacheFormat format;
  std::vector<int> d_qk;
  std::vector<DType> q_dtypes;
};

struct OpRule {
  Op op;
  Backend backend;
  std::vector<FormatRule> formats;  // empty: the op reads no cache
  std::optional<Range> h_q;
  std::optional<Range> h_kv;
  bool h_q_multiple_of_h_kv = false;
  std::optional<Range> page_size;
  std::optional<Range> topk;
  std::optional<Range> s_q;
  bool needs_cuda_build = false;
};

constexpr Range kAtLeast1{1, kUnbounded};
constexpr Range kOne{1, 1};
constexpr Range kCudaHeads{1, 128};  // two 64-head CTAs per query token at most
constexpr Range kCudaSq{1, 4};       // decode queries per request: 1, or 2-4 with MTP

const std::vector<FormatRule> kSparseDecodeFormats{
    {CacheFormat::fp8_ds_mla, {576}, {DType::bf16}},
    {CacheFormat::fp8_model1, {512}, {DType::bf16}},
    {CacheFormat::bf16, {576, 512}, {DType::bf16}},
};
// bf16 kv rows, or a paged cache in their place (any of the sparse-decode formats, any page
// size: the table's page_size stays unchecked for prefill).
const std::vector<FormatRule> kSparsePrefillFormats{
    {CacheFormat::bf16, {576, 512}, {DType::bf16}},
    {CacheFormat::fp8_ds_mla, {576}, {DType::bf16}},
    {CacheFormat::fp8_model1, {512}, {DType::bf16}},
};
const std::vector<FormatRule> kDenseDecodeFormats{
    {CacheFormat::bf16, {576, 512}, {DType::bf16}},
    {CacheFormat::fp16, {576, 512}, {DType::f16}},
    {CacheFormat::fp8_e4m3, {576, 512}, {DType::bf16, DType::fp8_e4m3}},
};
// Writers and readers: every format, at the widths its layout defines.
const std::vector<FormatRule> kAllFormats{
    {CacheFormat::bf16, {576, 512}, {}},       {CacheFormat::fp16, {576, 512}, {}},
    {CacheFormat::fp8_e4m3, {576, 512}, {}},   {CacheFormat::fp8_ds_mla, {576}, {}},
    {CacheFormat::fp8_model1, {512}, {}},
};

constexpr std::optional<Range> kNone = std::nullopt;

// The table. Edit a row to change what a backend supports; kNone: the op has no such
// parameter and ignores the config's value.
const std::vector<OpRule>& rules() {
  using enum Op;
  using enum Backend;
  static const std::vector<OpRule> table{
    // op              backend    formats                h_q         h_kv       h_q%h_kv  page_size  topk       s_q        CUDA build
      {sparse_decode,  cpu,       kSparseDecodeFormats,  kAtLeast1,  kOne,      false,    kAtLeast1, kAtLeast1, kAtLeast1, false},
      {sparse_prefill, cpu,       kSparsePrefillFormats, kAtLeast1,  kOne,      false,    kNone,     kAtLeast1, kAtLeast1, false},
      {dense_decode,   cpu,       kDenseDecodeFormats,   kAtLeast1,  kAtLeast1, true,     kAtLeast1, kNone,     kAtLeast1, false},
      {merge_states,   cpu,       {},                    kAtLeast1,  kNone,     false,    kNone,     kNone,     kNone,     false},
      {write_cache,    cpu,       kAllFormats,           kNone,      kOne,      false,    kAtLeast1, kNone,     kNone,     false},
      {gather_cache,   cpu,       kAllFormats,           kNone,      kOne,      false,    kAtLeast1, kNone,     kNone,     false},
      {sparse_decode,  cuda_sm90, kSparseDecodeFormats,  kCudaHeads, kOne,      false,    kAtLeast1, kAtLeast1, kCudaSq,   true},
      {sparse_prefill, cuda_sm90, kSparsePrefillFormats, kCudaHeads, kOne,      false,    kNone,     kAtLeast1, kAtLeast1, true},
      {dense_decode,   cuda_sm90, kDenseDecodeFormats,   kCudaHeads, kAtLeast1, true,     kAtLeast1, kNone,     kCudaSq,   true},
      {merge_states,   cuda_sm90, {},                    kAtLeast1,  kNone,     false,    kNone,     kNone,     kNone,     true},
      {write_cache,    cuda_sm90, kAllFormats,           kNone,      kOne,      false,    kAtLeast1, kNone,     kNone,     true},
      {gather_cache,   cuda_sm90, kAllFormats,           kNone,      kOne,      false,    kAtLeast1, kNone,     kNone,     true},
  };
  return table;
}

const OpRule* find_rule(Op op, Backend backend) {
  for (const OpRule& r : rules())
    if (r.op == op && r.backend == backend) return &r;
  return nullptr;
}

template <typename T, typename Name>
std::string join_or(const std::vector<T>& items, Name name) {
  std::string s;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) s += (i + 1 == items.size()) ? " or " : ", ";
    s += name(items[i]);
  }
  return s;
}

std::string int_name(int v) { return std::to_string(v); }

std::string range_text(Range r) {
  if (r.lo == r.hi) return std::to_string(r.lo);
  if (r.hi == kUnbounded) return "at least " + std::to_string(r.lo);
  return "between " + std::to_string(r.lo) + " and " + std::to_string(r.hi);
}

const char* architecture(Backend b) {
  return b == Backend::cpu ? "any x86-64/arm64 CPU" : "sm_90a (H100, H200)";
}

Unsupported make_unsupported(std::string argument, std::string expected, std::string given) {
  std::string s = argument + " must be " + expected + ", got " + given;
  return {std::move(argument), std::move(expected), std::move(given), std::move(s)};
}

// "<parameter> must be <requirement> for <backend> <op>[ with format F], got <value>"
Unsupported sentence(const std::string& param, const std::string& requirement, const OpRule& r,
                     const std::string& given, const FormatRule* f = nullptr) {
  std::string req = requirement + " for " + backend_name(r.backend) + " " + op_name(r.op);
  if (f) req += std::string(" with format ") + format_name(f->format);
  return make_unsupported(param, req, given);
}

std::optional<Unsupported> check_range(const char* param, const std::optional<Range>& range, int value,
                                       const OpRule& r) {
  if (range && !range->contains(value)) return sentence(param, range_text(*range), r, std::to_string(value));
  return std::nullopt;
}

}  // namespace

const char* op_name(Op op) {
  switch (op) {
    case Op::sparse_decode: return "sparse_decode";
    case Op::sparse_prefill: return "sparse_prefill";
    case Op::dense_decode: return "dense_decode";
    case Op::merge_states: return "merge_states";
    case Op::write_cache: return "write_cache";
    case Op::gather_cache: return "gather_cache";
  }
  return "?";
}

const char* backend_name(Backend b) {
  switch (b) {
    case Backend::cpu: return "cpu";
    case Backend::cuda_sm90: return "cuda_sm90";
  }
  return "?";
}

std::optional<Unsupported> check_support(const KernelConfig& c) {
  const OpRule* r = find_rule(c.op, c.backend);
  if (!r) {
    if (backend_name(c.backend)[0] == '?')
      return make_unsupported("backend", "cpu or cuda_sm90", std::to_string(static_cast<int>(c.backend)));
    return make_unsupported("op",
                            "one of sparse_decode, sparse_prefill, dense_decode, merge_states, write_cache or "
                            "gather_cache",
                            std::to_string(static_cast<int>(c.op)));
  }
  if (!r->formats.empty()) {
    const FormatRule* f = nullptr;
    for (const FormatRule& fr : r->formats)
      if (fr.format == c.format) f = &fr;
    if (!f)
      return sentence("format", join_or(r->formats, [](const FormatRule& x) { return format_name(x.format); }), *r,
                      format_name(c.format));
    bool d_ok = false;
    for (int d : f->d_qk) d_ok |= (d == c.d_qk);
    if (!d_ok) return sentence("d_qk", join_or(f->d_qk, int_name), *r, std::to_string(c.d_qk), f);
    if (!f->q_dtypes.empty()) {
      bool q_ok = false;
      for (DType q : f->q_dtypes) q_ok |= (q == c.q_dtype);
      if (!q_ok) return sentence("q_dtype", join_or(f->q_dtypes, dtype_name), *r, dtype_name(c.q_dtype), f);
    }
  }
  if (auto m = check_range("h_q", r->h_q, c.h_q, *r)) return m;
  if (auto m = check_range("h_kv", r->h_kv, c.h_kv, *r)) return m;
  if (r->h_q_multiple_of_h_kv && c.h_q % c.h_kv != 0)
    return sentence("h_q", "a multiple of h_kv = " + std::to_string(c.h_kv), *r, std::to_string(c.h_q));
  if (auto m = check_range("page_size", r->page_size, c.page_size, *r)) return m;
  if (auto m = check_range("topk", r->topk, c.topk, *r)) return m;
  if (auto m = check_range("s_q", r->s_q, c.s_q, *r)) return m;
  // Checked last so that a configuration the backend could never run is named as such
  // even in a build without the backend.
  if (r->needs_cuda_build && !built_with_cuda()) {
    Unsupported u{"backend", "cpu (this build has no CUDA)", backend_name(r->backend), ""};
    u.sentence = std::string("backend ") + backend_name(r->backend) + " requires a build with CUDA, this build has none";
    return u;
  }
  return std::nullopt;
}

std::optional<std::string> why_not(const KernelConfig& c) {
  if (auto u = check_support(c)) return u->sentence;
  return std::nullopt;
}

std::vector<Capability> capabilities() {
  std::vector<Capability> out;
  for (const OpRule& r : rules()) {
    Capability c{};
    c.op = r.op;
    c.backend = r.backend;
    c.architectures = architecture(r.backend);
    if (r.formats.empty()) {
      c.q_dtypes = c.formats = c.d_qk = "-";
    } else {
      std::vector<int> widths;
      bool same_q = true;
      for (const FormatRule& f : r.formats) {
        for (int d : f.d_qk)
          if (std::find(widths.begin(), widths.end(), d) == widths.end()) widths.push_back(d);
        same_q &= (f.q_dtypes == r.formats[0].q_dtypes);
      }
      c.d_qk = join_or(widths, int_name);
      c.formats = join_or(r.formats, [](const FormatRule& f) {
        return std::string(format_name(f.format)) + " (d_qk " + join_or(f.d_qk, int_name) + ")";
      });
      if (r.formats[0].q_dtypes.empty()) {
        c.q_dtypes = "-";
      } else if (same_q) {
        c.q_dtypes = join_or(r.formats[0].q_dtypes, dtype_name);
      } else {
        c.q_dtypes.clear();
        for (const FormatRule& f : r.formats)
          c.q_dtypes += (c.q_dtypes.empty() ? "" : "; ") + std::string(format_name(f.format)) + ": " +
                        join_or(f.q_dtypes, dtype_name);
      }
    }
    c.h_q = r.h_q ? range_text(*r.h_q) : "-";
    if (r.h_q_multiple_of_h_kv) c.h_q += ", a multiple of h_kv";
    if (r.h_kv) c.h_q += " (h_kv " + range_text(*r.h_kv) + ")";
    c.page_sizes = r.page_size ? range_text(*r.page_size) : "-";
    c.topk = r.topk ? range_text(*r.topk) : "-";
    c.s_q = r.s_q ? range_text(*r.s_q) : "-";
    out.push_back(std::move(c));
  }
  return out;
}

bool built_with_cuda() {
#if SMLA_WITH_CUDA
  return true;
#else
  return false;
#endif
}

bool cuda_device_available() {
#if SMLA_WITH_CUDA
  try {
    return cuda::device_available();
  } catch (const std::exception&) {
    return false;  // a query, not an operation: a broken runtime means "no device"
  }
#else
  return false;
#endif
}

}  // namespace smla
