// `smla bench`: time one configuration of one operation on one backend, judge sampled rows
// against the float64 recomputation, print one table row (and optionally JSON).
#include <algorithm>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/measure.h"
#include "cli/report.h"
#include "smla/error.h"

namespace smla::cli {
namespace {

const std::vector<FlagSpec> kFlags = {
    {"op", "NAME", "sparse_decode (default), sparse_prefill, dense_decode or merge_states"},
    {"backend", "NAME", "cuda or cpu (default: cuda when a device is present)"},
    {"b", "N", "requests (default 128 on CUDA, 2 on the CPU); merge_states merges b*s_q tokens"},
    {"s_q", "N", "query tokens per request (default 1); sparse_prefill: query tokens (default 4096 / 8 on CPU)"},
    {"h_q", "N", "query heads (default 128)"},
    {"topk", "N", "keys per query (default 2048; with --window the window length)"},
    {"format", "NAME", "cache format (sparse_decode: fp8_ds_mla, dense_decode: bf16 by default)"},
    {"d_qk", "N", "576 or 512 for bf16/fp16/fp8_e4m3 data (packed formats imply theirs; default 576)"},
    {"page", "N", "page size in tokens (default 64)"},
    {"seqlen", "N", "tokens per request: sparse_decode's cache region (default 32768), dense_decode's context (4096)"},
    {"s_kv", "N", "sparse_prefill: rows of kv (default 8192)"},
    {"window", "", "sparse_decode: main keys are the last topk positions (V4's sliding window)"},
    {"extra_topk", "N", "sparse_decode: keys from a second cache of the same format (default 0: none)"},
    {"extra_page", "N", "sparse_decode: page size of the second cache (default 64)"},
    {"extra_seqlen", "N", "sparse_decode: second-cache region per request (default 8192)"},
    {"sink", "", "with an attention sink per head"},
    {"non_causal", "", "dense_decode: every query token sees the whole context"},
    {"parts", "N", "merge_states: partial results per row (default 4)"},
    {"iters", "N", "timed calls, median reported (default 90 on CUDA, 3 on the CPU)"},
    {"warmup", "N", "untimed calls first (default 5 on CUDA, 1 on the CPU)"},
    {"check_rows", "N", "rows judged against the float64 recomputation (default 8; 0: none)"},
    {"seed", "N", "input seed (default: fresh each run, printed)"},
    {"eager", "", "CUDA: time plain calls instead of CUDA-graph replays"},
    {"json", "FILE", "also write the result as JSON"},
};

const char* kUsage =
    "usage: smla bench --op NAME [config flags] [--backend cuda|cpu] [--iters N] [--warmup N] [--json FILE]\n"
    "\n"
    "Times one configuration: median of --iters calls after --warmup; on CUDA, replays of the call\n"
    "captured in a CUDA graph (--eager: plain calls), events around each and a 512 MB memset before\n"
    "it (cold L2), as ANCHORS.md measured FlashMLA. FLOPs and bytes as SPEC §7 counts them.\n"
    "\n";

int positive(const Args& a, const std::string& name, int64_t fallback) {
  const int64_t v = a.integer(name, fallback);
  if (v < 1) throw UsageError("--" + name + " must be >= 1, got " + std::to_string(v));
  if (v > (int64_t(1) << 31) - 1) throw UsageError("--" + name + " is too large: " + std::to_string(v));
  return static_cast<int>(v);
}

// A configuration flag another operation uses is a mistake worth stopping for.
void reject_unused(const Args& a, Op op) {
  static const std::vector<std::string> common{"op", "backend", "iters", "warmup", "check_rows", "seed", "json", "eager"};
  std::vector<std::string> used;
  switch (op) {
    case Op::sparse_decode:
      used = {"b", "s_q", "h_q", "topk", "format", "d_qk", "page", "seqlen", "window", "extra_topk", "extra_page",
              "extra_seqlen", "sink"};
      break;
    case Op::sparse_prefill: used = {"s_q", "h_q", "d_qk", "topk", "s_kv", "sink", "format"}; break;
    case Op::dense_decode: used = {"b", "s_q", "h_q", "d_qk", "format", "page", "seqlen", "sink", "non_causal"}; break;
    case Op::merge_states: used = {"b", "s_q", "h_q", "parts", "sink"}; break;
    default: return;  // build() names the operations it times
  }
  for (const std::string& g : a.given()) {
    if (std::find(common.begin(), common.end(), g) == common.end() && std::find(used.begin(), used.end(), g) == used.end())
      throw UsageError("--" + g + " does not apply to --op " + op_name(op));
  }
}

std::unique_ptr<Workload> build(const Args& a, Op op, bool cuda, uint64_t seed) {
  reject_unused(a, op);
  const int64_t b = positive(a, "b", cuda ? 128 : 2);
  const int h_q = positive(a, "h_q", 128);
  const bool sink = a.flag("sink");
  switch (op) {
    case Op::sparse_decode: {
      SparseDecodeSpec s;
      s.b = b;
      s.s_q = positive(a, "s_q", 1);
      s.h_q = h_q;
      s.topk = positive(a, "topk", 2048);
      s.format = parse_cache_format("format", a.str("format", "fp8_ds_mla"));
      s.d_qk = positive(a, "d_qk", 576);
      s.page = positive(a, "page", 64);
      s.region = positive(a, "seqlen", 32768);
      s.window = a.flag("window");
      s.extra_topk = a.has("extra_topk") ? positive(a, "extra_topk", 1) : 0;
      s.extra_page = positive(a, "extra_page", 64);
      s.extra_region = positive(a, "extra_seqlen", 8192);
      s.sink = sink;
      return make_sparse_decode(s, seed);
    }
    case Op::sparse_prefill: {
      SparsePrefillSpec s;
      s.s_q = positive(a, "s_q", cuda ? 4096 : 8);
      s.h_q = h_q;
      s.d_qk = positive(a, "d_qk", 576);
      s.topk = positive(a, "topk", 2048);
      s.s_kv = positive(a, "s_kv", 8192);
      s.sink = sink;
      if (a.has("format") && parse_cache_format("format", a.str("format", "")) != CacheFormat::bf16)
        throw UsageError("sparse_prefill reads a bf16 kv: --format must be bf16");
      return make_sparse_prefill(s, seed);
    }
    case Op::dense_decode: {
      DenseDecodeSpec s;
      s.b = b;
      s.s_q = positive(a, "s_q", 1);
      s.h_q = h_q;
      s.d_qk = positive(a, "d_qk", 576);
      s.format = parse_cache_format("format", a.str("format", "bf16"));
      s.page = positive(a, "page", 64);
      s.seqlen = positive(a, "seqlen", 4096);
      s.causal = !a.flag("non_causal");
      s.sink = sink;
      return make_dense_decode(s, seed);
    }
    case Op::merge_states: {
      MergeStatesSpec s;
      s.tokens = b * positive(a, "s_q", 1);
      s.h = h_q;
      s.parts = positive(a, "parts", 4);
      s.sink = sink;
      return make_merge_states(s, seed);
    }
    default:
      throw UsageError(std::string("smla bench times sparse_decode, sparse_prefill, dense_decode or merge_states, not ") +
                       op_name(op));
  }
}

}  // namespace

int cmd_bench(const std::vector<std::string>& argv) {
  const Args a = Args::parse(argv, kFlags);
  if (a.help()) {
    std::cout << kUsage << "flags:\n" << flags_help(kFlags);
    return 0;
  }
  const Op op = parse_op("op", a.str("op", "sparse_decode"));
  const std::string bname = a.str("backend", cuda_usable() ? "cuda" : "cpu");
  if (bname != "cuda" && bname != "cpu") throw UsageError("--backend must be cuda or cpu, got '" + bname + "'");
  const Backend backend = bname == "cuda" ? Backend::cuda_sm90 : Backend::cpu;
  const bool cuda = backend == Backend::cuda_sm90;
  MeasureOptions opt;
  opt.warmup = static_cast<int>(a.integer("warmup", cuda ? 5 : 1));
  opt.iters = positive(a, "iters", cuda ? 90 : 3);
  opt.graph = !a.flag("eager");
  if (opt.warmup < 0) throw UsageError("--warmup must be >= 0");
  const int64_t check_rows = a.integer("check_rows", 8);
  if (check_rows < 0) throw UsageError("--check_rows must be >= 0");
  const uint64_t seed = seed_from(a);
  if (cuda && !cuda_usable())
    throw RuntimeError(built_with_cuda() ? "--backend cuda: no usable CUDA device"
                                         : "--backend cuda: this smla binary was built without CUDA");

  std::unique_ptr<Workload> w = build(a, op, cuda, seed);
  RunInfo info;
  info.command = "smla bench";
  for (const std::string& s : argv) info.command += " " + s;
  info.seed = seed;
  if (cuda) info.device = cuda_device_description();
  std::cout << "smla bench: seed " << seed << (cuda ? std::string(", ") + info.device : std::string(", cpu")) << "\n";

  std::vector<ResultRow> rows;
  if (auto why = why_not(w->kernel_config(backend))) {
    rows.push_back(skipped_row(*w, backend, w->units(), *why));
  } else {
    if (cuda) w->upload();
    const Measurement m = measure(*w, backend, w->units(), opt);
    rows.push_back(make_row(*w, m));
    if (m.ok() && check_rows > 0) {
      Rng pick(stream_seed(seed, 1000));
      add_check(rows.back(), check_against_f64(*w, backend, w->units(), static_cast<int>(check_rows), pick), "");
    }
  }
  print_table(std::cout, rows);
  if (a.has("json")) write_json(a.str("json", ""), info, rows);
  // Nothing measured (unsupported) is a failure too: a script asked for this configuration.
  const std::string& st = rows.front().status;
  return st == "ok" || st == "unchecked" ? 0 : 1;
}

}  // namespace smla::cli
