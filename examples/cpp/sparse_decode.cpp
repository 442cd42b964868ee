// sparse_decode on the CPU backend: the README's example, checked against a float64
// computation of SPEC §3 written out here, independently of the library. Exits 1 when a
// result is non-finite or outside the SPEC §6 tolerances.
//
// Build against the library (from the repository root, after a build into build/):
//   g++ -std=c++20 -I include examples/cpp/sparse_decode.cpp -L build -lsmla -lpthread
// (a library built with CUDA also needs -L/usr/local/cuda/lib64 -lcudart). CTest runs it as
// example_cpp_sparse_decode.
#include <smla/smla.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

int main() {
  using namespace smla;
  const int b = 1, s_q = 1, h_q = 16, d_qk = 576, blocks = 4, page = 64, topk = 8;
  std::vector<uint16_t> q(b * s_q * h_q * d_qk), kv(blocks * page * d_qk), out(b * s_q * h_q * kDv);
  for (size_t i = 0; i < q.size(); ++i) q[i] = float_to_bf16_bits(0.01f * (i % 7));
  for (size_t i = 0; i < kv.size(); ++i) kv[i] = float_to_bf16_bits(0.02f * (i % 5 + 1));
  std::vector<int32_t> idx = {0, 5, 70, 130, 255, -1, 999, 5};  // -1 and 999 are skipped
  std::vector<float> lse(b * s_q * h_q);

  SparseDecodeArgs a;
  a.q = make_view(q.data(), DType::bf16, {b, s_q, h_q, d_qk});
  a.cache = {make_view(kv.data(), DType::bf16, {blocks, page, d_qk}), CacheFormat::bf16};
  a.indices = make_view(idx.data(), DType::i32, {b, s_q, topk});
  a.out = make_view(out.data(), DType::bf16, {b, s_q, h_q, kDv});
  a.lse = make_view(lse.data(), DType::f32, {b, s_q, h_q});
  sparse_decode(a);  // CPU tensors run on the CPU backend; bad input throws smla::Error
  std::printf("lse = %f, out[0] = %f\n", lse[0], bf16_bits_to_float(out[0]));

  // The same row in float64 (SPEC §3): valid keys are the slots in [0, blocks * page), the
  // duplicate 5 counted twice; logits scaled by d_qk^-0.5; the value row is the first 512
  // elements of the key row.
  std::vector<int32_t> keys;
  for (int32_t s : idx)
    if (s >= 0 && s < blocks * page) keys.push_back(s);
  const double scale = 1.0 / std::sqrt(double(d_qk));
  int failures = 0;
  for (int h = 0; h < h_q; ++h) {
    const uint16_t* qh = q.data() + size_t(h) * d_qk;
    std::vector<double> logit;
    for (int32_t s : keys) {
      double dot = 0;
      for (int k = 0; k < d_qk; ++k)
        dot += double(bf16_bits_to_float(qh[k])) * bf16_bits_to_float(kv[size_t(s) * d_qk + k]);
      logit.push_back(scale * dot);
    }
    const double m = *std::max_element(logit.begin(), logit.end());
    double sum = 0;
    for (double l : logit) sum += std::exp(l - m);
    const double ref_lse = m + std::log(sum);
    std::vector<double> ref(kDv, 0.0);
    for (size_t j = 0; j < keys.size(); ++j)
      for (int k = 0; k < kDv; ++k)
        ref[k] += std::exp(logit[j] - ref_lse) * bf16_bits_to_float(kv[size_t(keys[j]) * d_qk + k]);

    // SPEC §6: lse within 1e-4 |ref| + 1e-5; out within 2e-2 max|ref| + 1e-3 per element and
    // 1e-2 in relative L2; nothing non-finite.
    double ref_max = 0, err2 = 0, ref2 = 0, worst = 0;
    for (int k = 0; k < kDv; ++k) ref_max = std::max(ref_max, std::abs(ref[k]));
    bool finite = std::isfinite(lse[h]);
    for (int k = 0; k < kDv; ++k) {
      const double got = bf16_bits_to_float(out[size_t(h) * kDv + k]);
      finite = finite && std::isfinite(got);
      const double e = std::abs(got - ref[k]);
      worst = std::max(worst, e);
      err2 += e * e;
      ref2 += ref[k] * ref[k];
    }
    const double lse_err = std::abs(double(lse[h]) - ref_lse);
    if (!finite || lse_err > 1e-4 * std::abs(ref_lse) + 1e-5 || worst > 2e-2 * ref_max + 1e-3 ||
        std::sqrt(err2) > 1e-2 * std::sqrt(ref2)) {
      std::printf("head %d: lse %.8f (float64: %.8f), max |out - float64| %.3e: FAILED\n", h, lse[h], ref_lse, worst);
      ++failures;
    }
  }

  // Bad input is rejected before anything is written.
  const float before = lse[0];
  try {
    SparseDecodeArgs bad = a;
    bad.lse = make_view(lse.data(), DType::f32, {b, s_q, h_q + 1});
    sparse_decode(bad);
    std::printf("a wrongly shaped lse was accepted: FAILED\n");
    ++failures;
  } catch (const Error& e) {
    std::printf("rejected as expected: %s\n", e.what());
  }
  if (lse[0] != before) ++failures;

  if (failures) {
    std::printf("FAILED\n");
    return 1;
  }
  std::printf("ok: %d heads match the float64 computation\n", h_q);
  return 0;
}
