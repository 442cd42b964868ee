// Fast reproducible random numbers for building inputs: splitmix64 streams, one per chunk,
// so multi-GB inputs fill in parallel and the same seed gives the same data on any machine.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "reference/parallel.h"
#include "smla/numeric.h"

namespace smla::cli {

class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Uniform in [0, n), n > 0.
  uint64_t below(uint64_t n) { return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64); }

 private:
  uint64_t s_;
};

// A seed for stream k derived from a base seed (streams do not overlap in practice).
inline uint64_t stream_seed(uint64_t seed, uint64_t k) { return Rng(seed ^ (k * 0xd1b54a32d192ed03ull)).next(); }

// n bf16 values uniform in [lo, hi], written as bits; filled in parallel chunks.
inline void fill_bf16(uint16_t* dst, int64_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  constexpr int64_t kChunk = int64_t(1) << 20;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  ref::parallel_for(chunks, [&](int64_t c) {
    Rng r(stream_seed(seed, static_cast<uint64_t>(c)));
    const int64_t end = std::min(n, (c + 1) * kChunk);
    const float step = (hi - lo) / 65535.0f;
    for (int64_t i = c * kChunk; i < end;) {
      uint64_t u = r.next();
      for (int k = 0; k < 4 && i < end; ++k, ++i, u >>= 16)
        dst[i] = float_to_bf16_bits(lo + step * static_cast<float>(u & 0xffff));
    }
  });
}

inline void fill_f32(float* dst, int64_t n, uint64_t seed, float lo, float hi) {
  Rng r(seed);
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(r.uniform(lo, hi));
}

// `count` distinct values of [0, n) in random order (count <= n), by a partial Fisher-Yates
// over `perm`, which must hold a permutation of [0, n) and stays one.
inline void sample_distinct(Rng& r, std::vector<int32_t>& perm, int64_t count, int32_t* dst) {
  const int64_t n = static_cast<int64_t>(perm.size());
  for (int64_t j = 0; j < count; ++j) {
    const int64_t k = j + static_cast<int64_t>(r.below(static_cast<uint64_t>(n - j)));
    std::swap(perm[j], perm[k]);
    dst[j] = perm[j];
  }
}

}  // namespace smla::cli
