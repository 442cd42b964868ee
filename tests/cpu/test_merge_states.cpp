// merge_states (SPEC §3, §4.4) against a float64 computation written here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "common/strided_buffer.h"
#include "common/test_util.h"
#include "smla/numeric.h"
#include "smla/ops.h"

namespace smla {
namespace {

namespace tu = smla::test;

const double kInf = std::numeric_limits<double>::infinity();
const float kInfF = std::numeric_limits<float>::infinity();

// Bytes holding float32 or bf16 elements, plus a strided view; the pointer is taken at use.
struct Buffer : tu::StridedLayout {
  std::vector<uint8_t> bytes;

  size_t es() const { return dtype == DType::bf16 ? 2 : 4; }
  TensorView view() const { return view_at(const_cast<uint8_t*>(bytes.data()) + base * es()); }
  float get(int64_t off) const {
    if (dtype == DType::bf16) {
      uint16_t b;
      std::memcpy(&b, bytes.data() + off * 2, 2);
      return bf16_bits_to_float(b);
    }
    float f;
    std::memcpy(&f, bytes.data() + off * 4, 4);
    return f;
  }
  void set(int64_t off, float v) {
    if (dtype == DType::bf16) {
      const uint16_t b = float_to_bf16_bits(v);
      std::memcpy(bytes.data() + off * 2, &b, 2);
    } else {
      std::memcpy(bytes.data() + off * 4, &v, 4);
    }
  }
  std::vector<float> values() const {
    std::vector<float> v;
    for (int64_t o : offsets()) v.push_back(get(o));
    return v;
  }
};

// What every byte of a fresh buffer holds: NaN as float32 and as bf16.
constexpr uint32_t kPoison = 0xffffffffu;

// Filled with NaN (0xff bytes) everywhere; `stride` empty = packed.
Buffer make_buffer(DType dtype, std::vector<int64_t> shape, std::vector<int64_t> stride = {}) {
  Buffer b;
  static_cast<tu::StridedLayout&>(b) = tu::make_layout(dtype, std::move(shape), std::move(stride));
  b.bytes.assign(b.storage_elements() * b.es(), 0xff);
  return b;
}

// ------------------------------------------------------------------ one call, checked

struct Problem {
  int n = 3, T = 4, h = 4, d_v = 512;
  DType parts_dtype = DType::f32, out_dtype = DType::bf16;
  std::vector<float> lse_parts;  // [n, T, h]
  std::vector<float> out_parts;  // [n, T, h, d_v]; parts with a non-finite lse hold NaN
  std::vector<float> sink;       // empty = absent
  bool strided = false;
};

// Random lse values with -inf, +inf and NaN parts mixed in; outputs NaN where skipped.
void fill_random(Problem& p) {
  p.lse_parts.resize(int64_t{p.n} * p.T * p.h);
  for (auto& l : p.lse_parts) {
    const float u = tu::uniform(0, 1);
    l = u < 0.15f ? -kInfF : u < 0.2f ? kInfF : u < 0.25f ? NAN : tu::uniform(-3.0f, 12.0f);
  }
  p.out_parts.resize(p.lse_parts.size() * p.d_v);
  for (size_t r = 0; r < p.lse_parts.size(); ++r)
    for (int k = 0; k < p.d_v; ++k)
      p.out_parts[r * p.d_v + k] = std::isfinite(p.lse_parts[r]) ? tu::uniform(-1.0f, 1.0f) : NAN;
}

std::vector<float> make_sink(int h) { return tu::make_sink(h, 10.0f); }

struct Outcome {
  std::vector<float> out, lse;
  std::vector<double> ref_out, ref_lse;
};

Outcome reference(const Problem& p, const std::vector<float>& parts) {
  Outcome r;
  r.ref_out.assign(int64_t{p.T} * p.h * p.d_v, 0.0);
  r.ref_lse.assign(int64_t{p.T} * p.h, -kInf);
  for (int64_t row = 0; row < int64_t{p.T} * p.h; ++row) {
    double m = -kInf;
    for (int i = 0; i < p.n; ++i) {
      const double l = p.lse_parts[i * int64_t{p.T} * p.h + row];
      if (std::isfinite(l)) m = std::max(m, l);
    }
    if (m == -kInf) continue;
    double sum = 0;
    for (int i = 0; i < p.n; ++i) {
      const double l = p.lse_parts[i * int64_t{p.T} * p.h + row];
      if (std::isfinite(l)) sum += std::exp(l - m);
    }
    const double lse = m + std::log(sum);
    const double f = p.sink.empty() ? 1.0 : tu::sink_factor(p.sink[row % p.h], lse);
    for (int i = 0; i < p.n; ++i) {
      const int64_t pr = i * int64_t{p.T} * p.h + row;
      const double l = p.lse_parts[pr];
      if (!std::isfinite(l)) continue;
      for (int k = 0; k < p.d_v; ++k) r.ref_out[row * p.d_v + k] += std::exp(l - lse) * f * parts[pr * p.d_v + k];
    }
    r.ref_lse[row] = lse;
  }
  return r;
}

Outcome run(const Problem& p) {
  const int64_t n = p.n, T = p.T, h = p.h, d = p.d_v, pad = 8;
  // Strided: parts interleaved per token, padded rows; lse with the head outermost.
  Buffer parts = p.strided ? make_buffer(p.parts_dtype, {n, T, h, d}, {h * (d + pad), n * h * (d + pad), d + pad, 1})
                           : make_buffer(p.parts_dtype, {n, T, h, d});
  Buffer lse_parts = p.strided ? make_buffer(DType::f32, {n, T, h}, {1, n, T * n}) : make_buffer(DType::f32, {n, T, h});
  Buffer out = p.strided ? make_buffer(p.out_dtype, {T, h, d}, {h * (d + pad), d + pad, 1})
                         : make_buffer(p.out_dtype, {T, h, d});
  Buffer lse = p.strided ? make_buffer(DType::f32, {T, h}, {1, T}) : make_buffer(DType::f32, {T, h});
  const auto po = parts.offsets(), lo = lse_parts.offsets();
  for (size_t k = 0; k < po.size(); ++k) parts.set(po[k], p.out_parts[k]);
  for (size_t k = 0; k < lo.size(); ++k) lse_parts.set(lo[k], p.lse_parts[k]);
  Buffer sink = make_buffer(DType::f32, {h});
  for (int i = 0; i < static_cast<int>(p.sink.size()); ++i) sink.set(i, p.sink[i]);

  MergeStatesArgs a;
  a.out_parts = parts.view();
  a.lse_parts = lse_parts.view();
  if (!p.sink.empty()) a.attn_sink = sink.view();
  a.out = out.view();
  a.lse = lse.view();
  merge_states(a);

  // The gaps of a strided out keep their poison.
  EXPECT_EQ(tu::count_written_outside(out, out.bytes.data(), out.bytes.size() / out.es(), out.es(), &kPoison), 0u)
      << "elements outside out's view were written";

  Outcome r = reference(p, parts.values());
  r.out = out.values();
  r.lse = lse.values();
  return r;
}

void check(const Outcome& r, const std::string& what) {
  tu::expect_out_close(r.out, r.ref_out, what + " out");
  tu::expect_lse_close(r.lse, r.ref_lse, what + " lse");
  const size_t d_v = r.out.size() / r.lse.size();
  tu::expect_empty_rows_zero(r.out, r.ref_lse, d_v, what + ": rows with no finite part must be exactly zero");
}

// ------------------------------------------------------------------ tests

TEST(MergeStates, RandomPartsEveryDtypePair) {
  for (DType pd : {DType::f32, DType::bf16})
    for (DType od : {DType::bf16, DType::f32})
      for (bool strided : {false, true}) {
        Problem p;
        p.n = 3, p.T = 6, p.h = 4, p.d_v = 512;
        p.parts_dtype = pd, p.out_dtype = od, p.strided = strided;
        fill_random(p);
        if (strided) p.sink = make_sink(p.h);
        check(run(p), std::string(dtype_name(pd)) + " -> " + dtype_name(od) + (strided ? " strided" : ""));
      }
}

TEST(MergeStates, NonFinitePartsAreSkipped) {
  Problem p;
  p.n = 3, p.T = 4, p.h = 1, p.d_v = 64;
  // Token 0: one finite part among -inf and NaN; 1: +inf next to finite parts; 2: every
  // part skipped; 3: finite parts only. Layout [n, T, h] with h = 1.
  p.lse_parts = {-kInfF, kInfF, NAN, 1.0f, 2.0f, 1.0f, NAN, 4.0f, NAN, 3.0f, -kInfF, -2.0f};
  p.out_parts.resize(p.lse_parts.size() * p.d_v);
  for (size_t r = 0; r < p.lse_parts.size(); ++r)
    for (int k = 0; k < p.d_v; ++k)
      p.out_parts[r * p.d_v + k] = std::isfinite(p.lse_parts[r]) ? tu::uniform(-1.0f, 1.0f) : NAN;
  const Outcome r = run(p);
  check(r, "non-finite parts");
  // Token 0 has one finite part: the merge is that part, and its lse, exactly.
  for (int k = 0; k < p.d_v; ++k) ASSERT_EQ(r.out[k], round_to_bf16(p.out_parts[(1 * p.T + 0) * p.d_v + k]));
  EXPECT_EQ(r.lse[0], 2.0f);
  EXPECT_EQ(r.lse[2], -kInfF);
}

TEST(MergeStates, NoFinitePartGivesZeroWhateverTheSink) {
  Problem p;
  p.n = 2, p.T = 2, p.h = 4, p.d_v = 32;
  p.lse_parts.assign(p.n * p.T * p.h, -kInfF);
  p.lse_parts[1] = NAN;
  p.lse_parts[p.T * p.h + 2] = kInfF;
  p.out_parts.assign(p.lse_parts.size() * p.d_v, NAN);
  p.sink = {kInfF, -kInfF, 0.0f, 5.0f};
  for (DType od : {DType::bf16, DType::f32}) {
    p.out_dtype = od;
    const Outcome r = run(p);
    check(r, "no finite part");
    for (float l : r.lse) EXPECT_EQ(l, -kInfF);
  }
}

TEST(MergeStates, SinglePartPassesThrough) {
  Problem p;
  p.n = 1, p.T = 5, p.h = 3, p.d_v = 512;
  p.parts_dtype = DType::f32, p.out_dtype = DType::f32;
  fill_random(p);
  const Outcome r = run(p);
  check(r, "n = 1");
  for (size_t row = 0; row < r.lse.size(); ++row) {
    if (!std::isfinite(p.lse_parts[row])) continue;
    EXPECT_EQ(r.lse[row], p.lse_parts[row]);
    for (int k = 0; k < p.d_v; ++k) ASSERT_EQ(r.out[row * p.d_v + k], p.out_parts[row * p.d_v + k]);
  }
}

TEST(MergeStates, LargeAndDistantLseAreStable) {
  Problem p;
  p.n = 3, p.T = 3, p.h = 1, p.d_v = 16;
  // exp(1e4) overflows any float type: only a max-shifted sum survives. A part 300 below
  // the others weighs exp(-300): nothing, but not NaN.
  p.lse_parts = {10000.0f, -5000.0f, 1.0f, 10001.5f, -5000.5f, -299.0f, 9999.0f, -4990.0f, 1e30f};
  p.out_parts.resize(p.lse_parts.size() * p.d_v);
  for (auto& v : p.out_parts) v = tu::uniform(-1.0f, 1.0f);
  p.sink = {10000.5f};
  check(run(p), "large lse");
}

TEST(MergeStates, AnyValueWidth) {
  for (int d_v : {1, 7, 576}) {
    Problem p;
    p.n = 2, p.T = 3, p.h = 5, p.d_v = d_v;
    p.parts_dtype = d_v == 7 ? DType::bf16 : DType::f32;
    fill_random(p);
    p.sink = make_sink(p.h);
    p.strided = d_v != 1;
    check(run(p), "d_v " + std::to_string(d_v));
  }
}

// Attention over disjoint key sets, merged with the sink once, equals attention over their union.
TEST(MergeStates, SplitsOfAttentionEqualUnsplit) {
  const int T = 3, h = 8, d_qk = 64, d_v = 48, keys = 30, n = 3;
  const std::vector<float> q = tu::random_f32(T * h * d_qk, -1, 1);
  const std::vector<float> K = tu::random_f32(keys * d_qk, -1, 1);
  // Key j of token t belongs to part (j + t) % n, except that part 2 is empty for token 0.
  auto part_of = [&](int t, int j) { return (t == 0 && (j + t) % n == 2) ? 0 : (j + t) % n; };
  const double scale = 0.3;
  auto attend = [&](int t, int hh, int part, double* out) {  // part -1: every key
    const float* qr = q.data() + (t * h + hh) * d_qk;
    std::vector<double> s;
    std::vector<int> js;
    for (int j = 0; j < keys; ++j) {
      if (part >= 0 && part_of(t, j) != part) continue;
      double dot = 0;
      for (int k = 0; k < d_qk; ++k) dot += double(qr[k]) * K[j * d_qk + k];
      s.push_back(scale * dot);
      js.push_back(j);
    }
    std::fill(out, out + d_v, 0.0);
    if (s.empty()) return -kInf;
    const double m = *std::max_element(s.begin(), s.end());
    double sum = 0;
    for (double v : s) sum += std::exp(v - m);
    const double lse = m + std::log(sum);
    for (size_t i = 0; i < s.size(); ++i)
      for (int k = 0; k < d_v; ++k) out[k] += std::exp(s[i] - lse) * K[js[i] * d_qk + k];
    return lse;
  };

  Problem p;
  p.n = n, p.T = T, p.h = h, p.d_v = d_v;
  p.parts_dtype = DType::f32, p.out_dtype = DType::f32;
  p.sink = make_sink(h);
  p.lse_parts.resize(n * T * h);
  p.out_parts.resize(n * T * h * d_v);
  std::vector<double> o(d_v);
  for (int i = 0; i < n; ++i)
    for (int t = 0; t < T; ++t)
      for (int hh = 0; hh < h; ++hh) {
        const int64_t pr = (int64_t{i} * T + t) * h + hh;
        p.lse_parts[pr] = static_cast<float>(attend(t, hh, i, o.data()));
        for (int k = 0; k < d_v; ++k) p.out_parts[pr * d_v + k] = static_cast<float>(o[k]);
      }
  Outcome r = run(p);
  check(r, "merged vs its own reference");
  std::vector<double> whole_out(T * h * d_v), whole_lse(T * h);
  for (int t = 0; t < T; ++t)
    for (int hh = 0; hh < h; ++hh) {
      const int row = t * h + hh;
      const double lse = attend(t, hh, -1, whole_out.data() + row * d_v);
      const double f = tu::sink_factor(p.sink[hh], lse);
      for (int k = 0; k < d_v; ++k) whole_out[row * d_v + k] *= f;
      whole_lse[row] = lse;
    }
  tu::expect_out_close(r.out, whole_out, "merged splits vs unsplit attention");
  tu::expect_lse_close(r.lse, whole_lse, "merged lse vs unsplit lse");
}

TEST(MergeStates, NoTokensDoesNothing) {
  Problem p;
  p.n = 2, p.T = 0, p.h = 4, p.d_v = 8;
  const Outcome r = run(p);
  EXPECT_TRUE(r.out.empty());
}

// ------------------------------------------------------------------ validation

class MergeStatesValidation : public ::testing::Test {
 protected:
  static constexpr int n = 2, T = 3, h = 4, d_v = 512;
  std::vector<float> parts = tu::random_f32(n * T * h * d_v, -1, 1);
  std::vector<float> lse_parts = tu::random_f32(n * T * h, -1, 1);
  std::vector<float> sink = tu::random_f32(h, -1, 1);
  std::vector<uint16_t> out = std::vector<uint16_t>(T * h * d_v, 0x7fc0);
  std::vector<float> lse = std::vector<float>(T * h, NAN);

