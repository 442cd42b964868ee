#include "cli/measure.h"

#include <exception>

#include "smla/error.h"

namespace smla::cli {

Measurement measure(Workload& w, Backend b, int64_t units, const MeasureOptions& o) {
  Measurement m;
  m.backend = b;
  m.units = units;
  try {
    w.poison(b);
    m.perf = w.count(units);
    if (b == Backend::cpu) {
      m.timing = time_cpu([&] { w.launch(b, units, Exec{}); }, o.warmup, o.iters, o.hook);
    } else {
      const size_t ws_bytes = w.workspace_size(b, units);
      Buffer ws(ws_bytes, device_of(b));
      m.timing = time_cuda(
          [&](void* stream) {
            Exec e;
            e.stream = stream;
            e.workspace = Workspace{ws.data(), ws.bytes()};
            w.launch(b, units, e);
          },
          o.warmup, o.iters, o.graph, o.hook);
      w.fetch(b);
    }
  } catch (const Error& e) {
    m.error = std::string("rejected: ") + e.what();
  } catch (const std::exception& e) {
    m.error = std::string("failed: ") + e.what();
  }
  return m;
}

Comparison check_against_f64(const Workload& w, Backend b, int64_t units, int count, Rng& rng) {
  Comparison c;
  for (int64_t row : sample_rows(units * w.rows_per_unit(), count, rng)) c.add(w.output_row(b, row), w.reference_row(row));
  return c;
}

Comparison check_against_backend(const Workload& w, Backend b, Backend ref, int64_t units, int count, Rng& rng) {
  Comparison c;
  for (int64_t row : sample_rows(units * w.rows_per_unit(), count, rng))
    c.add(w.output_row(b, row), w.output_row(ref, row));
  return c;
}

}  // namespace smla::cli
