// Shared test helpers: fresh random inputs, NaN poisoning, SPEC §6 tolerances, and
// checks that a rejected call names its argument and writes nothing.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "smla/error.h"
#include "smla/numeric.h"
#include "smla/tensor.h"

namespace smla::test {

// A per-test generator seeded freshly each run; the seed is printed so a failure can be replayed
// (SMLA_TEST_SEED=<n> fixes it).
std::mt19937_64& rng();
uint64_t current_seed();

float uniform(float lo, float hi);
int64_t uniform_int(int64_t lo, int64_t hi);  // inclusive

// bf16 storage with random values in [lo, hi] (never all zeros).
std::vector<uint16_t> random_bf16(size_t n, float lo = -1.0f, float hi = 1.0f);
std::vector<float> bf16_to_float(const std::vector<uint16_t>& v);
std::vector<float> random_f32(size_t n, float lo, float hi);

inline uint16_t bf16_nan() { return 0x7fc0; }
inline float f32_nan() { return NAN; }

// SPEC §6: relative L2 <= 1e-2, per element |err| <= 2e-2 * max|ref| + 1e-3, no NaN.
void expect_out_close(const std::vector<float>& got, const std::vector<double>& ref, const std::string& what);
// SPEC §6: |err| <= rel |ref| + abs, +-inf exactly where the reference has it; 1e-4 and 1e-5
// everywhere but where the caller chose FP8 arithmetic (fp8 q in dense decode: 1e-3, 1e-4).
void expect_lse_close(const std::vector<float>& got, const std::vector<double>& ref, const std::string& what,
                      double rel = 1e-4, double abs = 1e-5);

// Runs fn, expects smla::Error whose message contains every fragment.
void expect_error(const std::function<void()>& fn, const std::vector<std::string>& fragments);

// Byte snapshot of a buffer, to check that a rejected call wrote nothing.
template <typename T>
std::vector<uint8_t> snapshot(const std::vector<T>& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(v.data());
  return std::vector<uint8_t>(p, p + v.size() * sizeof(T));
}

// An output buffer that a rejected call must leave as it was.
struct Watched {
  const char* name;
  const void* data;
  size_t bytes;
};
template <typename T>
Watched watch(const char* name, const std::vector<T>& v) {
  return {name, v.data(), v.size() * sizeof(T)};
}
// v's elements followed by zeros, n elements in all (n >= v.size()): an input placed at the start
// of a buffer that can hold a larger output, so that an aliased output meets that input alone,
// whatever the allocator put next to it.
template <typename T>
std::vector<T> with_room(const std::vector<T>& v, size_t n) {
  std::vector<T> r(v);
  r.resize(std::max(n, v.size()), T{});
  return r;
}
// Every call throws smla::Error whose message contains every fragment (expect_error), and
// none of `outputs` changes ("a rejected call wrote <name>").
void expect_rejected_untouched(const std::vector<std::function<void()>>& calls,
                               const std::vector<std::string>& fragments, const std::vector<Watched>& outputs);

// ---- inputs and checks shared by the attention tests (SPEC §3)

// Per-head sinks: values uniform in [-1, hi], then +inf and -inf at heads 0 and 1 (h >= 3).
std::vector<float> make_sink(int h, float hi);
// n topk_length values covering every clamp case: partial, past topk, zero, negative, exact,
// INT32_MIN and INT32_MAX.
std::vector<int32_t> make_topk_lengths(int n, int topk);
// Random rows of indices into [0, num_keys) with entries of `invalid` and duplicates mixed
// in: a fraction `invalid_frac` of entries is invalid, entry (r * invalid_step) % topk of row
// r always is, and when topk >= 4 every row holds a duplicate.
std::vector<int32_t> random_indices(int64_t rows, int topk, int64_t num_keys, const std::vector<int32_t>& invalid,
                                    int invalid_step, float invalid_frac);
// The factor a per-head sink applies to out: 1 / (1 + exp(sink - lse)), 0 for a +inf sink
// and 1 for a -inf one.
double sink_factor(double sink, double lse);
// Rows of `d_v` values whose reference lse is -inf must be exactly zero; `message` names the
// failure.
void expect_empty_rows_zero(const std::vector<float>& out, const std::vector<double>& ref_lse, size_t d_v,
                            const std::string& message);

}  // namespace smla::test
