// `smla bench`: time one configuration of one operation on one backend, judge sampled rows
// against the float64 recomputation, print one table row (and optionally JSON).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/measure.h"
#include "cli/progress.h"
#include "cli/report.h"
#include "smla/error.h"

namespace smla::cli {
namespace {

int positive(const Args& a, const std::string& name, int64_t fallback) {
  const int64_t v = a.integer(name, fallback);
  if (v < 1) throw UsageError("--" + name + " must be >= 1, got " + std::to_string(v));
  if (v > (int64_t(1) << 31) - 1)
    throw UsageError("--" + name + " must be below 2^31, got " + std::to_string(v));
  return static_cast<int>(v);
}

std::unique_ptr<Workload> build_sparse_decode(const Args& a, bool cuda, uint64_t seed) {
  SparseDecodeSpec s;
  s.b = positive(a, "b", cuda ? 128 : 2);
  s.s_q = positive(a, "s_q", 1);
  s.h_q = positive(a, "h_q", 128);
  s.topk = positive(a, "topk", 2048);
  s.format = parse_cache_format("format", a.str("format", "fp8_ds_mla"));
  s.d_qk = positive(a, "d_qk", 576);
  s.page = positive(a, "page", 64);
  s.region = positive(a, "seqlen", 32768);
  s.window = a.flag("window");
  s.extra_topk = a.has("extra_topk") ? positive(a, "extra_topk", 1) : 0;
  s.extra_page = positive(a, "extra_page", 64);
  s.extra_region = positive(a, "extra_seqlen", 8192);
  s.sink = a.flag("sink");
  s.lengths = a.flag("lengths");
  return make_sparse_decode(s, seed);
}

std::unique_ptr<Workload> build_sparse_prefill(const Args& a, bool cuda, uint64_t seed) {
  SparsePrefillSpec s;
  s.s_q = positive(a, "s_q", cuda ? 4096 : 8);
  s.h_q = positive(a, "h_q", 128);
  s.d_qk = positive(a, "d_qk", 576);
  s.topk = positive(a, "topk", 2048);
  s.s_kv = positive(a, "s_kv", 8192);
  s.sink = a.flag("sink");
  s.lengths = a.flag("lengths");
  // bf16 alone reads the unpaged kv; a packed format, or --page, reads a paged cache instead.
  const std::string f = a.str("format", "bf16");
  s.format = parse_cache_format("format", f);
  if (!is_packed_format(s.format) && s.format != CacheFormat::bf16)
    throw UsageError("--format must be fp8_ds_mla, fp8_model1 or bf16 for --op sparse_prefill, got '" + f + "'");
  if (!is_packed_format(s.format) && !a.has("page")) return make_sparse_prefill(s, seed);
  if (is_packed_format(s.format)) {
    const int own = s.format == CacheFormat::fp8_ds_mla ? DsMlaLayout::d_qk : Model1Layout::d_qk;
    if (a.has("d_qk") && s.d_qk != own)
      throw UsageError("--d_qk " + std::to_string(s.d_qk) + " does not match --format " + f + " (d_qk " +
                       std::to_string(own) + ")");
    s.d_qk = own;
  }
  s.page = positive(a, "page", 64);
  return make_sparse_prefill_paged(s, seed);
}

std::unique_ptr<Workload> build_dense_decode(const Args& a, bool cuda, uint64_t seed) {
  DenseDecodeSpec s;
  s.b = positive(a, "b", cuda ? 128 : 2);
  s.s_q = positive(a, "s_q", 1);
  s.h_q = positive(a, "h_q", 128);
  s.d_qk = positive(a, "d_qk", 576);
  s.format = parse_cache_format("format", a.str("format", "bf16"));
  s.page = positive(a, "page", 64);
  s.seqlen = positive(a, "seqlen", 4096);
  s.causal = !a.flag("non_causal");
  s.sink = a.flag("sink");
  s.q_fp8 = a.flag("q_fp8");
  return make_dense_decode(s, seed);
}

std::unique_ptr<Workload> build_merge_states(const Args& a, bool cuda, uint64_t seed) {
  MergeStatesSpec s;
  s.tokens = int64_t(positive(a, "b", cuda ? 128 : 2)) * positive(a, "s_q", 1);
  s.h = positive(a, "h_q", 128);
  s.parts = positive(a, "parts", 4);
  s.sink = a.flag("sink");
  return make_merge_states(s, seed);
}

// The operations bench times, each with the configuration flags its workload reads and its
// builder: bench_ops(), --help, the --op error and the misplaced-flag check all read this.
struct BenchOp {
  Op op;
  std::vector<std::string> flags;
  std::unique_ptr<Workload> (*build)(const Args& a, bool cuda, uint64_t seed);
};

const std::vector<BenchOp>& bench_table() {
  static const std::vector<BenchOp> table{
      {Op::sparse_decode,
       {"b", "s_q", "h_q", "topk", "format", "d_qk", "page", "seqlen", "window", "extra_topk", "extra_page",
        "extra_seqlen", "sink", "lengths"},
       build_sparse_decode},
      {Op::sparse_prefill, {"s_q", "h_q", "d_qk", "topk", "s_kv", "sink", "lengths", "format", "page"}, build_sparse_prefill},
      {Op::dense_decode, {"b", "s_q", "h_q", "d_qk", "format", "page", "seqlen", "sink", "non_causal", "q_fp8"},
       build_dense_decode},
      {Op::merge_states, {"b", "s_q", "h_q", "parts", "sink"}, build_merge_states},
  };
  return table;
}

const BenchOp& bench_entry(Op op) {
  for (const BenchOp& e : bench_table())
    if (e.op == op) return e;
  throw std::logic_error("no bench entry for an accepted op");  // parse_op only returns table ops
}

// Flags of every run, whatever the operation.
const std::vector<std::string> kCommon{"op",   "backend", "iters", "warmup",  "check_rows",
                                       "seed", "json",    "eager", "progress"};

const std::vector<FlagSpec>& flags() {
  static const std::vector<FlagSpec> f = {
      {"op", "NAME", op_list(bench_ops()) + " (default sparse_decode)"},
      {"backend", "NAME", "cuda or cpu (default: cuda when a device is present)"},
      {"b", "N", "requests (default 128 on CUDA, 2 on the CPU); merge_states merges b*s_q tokens"},
      {"s_q", "N", "query tokens per request (default 1); sparse_prefill: query tokens (default 4096 / 8 on CPU)"},
      {"h_q", "N", "query heads (default 128)"},
      {"topk", "N", "keys per query (default 2048; with --window the window length)"},
      {"format", "NAME", "cache format (default fp8_ds_mla for sparse_decode, else bf16); sparse_prefill's fp8: paged"},
      {"d_qk", "N", "576 or 512 for bf16/fp16/fp8_e4m3 data (packed formats imply theirs; default 576)"},
      {"page", "N", "page size in tokens (default 64); sparse_prefill: a paged cache, bf16 too"},
      {"seqlen", "N",
       "tokens per request: sparse_decode's cache region (default 32768), dense_decode's context (4096)"},
      {"s_kv", "N", "sparse_prefill: rows of kv, or the prompt's positions in a paged cache (default 8192)"},
      {"window", "", "sparse_decode: main keys are the last topk positions (V4's sliding window)"},
      {"extra_topk", "N", "sparse_decode: keys from a second cache of the same format (default 0: none)"},
      {"extra_page", "N", "sparse_decode: page size of the second cache (default 64)"},
      {"extra_seqlen", "N", "sparse_decode: second-cache region per request (default 8192)"},
      {"sink", "", "with an attention sink per head"},
      {"lengths", "", "sparse_decode / sparse_prefill: also pass topk_length (each list's full topk)"},
      {"non_causal", "", "dense_decode: every query token sees the whole context"},
      {"q_fp8", "", "dense_decode with --format fp8_e4m3: q in fp8_e4m3 with a per-tensor q_scale"},
      {"parts", "N", "merge_states: partial results per row (default 4)"},
      {"iters", "N", "timed calls, median reported (default 90 on CUDA, 3 on the CPU)"},
      {"warmup", "N", "untimed calls first (default 5 on CUDA, 1 on the CPU)"},
      {"check_rows", "N", "rows judged against the float64 recomputation (default 8; 0: none)"},
      {"seed", "N", "input seed (default: fresh each run, printed)"},
      {"eager", "", "CUDA: time plain calls instead of CUDA-graph replays"},
      {"json", "FILE", "also write the result as JSON; '-': the JSON alone on stdout, the table on stderr"},
      Progress::flag(),
  };
  return f;
}

// "--a, --b" (sep ", ") or "--a --b".
std::string dashed(const std::vector<std::string>& names, const char* sep) {
  std::string s;
  for (size_t k = 0; k < names.size(); ++k) s += (k ? sep : "") + ("--" + names[k]);
  return s;
}

std::string usage() {
  std::string u =
      "usage: smla bench --op NAME [config flags] [--backend cuda|cpu] [--iters N] [--warmup N] [--json FILE]\n"
      "                  [--progress auto|always|never]\n"
      "\n"
      "Times one configuration: median of --iters calls after --warmup; on CUDA, replays of the call\n"
      "captured in a CUDA graph (--eager: plain calls), events around each and a 512 MB memset before\n"
      "it (cold L2), the method of docs/BENCHMARKS.md. FLOPs and bytes as docs/SPEC.md §7 counts them.\n"
      "\n"
      "operations and the configuration flags each reads (smla caps lists every operation):\n";
  for (const BenchOp& e : bench_table()) {
    std::string first = std::string("  ") + op_name(e.op) + ":";
    first += std::string(18 - std::min<size_t>(first.size(), 17), ' ');
    u += wrap(first, dashed(e.flags, " "), " ");
  }
  u +=
      "\n"
      "Progress (building inputs, timing, checking; a line every 2 s during slow call loops) goes to\n"
      "stderr, never stdout; by default only when stderr is a terminal, so scripted logs stay clean.\n"
      "bench/plot.py draws a roofline of the benchmark set's results (bench/results/*.jsonl).\n"
      "\n";
  return u;
}

// A configuration flag another operation reads is a mistake worth stopping for.
void reject_unused(const Args& a, const BenchOp& e) {
  for (const std::string& g : a.given()) {
    if (std::find(kCommon.begin(), kCommon.end(), g) == kCommon.end() &&
        std::find(e.flags.begin(), e.flags.end(), g) == e.flags.end())
      throw UsageError("--" + g + " does not apply to --op " + op_name(e.op) + ", which reads " +
                       dashed(e.flags, ", "));
  }
}

std::string ms_text(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g ms", ms);
  return buf;
}

}  // namespace

std::vector<Op> bench_ops() {
  std::vector<Op> ops;
  for (const BenchOp& e : bench_table()) ops.push_back(e.op);
  return ops;
}

int cmd_bench(const std::vector<std::string>& argv) {
  const Args a = Args::parse(argv, flags());
  if (a.help()) {
    std::cout << usage() << "flags:\n" << flags_help(flags());
    return 0;
  }
  const Op op = parse_op("op", a.str("op", "sparse_decode"), bench_ops(), "the operations smla bench times");
  const BenchOp& entry = bench_entry(op);
  reject_unused(a, entry);
  const std::string bname = a.str("backend", cuda_usable() ? "cuda" : "cpu");
  if (bname != "cuda" && bname != "cpu") throw UsageError("--backend must be cuda or cpu, got '" + bname + "'");
  const Backend backend = bname == "cuda" ? Backend::cuda_sm90 : Backend::cpu;
  const bool cuda = backend == Backend::cuda_sm90;
  MeasureOptions opt;
  opt.warmup = static_cast<int>(a.integer("warmup", cuda ? 5 : 1));
  opt.iters = positive(a, "iters", cuda ? 90 : 3);
  opt.graph = !a.flag("eager");
  if (opt.warmup < 0) throw UsageError("--warmup must be >= 0, got " + std::to_string(opt.warmup));
  const int64_t check_rows = a.integer("check_rows", 8);
  if (check_rows < 0) throw UsageError("--check_rows must be >= 0, got " + std::to_string(check_rows));
  const std::string json = a.str("json", "");
  Progress progress(a.str("progress", "auto"), "smla bench");
  const uint64_t seed = seed_from(a);
  if (cuda && !cuda_usable())
    throw RuntimeError(built_with_cuda() ? "--backend cuda: no usable CUDA device"
                                         : "--backend cuda: this smla binary was built without CUDA");
  // With the JSON on stdout, the human-readable lines move to stderr so stdout parses.
  std::ostream& out = json == "-" ? std::cerr : std::cout;

  RunInfo info;
  info.command = "smla bench";
  for (const std::string& s : argv) info.command += " " + s;
  info.seed = seed;
  info.device = cuda ? std::string(cuda_device_description()) : cpu_description();
  out << "smla bench: seed " << seed << ", " << info.device << std::endl;

  progress.note(std::string("building the inputs of ") + op_name(op));
  std::unique_ptr<Workload> w = entry.build(a, cuda, seed);
  progress.note("inputs built: " + w->shape(w->units()));
  opt.hook = [&](const char* phase, int done, int total) { progress.tick(phase, done, total); };

  std::vector<ResultRow> rows;
  if (auto why = why_not(w->kernel_config(backend))) {
    rows.push_back(skipped_row(*w, backend, w->units(), *why));
  } else {
    if (cuda) {
      progress.note("copying the inputs to the device");
      w->upload();
    }
    progress.note("timing on " + bname + ": " + std::to_string(opt.warmup) + " warm-up and " +
                  std::to_string(opt.iters) + (opt.iters == 1 ? " timed call" : " timed calls") +
                  (cuda ? (opt.graph ? " (CUDA graph replays)" : " (plain calls)") : ""));
    const Measurement m = measure(*w, backend, w->units(), opt);
    rows.push_back(make_row(*w, m));
    progress.note(m.ok() ? "timed: median " + ms_text(m.timing.median_ms) : "call failed");
    if (m.ok() && check_rows > 0) {
      progress.note("checking " + std::to_string(check_rows) + " sampled rows against the float64 recomputation");
      Rng pick(stream_seed(seed, 1000));
      add_check(rows.back(), check_against_f64(*w, backend, w->units(), static_cast<int>(check_rows), pick), "");
    }
  }
  progress.note("done: " + rows.front().status);
  print_table(out, rows);
  if (a.has("json")) write_json(json, info, rows);
  // Nothing measured (unsupported) is a failure too: a script asked for this configuration.
  const std::string& st = rows.front().status;
  return st == "ok" || st == "unchecked" ? 0 : 1;
}

}  // namespace smla::cli
