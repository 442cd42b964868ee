#include "cli/check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>

#include "smla/numeric.h"

namespace smla::cli {
namespace {

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

std::string fmt(const char* f, double a, double b = 0, double c = 0) {
  char buf[160];
  std::snprintf(buf, sizeof(buf), f, a, b, c);
  return buf;
}

// SPEC §6 for one scalar (lse or max_logit); returns the finite error (0 for matching infinities).
double scalar_error(double got, double ref, bool* bad) {
  if (std::isnan(got) || std::isinf(got) || std::isinf(ref)) {
    if (!(got == ref)) *bad = true;
    return (got == ref) ? 0.0 : std::numeric_limits<double>::infinity();
  }
  const double err = std::fabs(got - ref);
  if (err > 1e-4 * std::fabs(ref) + 1e-5) *bad = true;
  return err;
}

}  // namespace

void decode_key_row(const PagedCache& c, int64_t slot, int head, double* dst) {
  const TensorView& d = c.data;
  const int64_t ps = d.shape[1];
  const int64_t es = static_cast<int64_t>(dtype_size(d.dtype));
  const int64_t off = slot % ps;
  const uint8_t* page = static_cast<const uint8_t*>(d.data) + (slot / ps) * d.stride[0] * es;
  switch (c.format) {
    case CacheFormat::bf16:
    case CacheFormat::fp16:
    case CacheFormat::fp8_e4m3: {
      const int64_t elem = off * d.stride[1] + (d.ndim == 4 ? head * d.stride[2] : 0);
      const uint8_t* row = page + elem * es;
      const int64_t n = d.shape[d.ndim - 1];
      for (int64_t i = 0; i < n; ++i) {
        if (c.format == CacheFormat::bf16) dst[i] = bf16_bits_to_float(load_u16(row + 2 * i));
        else if (c.format == CacheFormat::fp16) dst[i] = fp16_bits_to_float(load_u16(row + 2 * i));
        else dst[i] = static_cast<double>(e4m3_to_float(row[i])) * static_cast<double>(c.k_scale);
      }
      return;
    }
    case CacheFormat::fp8_ds_mla: {
      using L = DsMlaLayout;
      const uint8_t* t = page + off * d.stride[1];
      float scale[L::num_scales];
      std::memcpy(scale, t + L::scale_offset, sizeof(scale));
      for (int i = 0; i < L::d_latent; ++i)
        dst[i] = static_cast<double>(e4m3_to_float(t[L::latent_offset + i])) * scale[i / L::tile];
      for (int i = 0; i < kDRope; ++i) dst[L::d_latent + i] = bf16_bits_to_float(load_u16(t + L::rope_offset + 2 * i));
      return;
    }
    case CacheFormat::fp8_model1: {
      using L = Model1Layout;
      const uint8_t* t = page + off * L::data_bytes;
      const uint8_t* s = page + ps * L::data_bytes + off * L::scale_bytes;
      for (int i = 0; i < L::d_latent; ++i)
        dst[i] = static_cast<double>(e4m3_to_float(t[i])) * std::ldexp(1.0, static_cast<int>(s[i / L::tile]) - 127);
      for (int i = 0; i < kDRope; ++i) dst[L::d_latent + i] = bf16_bits_to_float(load_u16(t + L::rope_offset + 2 * i));
      return;
    }
  }
}

RowData attend_f64(const std::vector<double>& q, const std::vector<double>& keys, int d_qk, double scale,
                   const double* sink) {
  RowData r;
  r.out.assign(kDv, 0.0);
  const size_t n = keys.size() / static_cast<size_t>(d_qk);
  const double ninf = -std::numeric_limits<double>::infinity();
  if (n == 0) {
    r.lse = r.max_logit = ninf;
    return r;
  }
  std::vector<double> s(n);
  double m = ninf;
  for (size_t j = 0; j < n; ++j) {
    const double* k = keys.data() + j * d_qk;
    double dot = 0;
    for (int i = 0; i < d_qk; ++i) dot += q[i] * k[i];
    s[j] = scale * dot;
    m = std::max(m, s[j]);
  }
  double sum = 0;
  for (size_t j = 0; j < n; ++j) sum += std::exp(s[j] - m);
  r.lse = m + std::log(sum);
  r.max_logit = m;
  for (size_t j = 0; j < n; ++j) {
    const double p = std::exp(s[j] - r.lse);
    const double* v = keys.data() + j * d_qk;
    for (int i = 0; i < kDv; ++i) r.out[i] += p * v[i];
  }
  if (sink) {
    const double f = 1.0 / (1.0 + std::exp(*sink - r.lse));
    for (double& o : r.out) o *= f;
  }
  return r;
}

void Comparison::add(const RowData& got, const RowData& ref) {
  ++rows_;
  const size_t n = std::min(got.out.size(), ref.out.size());
  for (size_t k = 0; k < n; ++k) {
    const double g = got.out[k], r = ref.out[k];
    if (!std::isfinite(g)) {
      out_nan_ = true;
      continue;
    }
    const double e = std::fabs(g - r);
    max_err_ = std::max(max_err_, e);
    max_ref_ = std::max(max_ref_, std::fabs(r));
    sum_err2_ += e * e;
    sum_ref2_ += r * r;
  }
  bool bad = false;
  max_lse_err_ = std::max(max_lse_err_, scalar_error(got.lse, ref.lse, &bad));
  if (bad && lse_what_.empty()) lse_what_ = fmt("lse %.9g vs %.9g", got.lse, ref.lse);
  lse_bad_ |= bad;
  if (got.has_max_logit && ref.has_max_logit) {
    bad = false;
    max_lse_err_ = std::max(max_lse_err_, scalar_error(got.max_logit, ref.max_logit, &bad));
    if (bad && lse_what_.empty()) lse_what_ = fmt("max_logit %.9g vs %.9g", got.max_logit, ref.max_logit);
    lse_bad_ |= bad;
  }
}

void Comparison::merge(const Comparison& o) {
  rows_ += o.rows_;
  max_err_ = std::max(max_err_, o.max_err_);
  max_ref_ = std::max(max_ref_, o.max_ref_);
  sum_err2_ += o.sum_err2_;
  sum_ref2_ += o.sum_ref2_;
  max_lse_err_ = std::max(max_lse_err_, o.max_lse_err_);
  out_nan_ |= o.out_nan_;
  lse_bad_ |= o.lse_bad_;
  if (lse_what_.empty()) lse_what_ = o.lse_what_;
}

double Comparison::rel_l2() const {
  if (sum_ref2_ > 0) return std::sqrt(sum_err2_ / sum_ref2_);
  return sum_err2_ > 0 ? std::numeric_limits<double>::infinity() : 0.0;
}

std::string Comparison::failure() const {
  if (rows_ == 0) return "no rows compared";
  std::string why;
  auto add = [&](const std::string& s) { why += (why.empty() ? "" : "; ") + s; };
  if (out_nan_) add("out has NaN/inf");
  if (max_err_ > 2e-2 * max_ref_ + 1e-3) add(fmt("out max |err| %.3g > 2e-2 * %.3g + 1e-3", max_err_, max_ref_));
  if (rel_l2() > 1e-2) add(fmt("out relative L2 error %.3g > 1e-2", rel_l2()));
  if (lse_bad_) add("outside the lse tolerance (" + lse_what_ + ")");
  return why;
}

std::vector<int64_t> sample_rows(int64_t total, int count, Rng& rng) {
  std::set<int64_t> rows;
  if (total <= 0) return {};
  rows.insert(0);
  rows.insert(total - 1);
  while (static_cast<int64_t>(rows.size()) < std::min<int64_t>(count, total))
    rows.insert(static_cast<int64_t>(rng.below(static_cast<uint64_t>(total))));
  return {rows.begin(), rows.end()};
}

}  // namespace smla::cli