  MergeStatesArgs valid() {
    MergeStatesArgs a;
    a.out_parts = make_view(parts.data(), DType::f32, {n, T, h, d_v});
    a.lse_parts = make_view(lse_parts.data(), DType::f32, {n, T, h});
    a.attn_sink = make_view(sink.data(), DType::f32, {h});
    a.out = make_view(out.data(), DType::bf16, {T, h, d_v});
    a.lse = make_view(lse.data(), DType::f32, {T, h});
    return a;
  }
  void expect_rejected(const MergeStatesArgs& a, const std::vector<std::string>& fragments) {
    tu::expect_rejected_untouched({[&] { merge_states(a); }}, fragments, {tu::watch("out", out), tu::watch("lse", lse)});
  }
};

TEST_F(MergeStatesValidation, ValidArgumentsRun) {
  merge_states(valid());
  for (float v : lse) EXPECT_TRUE(std::isfinite(v));
}

TEST_F(MergeStatesValidation, OutParts) {
  auto a = valid();
  a.out_parts.data = nullptr;
  expect_rejected(a, {"out_parts must be float32 or bfloat16 of shape (*, *, *, *), got nothing"});
  a = valid();
  a.out_parts.dtype = DType::f16;
  expect_rejected(a, {"out_parts must be float32 or bfloat16", "got float16 (2, 3, 4, 512)"});
  a = valid();
  a.out_parts = make_view(parts.data(), DType::f32, {T, h, d_v});
  expect_rejected(a, {"out_parts must be float32 or bfloat16 of shape (*, *, *, *), got float32 (3, 4, 512)"});
  a = valid();
  a.out_parts.shape[0] = 0;
  expect_rejected(a, {"out_parts must be", "n >= 1", "got float32 (0, 3, 4, 512)"});
  a = valid();
  a.out_parts.shape[2] = 0;
  expect_rejected(a, {"out_parts must be", "h >= 1", "got float32 (2, 3, 0, 512)"});
  a = valid();
  a.out_parts.shape[3] = 0;
  expect_rejected(a, {"out_parts must be", "d_v >= 1", "got float32 (2, 3, 4, 0)"});
  a = valid();
  a.out_parts.stride[3] = 2;
  a.out_parts.shape[3] = 256;
  expect_rejected(a, {"out_parts must be", "last dimension contiguous", "strides (6144, 2048, 512, 2)"});
  a = valid();
  a.out_parts.stride[1] = -a.out_parts.stride[1];
  expect_rejected(a, {"out_parts must be", "non-negative strides"});
}

TEST_F(MergeStatesValidation, LseParts) {
  auto a = valid();
  a.lse_parts.dtype = DType::bf16;
  expect_rejected(a, {"lse_parts must be float32 of shape (2, 3, 4), got bfloat16 (2, 3, 4)"});
  a = valid();
  a.lse_parts = make_view(lse_parts.data(), DType::f32, {n, T * h});
  expect_rejected(a, {"lse_parts must be float32 of shape (2, 3, 4), got float32 (2, 12)"});
  a = valid();
  a.lse_parts.data = nullptr;
  expect_rejected(a, {"lse_parts must be", "got nothing"});
  a = valid();
  a.lse_parts.stride[0] = -1;
  expect_rejected(a, {"lse_parts must be", "non-negative strides"});
  a = valid();
  a.lse_parts.device = cuda_device(0);
  expect_rejected(a, {"lse_parts must be on cpu like out_parts, got on cuda:0"});
}

TEST_F(MergeStatesValidation, Sink) {
  auto a = valid();
  a.attn_sink.dtype = DType::bf16;
  expect_rejected(a, {"attn_sink must be float32 of shape (4,), got bfloat16 (4,)"});
  a = valid();
  a.attn_sink.shape[0] = 3;
  expect_rejected(a, {"attn_sink must be float32 of shape (4,), got float32 (3,)"});
  a = valid();
  a.attn_sink.device = cuda_device(0);
  expect_rejected(a, {"attn_sink must be on cpu like out_parts"});
  a = valid();
  a.attn_sink.stride[0] = -1;
  expect_rejected(a, {"attn_sink must be", "non-negative strides"});
}

TEST_F(MergeStatesValidation, Outputs) {
  auto a = valid();
  a.out.dtype = DType::f16;
  expect_rejected(a, {"out must be bfloat16 or float32 of shape (3, 4, 512), got float16 (3, 4, 512)"});
  a = valid();
  a.out.shape[2] = 576;
  expect_rejected(a, {"out must be bfloat16 or float32 of shape (3, 4, 512), got bfloat16 (3, 4, 576)"});
  a = valid();
  a.out = make_view(out.data(), DType::bf16, {1, T, h, d_v});
  expect_rejected(a, {"out must be", "got bfloat16 (1, 3, 4, 512)"});
  a = valid();
  a.out.data = nullptr;
  expect_rejected(a, {"out must be", "got nothing"});
  a = valid();
  a.out.stride[2] = 2;
  expect_rejected(a, {"out must be", "last dimension contiguous"});
  a = valid();
  a.out.device = cuda_device(0);
  expect_rejected(a, {"out must be on cpu like out_parts"});
  a = valid();
  a.lse.dtype = DType::bf16;
  expect_rejected(a, {"lse must be float32 of shape (3, 4), got bfloat16 (3, 4)"});
  a = valid();
  a.lse.shape[0] = 2;
  expect_rejected(a, {"lse must be float32 of shape (3, 4), got float32 (2, 4)"});
  a = valid();
  a.lse.data = nullptr;
  expect_rejected(a, {"lse must be", "got nothing"});
  a = valid();
  a.lse.device = cuda_device(0);
  expect_rejected(a, {"lse must be on cpu like out_parts"});
  a = valid();
  a.lse.stride[1] = -1;
  expect_rejected(a, {"lse must be", "non-negative strides"});
}

TEST_F(MergeStatesValidation, OutputsMustNotAliasInputs) {
  auto a = valid();
  a.out.data = parts.data();
  expect_rejected(a, {"out must be a buffer distinct from out_parts"});
  a = valid();
  a.lse.data = lse_parts.data();
  expect_rejected(a, {"lse must be a buffer distinct from lse_parts"});
  a = valid();
  a.lse.data = sink.data();
  expect_rejected(a, {"lse must be a buffer distinct from attn_sink"});
  a = valid();
  a.lse.data = out.data();
  expect_rejected(a, {"lse must be a buffer distinct from out"});
}

// CUDA tensors are checked on the host too; nothing here is dereferenced.
TEST_F(MergeStatesValidation, CudaAlignmentAndBackend) {
  auto on_cuda = [&] {
    auto a = valid();
    for (TensorView* t : {&a.out_parts, &a.lse_parts, &a.attn_sink, &a.out, &a.lse}) t->device = cuda_device(0);
    return a;
  };
  auto a = on_cuda();
  a.out_parts.data = reinterpret_cast<uint8_t*>(parts.data()) + 2;
  expect_rejected(a, {"out_parts must be aligned to 4 bytes", "address % 4 = 2"});
  a = on_cuda();
  a.lse_parts.data = reinterpret_cast<uint8_t*>(lse_parts.data()) + 1;
  expect_rejected(a, {"lse_parts must be aligned to 4 bytes", "address % 4 = 1"});
  a = on_cuda();
  a.out.data = reinterpret_cast<uint8_t*>(out.data()) + 1;
  expect_rejected(a, {"out must be aligned to 2 bytes", "address % 2 = 1"});
  a = on_cuda();
  a.lse.data = reinterpret_cast<uint8_t*>(lse.data()) + 3;
  expect_rejected(a, {"lse must be aligned to 4 bytes", "address % 4 = 3"});
#if !SMLA_WITH_CUDA
  a = on_cuda();
  EXPECT_THROW(merge_states(a), RuntimeError);
  // Rows of odd width are accepted on the device as on the host.
  a.out_parts = make_view(parts.data(), DType::f32, {n, T, h, 7});
  a.out_parts.device = cuda_device(0);
  a.out = make_view(out.data(), DType::bf16, {T, h, 7});
  a.out.device = cuda_device(0);
  EXPECT_THROW(merge_states(a), RuntimeError);
#endif
}

}  // namespace
}  // namespace smla
