#include "common/test_util.h"

#include <cstdlib>
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

void expect_lse_close(const std::vector<float>& got, const std::vector<double>& ref, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  size_t bad = 0;
  std::ostringstream first;
  for (size_t i = 0; i < got.size(); ++i) {
    bool ok;
    if (std::isinf(ref[i])) ok = std::isinf(got[i]) && ((got[i] > 0) == (ref[i] > 0));
    else ok = std::isfinite(got[i]) && std::fabs(got[i] - ref[i]) <= 1e-4 * std::fabs(ref[i]) + 1e-5;
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

}  // namespace smla::test
