#include "cli/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <thread>

#include "smla/error.h"

namespace smla::cli {
namespace {

std::string num(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

}  // namespace

std::string json_string(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) o += num("\\u%04x", static_cast<unsigned char>(c));
        else o += c;
    }
  }
  return o + "\"";
}

std::string json_number(double v) { return std::isfinite(v) ? num("%.6g", v) : "null"; }

int cpu_threads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

std::string cpu_description() {
  static const std::string text = [] {
  std::string model;
  std::ifstream f("/proc/cpuinfo");
  // x86 names the CPU in "model name"; other architectures may not name it at all.
  for (std::string line; model.empty() && std::getline(f, line);) {
    if (line.compare(0, 10, "model name") != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const size_t b = line.find_first_not_of(" \t", colon + 1);
    const size_t e = line.find_last_not_of(" \t\r");
    if (b != std::string::npos && e >= b) model = line.substr(b, e - b + 1);
  }
  if (model.empty()) model = "cpu";
  return model + ", " + std::to_string(cpu_threads()) + (cpu_threads() == 1 ? " thread" : " threads");
  }();
  return text;
}

const char* backend_label(Backend b) { return b == Backend::cpu ? "cpu" : "cuda"; }

ResultRow make_row(const Workload& w, const Measurement& m) {
  ResultRow r;
  r.op = op_name(w.op());
  r.shape = w.shape(m.units);
  r.backend = backend_label(m.backend);
  if (!m.ok()) {
    r.status = "FAIL";
    r.note = m.error;
    return r;
  }
  r.timed = true;
  r.time_ms = m.timing.median_ms;
  r.min_ms = m.timing.min_ms;
  r.first_third_ms = m.timing.first_third_ms;
  r.last_third_ms = m.timing.last_third_ms;
  r.iters = m.timing.iters;
  r.flops = m.perf.flops;
  r.bytes = m.perf.bytes;
  r.status = "unchecked";
  return r;
}

void add_check(ResultRow& r, const Comparison& c, const std::string& against) {
  const bool first = !r.checked;
  r.checked = true;
  r.max_err = std::max(r.max_err, c.max_out_err());
  r.lse_err = std::max(r.lse_err, c.max_lse_err());
  r.rel_l2 = std::max(r.rel_l2, c.rel_l2());
  r.check_rows += c.rows();
  if (c.ok()) {
    if (first) r.status = "ok";
    return;
  }
  r.status = "FAIL";
  r.note += (r.note.empty() ? "" : "; ") + (against.empty() ? std::string() : against + ": ") + c.failure();
}

ResultRow skipped_row(const Workload& w, Backend b, int64_t units, const std::string& why) {
  ResultRow r;
  r.op = op_name(w.op());
  r.shape = w.shape(units);
  r.backend = backend_label(b);
  r.status = "skipped";
  r.note = "unsupported: " + why;
  return r;
}

void print_table(std::ostream& os, const std::vector<ResultRow>& rows) {
  const std::vector<std::string> head{"operation", "shape", "backend", "time (ms)", "TFLOP/s", "GB/s", "max err", "check"};
  std::vector<std::vector<std::string>> cells;
  std::vector<std::string> notes;
  for (const ResultRow& r : rows) {
    std::string status = r.status;
    if (!r.note.empty()) {
      notes.push_back(r.note);
      status += " [" + std::to_string(notes.size()) + "]";
    }
    cells.push_back({r.op, r.shape, r.backend, r.timed ? num("%.4g", r.time_ms) : "-",
                     r.timed ? num("%.3g", r.tflops()) : "-", r.timed ? num("%.4g", r.gbps()) : "-",
                     r.checked ? num("%.2e", r.max_err) : "-", status});
  }
  std::vector<size_t> width(head.size());
  for (size_t c = 0; c < head.size(); ++c) {
    width[c] = head[c].size();
    for (const auto& row : cells) width[c] = std::max(width[c], row[c].size());
  }
  // Numbers right-aligned, text left-aligned: columns 3..6 are numeric.
  auto line = [&](const std::vector<std::string>& v) {
    os << "|";
    for (size_t c = 0; c < v.size(); ++c) {
      const std::string pad(width[c] - v[c].size(), ' ');
      const bool right = c >= 3 && c <= 6;
      os << " " << (right ? pad + v[c] : v[c] + pad) << " |";
    }
    os << "\n";
  };
  line(head);
  os << "|";
  for (size_t c = 0; c < head.size(); ++c) os << std::string(width[c] + 2, '-') << "|";
  os << "\n";
  for (const auto& row : cells) line(row);
  for (size_t k = 0; k < notes.size(); ++k) os << "[" << k + 1 << "] " << notes[k] << "\n";
}

void write_json(const std::string& path, const RunInfo& info, const std::vector<ResultRow>& rows) {
  std::ofstream file;
  if (path != "-") {
    file.open(path);
    if (!file) throw RuntimeError("cannot write " + path);
  }
  std::ostream& f = path == "-" ? std::cout : file;
  f << "{\n  \"command\": " << json_string(info.command) << ",\n  \"seed\": " << info.seed
    << ",\n  \"device\": " << json_string(info.device.empty() ? cpu_description() : info.device)
    << ",\n  \"cpu\": " << json_string(cpu_description()) << ",\n  \"cpu_threads\": " << cpu_threads()
    << ",\n  \"copy_ceiling_gbps\": " << (info.copy_ceiling_gbps > 0 ? json_number(info.copy_ceiling_gbps) : "null")
    << ",\n  \"results\": [";
  for (size_t k = 0; k < rows.size(); ++k) {
    const ResultRow& r = rows[k];
    f << (k ? "," : "") << "\n    {\"op\": " << json_string(r.op) << ", \"shape\": " << json_string(r.shape)
      << ", \"backend\": " << json_string(r.backend) << ", \"status\": " << json_string(r.status);
    if (r.timed) {
      f << ", \"time_ms\": " << json_number(r.time_ms) << ", \"min_ms\": " << json_number(r.min_ms)
        << ", \"iters\": " << r.iters;
      if (r.first_third_ms > 0)
        f << ", \"first_third_ms\": " << json_number(r.first_third_ms) << ", \"last_third_ms\": "
          << json_number(r.last_third_ms);
      f << ", \"flops\": " << json_number(r.flops) << ", \"bytes\": "
        << json_number(r.bytes) << ", \"tflops\": " << json_number(r.tflops()) << ", \"gbps\": "
        << json_number(r.gbps());
      if (info.copy_ceiling_gbps > 0 && r.backend == "cuda")
        f << ", \"fraction_of_copy_ceiling\": " << json_number(r.gbps() / info.copy_ceiling_gbps);
    }
    if (r.checked)
      f << ", \"check_rows\": " << r.check_rows << ", \"max_err\": " << json_number(r.max_err)
        << ", \"lse_err\": " << json_number(r.lse_err) << ", \"rel_l2\": " << json_number(r.rel_l2);
    if (!r.note.empty()) f << ", \"note\": " << json_string(r.note);
    f << "}";
  }
  f << "\n  ]\n}\n" << std::flush;
  if (!f) throw RuntimeError("cannot write " + (path == "-" ? std::string("stdout") : path));
}

}  // namespace smla::cli
