#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "cli/args.h"
#include "cli/workloads.h"

namespace smla::cli {
namespace {

class MergeStates final : public Workload {
 public:
  MergeStates(const MergeStatesSpec& s, uint64_t seed) : s_(s) {
    if (s.tokens < 1 || s.h < 1 || s.parts < 1) throw UsageError("merge_states needs tokens, h_q and parts >= 1");
    units_ = s.tokens;
    rows_per_unit_ = s.h;
    const int64_t rows = s.tokens * s.h;
    out_parts_ = Array::make(DType::f32, {s.parts, s.tokens, s.h, kDv});
    fill_f32(out_parts_.h<float>(), out_parts_.numel(), stream_seed(seed, 1), -1.0f, 1.0f);
    lse_parts_ = Array::make(DType::f32, {s.parts, s.tokens, s.h});
    Rng r(stream_seed(seed, 2));
    float* lse = lse_parts_.h<float>();
    for (int64_t k = 0; k < s.parts * rows; ++k)
      lse[k] = r.below(16) == 0 ? -std::numeric_limits<float>::infinity() : static_cast<float>(r.uniform(-4.0, 4.0));
    if (s.sink) {
      sink_ = Array::make(DType::f32, {s.h});
      fill_f32(sink_.h<float>(), s.h, stream_seed(seed, 3), -2.0f, 4.0f);
    }
    for (Array* a : {&out_parts_, &lse_parts_, &sink_}) add_input(a);
    make_outputs(DType::bf16, {s.tokens, s.h}, false);
  }

  Op op() const override { return Op::merge_states; }

  std::string shape(int64_t units) const override {
    return "parts=" + std::to_string(s_.parts) + " tokens=" + std::to_string(units) + " h=" + std::to_string(s_.h) +
           " f32->bf16" + (s_.sink ? " sink" : "");
  }

  KernelConfig kernel_config(Backend b) const override {
    KernelConfig c;
    c.op = Op::merge_states;
    c.backend = b;
    c.h_q = s_.h;
    return c;
  }

  size_t workspace_size(Backend, int64_t) const override { return 0; }
  void launch(Backend b, int64_t units, const Exec& exec) const override { merge_states(args(b, units), exec); }

  PerfCount count(int64_t units) const override {
    return count_merge_states(s_.parts, units * s_.h, kDv, 4, 2, s_.sink ? s_.h : 0);
  }

  RowData reference_row(int64_t row) const override {
    const int64_t rows = s_.tokens * s_.h;
    const float* lse = lse_parts_.h<float>();
    const double ninf = -std::numeric_limits<double>::infinity();
    double m = ninf;
    for (int p = 0; p < s_.parts; ++p) m = std::max(m, static_cast<double>(lse[p * rows + row]));
    RowData r;
    r.out.assign(kDv, 0.0);
    r.lse = ninf;
    if (m == ninf) return r;
    double sum = 0;
    for (int p = 0; p < s_.parts; ++p) sum += std::exp(lse[p * rows + row] - m);
    r.lse = m + std::log(sum);
    for (int p = 0; p < s_.parts; ++p) {
      const double w = std::exp(lse[p * rows + row] - r.lse);
      const float* o = out_parts_.h<float>() + (p * rows + row) * kDv;
      for (int k = 0; k < kDv; ++k) r.out[k] += w * o[k];
    }
    if (s_.sink) {
      const double f = 1.0 / (1.0 + std::exp(static_cast<double>(sink_.h<float>()[row % s_.h]) - r.lse));
      for (double& v : r.out) v *= f;
    }
    return r;
  }

 private:
  MergeStatesArgs args(Backend b, int64_t units) const {
    const Device d = device_of(b);
    MergeStatesArgs a;
    a.out_parts = out_parts_.view(d, units, 1);
    a.lse_parts = lse_parts_.view(d, units, 1);
    a.attn_sink = sink_.view(d);
    a.out = outputs(b).out.view(d, units);
    a.lse = outputs(b).lse.view(d, units);
    return a;
  }

  MergeStatesSpec s_;
  Array out_parts_, lse_parts_, sink_;
};

}  // namespace

std::unique_ptr<Workload> make_merge_states(const MergeStatesSpec& s, uint64_t seed) {
  return std::make_unique<MergeStates>(s, seed);
}

}  // namespace smla::cli
