// Results as a table (stdout) and as JSON (hand-written, no dependency).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "cli/check.h"
#include "cli/measure.h"

namespace smla::cli {

struct ResultRow {
  std::string op, shape, backend;
  bool timed = false;
  double time_ms = 0, min_ms = 0;
  double first_third_ms = 0, last_third_ms = 0;  // Timing's; 0 when not measured
  int iters = 0;
  double flops = 0, bytes = 0;
  bool checked = false;
  double max_err = 0, lse_err = 0, rel_l2 = 0;
  int check_rows = 0;
  std::string status;  // "ok", "FAIL", "skipped", "unchecked"
  std::string note;    // why it failed or was skipped

  double tflops() const { return timed && time_ms > 0 ? flops / (time_ms * 1e-3) / 1e12 : 0; }
  double gbps() const { return timed && time_ms > 0 ? bytes / (time_ms * 1e-3) / 1e9 : 0; }
  bool failed() const { return status == "FAIL"; }
};

// A row from a measurement, "unchecked" (or "FAIL" when the call failed) until add_check.
ResultRow make_row(const Workload& w, const Measurement& m);
// Folds a comparison into a timed row: errors are the largest of all checks, the row fails
// when any check fails; `against` names the reference in the note ("" = float64).
void add_check(ResultRow& r, const Comparison& c, const std::string& against);
// A row for a configuration the backend does not support (`why` from why_not).
ResultRow skipped_row(const Workload& w, Backend b, int64_t units, const std::string& why);

const char* backend_label(Backend b);

// operation | shape | backend | time (ms) | TFLOP/s | GB/s | max err | check, then the notes.
void print_table(std::ostream& os, const std::vector<ResultRow>& rows);

struct RunInfo {
  std::string command;
  uint64_t seed = 0;
  std::string device;            // what ran the calls: the CUDA device, or cpu_description()
  double copy_ceiling_gbps = 0;  // 0 when not measured
};
// `path` "-": stdout. Throws smla::RuntimeError when the file cannot be written.
void write_json(const std::string& path, const RunInfo& info, const std::vector<ResultRow>& rows);

// The CPU as reports name it: "<model name from /proc/cpuinfo>, N threads", or "cpu, N
// threads" where the model is unknown. N is what the CPU backend spreads its rows over.
std::string cpu_description();
int cpu_threads();

// JSON pieces for the hand-written writers: a quoted, escaped string; a number (inf and NaN,
// which JSON lacks, become null).
std::string json_string(const std::string& s);
std::string json_number(double v);

}  // namespace smla::cli
