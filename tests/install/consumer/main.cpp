// Merges two partial attention results on the CPU backend and checks the result:
// equal log-sum-exps weigh the parts equally.
#include <smla/smla.h>

#include <cmath>
#include <cstdio>
#include <vector>

#ifdef SMLA_WITH_CUDA
constexpr int kWithCuda = 1;
#else
constexpr int kWithCuda = 0;
#endif

int main() {
  using namespace smla;
  const int n = 2, T = 1, h = 2, d_v = 4;
  std::vector<float> out_parts(n * T * h * d_v), lse_parts(n * T * h, 0.5f);
  for (int i = 0; i < T * h * d_v; ++i) {
    out_parts[i] = 1.0f;                  // part 0
    out_parts[T * h * d_v + i] = 3.0f;    // part 1
  }
  std::vector<float> out(T * h * d_v), lse(T * h);

  MergeStatesArgs a;
  a.out_parts = make_view(out_parts.data(), DType::f32, {n, T, h, d_v});
  a.lse_parts = make_view(lse_parts.data(), DType::f32, {n, T, h});
  a.out = make_view(out.data(), DType::f32, {T, h, d_v});
  a.lse = make_view(lse.data(), DType::f32, {T, h});
  try {
    merge_states(a);
  } catch (const Error& e) {
    std::printf("merge_states rejected its input: %s\n", e.what());
    return 1;
  }

  const float want_lse = 0.5f + std::log(2.0f);
  for (float v : out) {
    if (std::fabs(v - 2.0f) > 1e-5f) {
      std::printf("out = %f, expected 2\n", v);
      return 1;
    }
  }
  for (float v : lse) {
    if (std::fabs(v - want_lse) > 1e-5f) {
      std::printf("lse = %f, expected %f\n", v, want_lse);
      return 1;
    }
  }
  std::printf("smla %s cuda=%d: merge_states ok\n", SMLA_VERSION, kWithCuda);
  return 0;
}
