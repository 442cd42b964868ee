// `smla run`: the main job. One DeepSeek-V3.2-shaped decode step (sparse_decode on an
// fp8_ds_mla cache, topk 2048, h_q 128 and 16, s_q 1 and 2), one V4 decode and one sparse
// prefill chunk, on the best backend present; every result judged on sampled rows.
#include <algorithm>
#include <chrono>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>

#include "cli/commands.h"
#include "cli/measure.h"
#include "cli/report.h"
#include "smla/error.h"

namespace smla::cli {
namespace {

const std::vector<FlagSpec> kFlags = {
    {"quick", "", "a smoke test: one request, two prefill tokens, few repetitions"},
    {"b", "N", "decode batch (default 128 on CUDA, 2 on the CPU); the CPU runs at most 2 when CUDA does"},
    {"backend", "NAME", "auto (default: CUDA when a device is present, plus the CPU on a slice), cpu or cuda"},
    {"seed", "N", "input seed (default: fresh each run, printed)"},
    {"json", "FILE", "also write the results as JSON; '-': the JSON alone on stdout, the report on stderr"},
};

const char* kUsage =
    "usage: smla run [--quick] [--b N] [--backend auto|cpu|cuda] [--seed N] [--json FILE]\n"
    "\n"
    "One decode step of DeepSeek V3.2 shape (sparse_decode, fp8_ds_mla cache, page 64, topk 2048,\n"
    "h_q 128/16 x s_q 1/2), one V4 decode (fp8_model1: a 128-token sliding window from a page-256\n"
    "cache + 512 keys from a page-64 cache, sink) and one sparse_prefill chunk (bf16 kv, d_qk 576,\n"
    "h_q 128, topk 2048, s_kv 8192). With a CUDA device the CUDA kernels run at full size and the CPU\n"
    "on a slice of the same inputs; results are judged on sampled rows (CUDA against the CPU and\n"
    "against a float64 recomputation, the CPU against the float64 recomputation). Exit code 1 when\n"
    "any check or call fails.\n"
    "\n";

struct Case {
  std::function<std::unique_ptr<Workload>(int64_t units, uint64_t seed)> build;
  int64_t units_cuda, units_cpu;  // units of the workload when CUDA runs / when only the CPU runs
  int64_t cpu_slice;              // units the CPU runs when CUDA runs too
};

std::vector<Case> cases(bool quick, std::optional<int64_t> b) {
  const int64_t b_cuda = b.value_or(128), b_cpu = b.value_or(quick ? 1 : 2);
  const int64_t slice = std::min<int64_t>(b_cuda, quick ? 1 : 2);
  const int64_t prefill_cuda = quick ? 512 : 4096, prefill_cpu = quick ? 2 : 8;
  std::vector<Case> out;
  for (auto [h_q, s_q] : {std::pair{128, 1}, {128, 2}, {16, 1}, {16, 2}}) {
    out.push_back({[h_q, s_q](int64_t units, uint64_t seed) {
                     SparseDecodeSpec s;
                     s.b = units;
                     s.s_q = s_q;
                     s.h_q = h_q;
                     s.topk = 2048;
                     s.format = CacheFormat::fp8_ds_mla;
                     s.page = 64;
                     s.region = 32768;
                     return make_sparse_decode(s, seed);
                   },
                   b_cuda, b_cpu, slice});
  }
  out.push_back({[](int64_t units, uint64_t seed) {
                   SparseDecodeSpec s;
                   s.b = units;
                   s.s_q = 1;
                   s.h_q = 64;
                   s.format = CacheFormat::fp8_model1;
                   s.topk = 128;
                   s.window = true;
                   s.page = 256;
                   s.region = 4096;
                   s.extra_topk = 512;
                   s.extra_page = 64;
                   s.extra_region = 8192;
                   s.sink = true;
                   return make_sparse_decode(s, seed);
                 },
                 b_cuda, b_cpu, slice});
  out.push_back({[](int64_t units, uint64_t seed) {
                   SparsePrefillSpec s;
                   s.s_q = units;
                   s.h_q = 128;
                   s.d_qk = 576;
                   s.topk = 2048;
                   s.s_kv = 8192;
                   return make_sparse_prefill(s, seed);
                 },
                 prefill_cuda, prefill_cpu, std::min<int64_t>(prefill_cuda, prefill_cpu)});
  return out;
}

}  // namespace

int cmd_run(const std::vector<std::string>& argv) {
  const Args a = Args::parse(argv, kFlags);
  if (a.help()) {
    std::cout << kUsage << "flags:\n" << flags_help(kFlags);
    return 0;
  }
  const bool quick = a.flag("quick");
  const std::string backend = a.str("backend", "auto");
  if (backend != "auto" && backend != "cpu" && backend != "cuda")
    throw UsageError("--backend must be auto, cpu or cuda, got '" + backend + "'");
  const std::optional<int64_t> b = a.opt_integer("b");
  if (b && *b < 1) throw UsageError("--b must be >= 1, got " + std::to_string(*b));
  const uint64_t seed = seed_from(a);
  const std::string json = a.str("json", "");
  // With the JSON on stdout, the human-readable report moves to stderr so stdout parses.
  std::ostream& out = json == "-" ? std::cerr : std::cout;

  const bool have_cuda = cuda_usable();
  if (backend == "cuda" && !have_cuda)
    throw RuntimeError(built_with_cuda() ? "--backend cuda: no usable CUDA device"
                                         : "--backend cuda: this smla binary was built without CUDA");
  const bool use_cuda = backend == "cuda" || (backend == "auto" && have_cuda);
  const bool use_cpu = backend != "cuda";
  const MeasureOptions cuda_opt = quick ? MeasureOptions{2, 10} : MeasureOptions{5, 90};
  const MeasureOptions cpu_opt = quick ? MeasureOptions{0, 1} : MeasureOptions{0, 2};
  const int check_count = 8;

  RunInfo info;
  info.command = "smla run";
  for (const std::string& s : argv) info.command += " " + s;
  info.seed = seed;
  out << "smla run: seed " << seed << " (replay with --seed " << seed << ")\n";
  if (use_cuda) {
    info.device = cuda_device_description();
    out << "CUDA device: " << info.device << "; the CPU runs on a slice of each batch\n";
  } else {
    info.device = cpu_description();
    out << "backend: cpu, " << info.device
        << (built_with_cuda() ? " (no usable CUDA device)" : " (built without CUDA)") << "\n";
  }
  out.flush();

  const auto t0 = std::chrono::steady_clock::now();
  std::vector<ResultRow> rows;
  Rng pick(stream_seed(seed, 1000));
  uint64_t case_no = 0;
  const std::vector<Case> all = cases(quick, b);
  for (const Case& c : all) {
    const int64_t units = use_cuda ? c.units_cuda : c.units_cpu;
    const int64_t cpu_units = use_cuda ? c.cpu_slice : c.units_cpu;
    std::unique_ptr<Workload> w = c.build(units, stream_seed(seed, ++case_no));
    // Progress on stderr: a GPU-sized run spends seconds building inputs per case.
    std::cerr << "[" << case_no << "/" << all.size() << "] " << op_name(w->op()) << " " << w->shape(units) << "\n";
    // CUDA at full size, judged against the float64 recomputation across the whole batch and
    // against the CPU on the slice both computed.
    std::optional<ResultRow> cuda_row;
    bool cuda_ran = false;
    if (use_cuda) {
      if (auto why = why_not(w->kernel_config(Backend::cuda_sm90))) {
        cuda_row = skipped_row(*w, Backend::cuda_sm90, units, *why);
      } else {
        w->upload();
        const Measurement m = measure(*w, Backend::cuda_sm90, units, cuda_opt);
        cuda_ran = m.ok();
        cuda_row = make_row(*w, m);
        if (cuda_ran) add_check(*cuda_row, check_against_f64(*w, Backend::cuda_sm90, units, check_count, pick), "");
      }
    }
    std::optional<ResultRow> cpu_row;
    if (use_cpu) {
      const Measurement m = measure(*w, Backend::cpu, cpu_units, cpu_opt);
      cpu_row = make_row(*w, m);
      if (m.ok()) {
        add_check(*cpu_row, check_against_f64(*w, Backend::cpu, cpu_units, check_count, pick), "");
        if (cuda_ran)
          add_check(*cuda_row,
                    check_against_backend(*w, Backend::cuda_sm90, Backend::cpu, cpu_units, check_count, pick),
                    "against the CPU");
      }
    }
    for (auto* r : {&cuda_row, &cpu_row})
      if (*r) rows.push_back(**r);
  }
  const double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  out << "\n";
  print_table(out, rows);
  if (use_cuda) {
    info.copy_ceiling_gbps = cuda_copy_ceiling_gbps();
    out << "device-to-device copy ceiling measured now: " << static_cast<int>(info.copy_ceiling_gbps)
              << " GB/s (read + write)\n";
  }
  int failed = 0;
  for (const ResultRow& r : rows) failed += r.failed();
  out << "max err: largest |out - reference| over " << check_count
            << " sampled rows per check (SPEC §6 tolerances decide the check); "
            << "total " << static_cast<int>(total_s * 10) / 10.0 << " s\n";
  if (a.has("json")) write_json(json, info, rows);
  if (failed) {
    out << failed << " configuration(s) FAILED\n";
    return 1;
  }
  out << "all checks passed\n";
  return 0;
}

}  // namespace smla::cli
