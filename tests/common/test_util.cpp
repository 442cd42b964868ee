#include "common/test_util.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <sstream>

namespace smla::test {

namespace {
uint64_t g_seed = 0;
std::mt19937_64 g_rng;
std::string g_test;

void reseed_for_current_test() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "";
  if (name == g_test && g_seed != 0) return;
  g_test = name;
  if (const char* s = std::getenv("SMLA_TEST_SEED")) {
    g_seed = std::strtoull(s, nullptr, 10);
  } else {
    g_seed = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
    if (g_seed == 0) g_seed = 1;
  }
  g_rng.seed(g_seed);
  ::testing::Test::RecordProperty("seed", std::to_string(g_seed));
  std::printf("[ seed     ] %s SMLA_TEST_SEED=%llu\n", name.c_str(), static_cast<unsigned long long>(g_seed));
}
}  // namespace

std::mt19937_64& rng() {
  reseed_for_current_test();
  return g_rng;
}
uint64_t current_seed() {
  reseed_for_current_test();
  return g_seed;
}

float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng()); }
int64_t uniform_int(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng()); }

std::vector<uint16_t> random_bf16(size_t n, float lo, float hi) {
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = float_to_bf16_bits(uniform(lo, hi));
  return v;
}

std::vector<float> bf16_to_float(const std::vector<uint16_t>& v) {
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i) f[i] = bf16_bits_to_float(v[i]);
  return f;
}

std::vector<float> random_f32(size_t n, float lo, float hi) {
  std::vector<float> v(n);
  for (auto& x : v) x = uniform(lo, hi);
  return v;
}

void expect_out_close(const std::vector<float>& got, const std::vector<double>& ref, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  double max_ref = 0, err2 = 0, ref2 = 0;
  for (double r : ref) max_ref = std::max(max_ref, std::fabs(r));
  const double tol = 2e-2 * max_ref + 1e-3;
  size_t bad = 0, first_bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double e = static_cast<double>(got[i]) - ref[i];
    if (std::isnan(got[i]) || !(std::fabs(e) <= tol)) {
      if (bad++ == 0) first_bad = i;
    }
    err2 += e * e;
    ref2 += ref[i] * ref[i];
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " elements off, first at " << first_bad << " got "
                     << got[first_bad] << " ref " << ref[first_bad] << " (tol " << tol << ")";
  if (ref2 > 0) EXPECT_LE(std::sqrt(err2 / ref2), 1e-2) << what << ": relative L2 error";
  else EXPECT_LE(std::sqrt(err2), 1e-3) << what << ": reference is zero";
}

void expect_lse_close(const std::vector<float>& got, const std::vector<double>& ref, const std::string& what, double rel,
                      double abs) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  size_t bad = 0;
  std::ostringstream first;
  for (size_t i = 0; i < got.size(); ++i) {
    bool ok;
    if (std::isinf(ref[i])) ok = std::isinf(got[i]) && ((got[i] > 0) == (ref[i] > 0));
    else ok = std::isfinite(got[i]) && std::fabs(got[i] - ref[i]) <= rel * std::fabs(ref[i]) + abs;
    if (!ok && bad++ == 0) first << " first at " << i << " got " << got[i] << " ref " << ref[i];
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " values off;" << first.str();
}

void expect_error(const std::function<void()>& fn, const std::vector<std::string>& fragments) {
  try {
    fn();
    ADD_FAILURE() << "expected smla::Error, nothing was thrown";
  } catch (const smla::Error& e) {
    std::string msg = e.what();
    for (const auto& f : fragments)
      EXPECT_NE(msg.find(f), std::string::npos) << "message \"" << msg << "\" lacks \"" << f << "\"";
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected smla::Error, got another exception: " << e.what();
  }
}

void expect_rejected_untouched(const std::vector<std::function<void()>>& calls,
                               const std::vector<std::string>& fragments, const std::vector<Watched>& outputs) {
  auto bytes_of = [](const Watched& w) {
    const auto* p = static_cast<const uint8_t*>(w.data);
    return std::vector<uint8_t>(p, p + w.bytes);
  };
  std::vector<std::vector<uint8_t>> before;
  for (const Watched& w : outputs) before.push_back(bytes_of(w));
  for (const auto& call : calls) expect_error(call, fragments);
  for (size_t i = 0; i < outputs.size(); ++i)
    EXPECT_EQ(bytes_of(outputs[i]), before[i]) << "a rejected call wrote " << outputs[i].name;
}

std::vector<float> make_sink(int h, float hi) {
  std::vector<float> s(h);
  for (auto& v : s) v = uniform(-1.0f, hi);
  if (h >= 3) {
    s[0] = std::numeric_limits<float>::infinity();
    s[1] = -std::numeric_limits<float>::infinity();
  }
  return s;
}

std::vector<int32_t> make_topk_lengths(int n, int topk) {
  constexpr int32_t kIntMin = std::numeric_limits<int32_t>::min();
  constexpr int32_t kIntMax = std::numeric_limits<int32_t>::max();
  const std::vector<int32_t> cases = {static_cast<int32_t>(uniform_int(1, std::max(1, topk - 1))),
                                      topk + 5, 0, -3, topk, kIntMin, kIntMax, 1};
  std::vector<int32_t> len(n);
  for (int i = 0; i < n; ++i) len[i] = cases[i % cases.size()];
  return len;
}

std::vector<int32_t> random_indices(int64_t rows, int topk, int64_t num_keys, const std::vector<int32_t>& invalid,
                                    int invalid_step, float invalid_frac) {
  std::vector<int32_t> idx(rows * topk);
  for (int64_t r = 0; r < rows; ++r) {
    int32_t* row = idx.data() + r * topk;
    for (int j = 0; j < topk; ++j) {
      if (num_keys == 0 || uniform(0, 1) < invalid_frac)
        row[j] = invalid[uniform_int(0, invalid.size() - 1)];
      else if (j > 0 && uniform(0, 1) < 0.1f)
        row[j] = row[uniform_int(0, j - 1)];
      else
        row[j] = static_cast<int32_t>(uniform_int(0, num_keys - 1));
    }
    row[(r * invalid_step) % topk] = invalid[r % invalid.size()];
    if (topk >= 4 && num_keys > 0) {
      row[topk - 1] = static_cast<int32_t>(uniform_int(0, num_keys - 1));
      row[topk / 2] = row[topk - 1];
    }
  }
  return idx;
}

double sink_factor(double sink, double lse) {
  const double inf = std::numeric_limits<double>::infinity();
  return sink == inf ? 0.0 : sink == -inf ? 1.0 : 1.0 / (1.0 + std::exp(sink - lse));
}

void expect_empty_rows_zero(const std::vector<float>& out, const std::vector<double>& ref_lse, size_t d_v,
                            const std::string& message) {
  const double inf = std::numeric_limits<double>::infinity();
  size_t nonzero = 0;
  for (size_t row = 0; row < ref_lse.size(); ++row)
    if (ref_lse[row] == -inf)
      for (size_t k = 0; k < d_v; ++k) nonzero += out[row * d_v + k] != 0.0f;
  EXPECT_EQ(nonzero, 0u) << message;
}

}  // namespace smla::test
