// Microbenchmark and layout check for P·V on FP8 tensor cores (dense decode of fp8_e4m3 caches
// with fp8 q, consumer_fp8.cuh). FP8 wgmma takes B only K-major, so V (key rows of 512 e4m3
// values as the TMA unit lands them in the FP8 tiles: boxes of 64 one-byte columns x 64 rows,
// 64-byte swizzle) is transposed in shared memory into Vᵀ (512 rows of 64 keys, 64-byte
// swizzle) by the producer warpgroup's transpose_values (producer_e4m3_fp8.cuh).
// Part 1 (check): random finite e4m3 V (64 x 512) and P (64 heads x 64 keys), O = P V by
// m64n256k32 e4m3 wgmmas (P from registers in the k32 A-fragment layout, two k-steps, two
// halves of N) against a host float64 reference. Part 2 (cost): cycles per 64-key block of
// the transpose alone and of transpose + the four wgmmas, one CTA per SM, the median over CTAs.
// Both parts for the plain transpose and the bank-spread one (config.h kFp8SpreadTranspose).
// One JSON line per result. (Run on 2026-12-01 with a 128-byte-swizzled source: transpose 1603
// cycles a block, 2195 with the wgmmas; max |Δ| 3e-4 of max |O|. With the 64-byte-swizzled
// source, same day: plain 1594 / 2191 cycles, spread 846 / 1469, the same error in both:
// bench/results/2026-12-01-fp8-transpose-session18.jsonl.)
// Build and run on the GPU machine:
//   nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -I src -I include \
//     bench/micro/fp8_pv_transpose.cu -o fp8_pv_transpose && ./fp8_pv_transpose
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "cuda/common/barriers.cuh"
#include "cuda/common/wgmma.cuh"
#include "cuda/common/wgmma_fp8.cuh"
#include "cuda/sparse_decode/producer_e4m3_fp8.cuh"

namespace {

using namespace smla::cuda;

constexpr int kKeys = 64, kCols = 512, kHeads = 64;
constexpr int kSrcBytes = kKeys * kCols;  // eight boxes of 64 rows x 64 bytes
constexpr int kReps = 1000;

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Byte of (key k, column n) in the source tile: boxes of 64 one-byte columns, 64-byte swizzle.
__host__ __device__ __forceinline__ int src_offset(int k, int n) {
  return (n / 64) * 4096 + static_cast<int>(sw64_offset(k, (n % 64) / 16)) + n % 16;
}
// Vᵀ from N half h (columns 256 h ..), k-step s (keys 32 s ..).
__device__ __forceinline__ uint64_t vt_desc(uint32_t vt, int s, int h) { return gmma_desc_sw64(vt + h * 256 * 64 + s * 32); }

// P's k32 A fragments of k-step s: rows g and g + 8 (g = 16 warp + lane / 4), keys 4 (lane % 4)
// .. + 3 and 16 more.
__device__ __forceinline__ void load_p(const uint8_t* p, int s, uint32_t (&a)[4]) {
  const int lane = threadIdx.x & 31, g = 16 * ((threadIdx.x & 127) >> 5) + lane / 4, k = 32 * s + 4 * (lane % 4);
  auto word = [&](int r, int kk) { return *reinterpret_cast<const uint32_t*>(p + r * kKeys + kk); };
  a[0] = word(g, k);
  a[1] = word(g + 8, k);
  a[2] = word(g, k + 16);
  a[3] = word(g + 8, k + 16);
}

__device__ __forceinline__ void fill_src(const uint8_t* v, uint8_t* src) {
  for (int i = threadIdx.x; i < kKeys * (kCols / 16); i += blockDim.x) {
    const int k = i / (kCols / 16), n = 16 * (i % (kCols / 16));
    *reinterpret_cast<uint4*>(src + src_offset(k, n)) = *reinterpret_cast<const uint4*>(v + k * kCols + n);
  }
}

// Part 1: O = P V (64 x 512, float) through the transposed tile. kSpread: the transpose's
// bank-spread order (transpose_values).
template <bool kSpread>
__global__ void __launch_bounds__(128, 1) pv_check(const uint8_t* v, const uint8_t* p, float* o) {
  extern __shared__ __align__(1024) uint8_t smem[];
  uint8_t *src = smem, *dst = smem + kSrcBytes;
  fill_src(v, src);
  __syncthreads();
  sparse_decode_family::transpose_values<kSpread>(src, dst, threadIdx.x);
  fence_proxy_async();
  __syncthreads();
  uint32_t a[2][4];
  load_p(p, 0, a[0]);
  load_p(p, 1, a[1]);
  const int lane = threadIdx.x & 31, g = 16 * (threadIdx.x >> 5) + lane / 4;
  for (int h = 0; h < 2; ++h) {
    float d[32][4] = {};
    wgmma_fence();
    for (int s = 0; s < 2; ++s) wgmma_m64n256k32_rs_e4m3(d, a[s], vt_desc(smem_u32(dst), s, h));
    wgmma_commit();
    wgmma_wait_all();
    reg_fence(d);
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      const int n = 256 * h + 8 * j + 2 * (lane % 4);
      o[g * kCols + n] = d[j][0];
      o[g * kCols + n + 1] = d[j][1];
      o[(g + 8) * kCols + n] = d[j][2];
      o[(g + 8) * kCols + n + 1] = d[j][3];
    }
  }
}

// Part 2: cycles per block, one CTA per SM. kMma: also the four wgmmas of the block (one N half
// per accumulator set, as one consumer warpgroup of a 64-row tile would run half the columns
// twice... here both halves into one accumulator set, so the tensor work per block is the
// whole 64 x 512 x 64).
template <bool kMma, bool kSpread>
__global__ void __launch_bounds__(128, 1) cost(const uint8_t* v, const uint8_t* p, long long* cycles, float* sink) {
  extern __shared__ __align__(1024) uint8_t smem[];
  uint8_t *src = smem, *dst = smem + kSrcBytes;
  fill_src(v, src);
  __syncthreads();
  uint32_t a[2][4];
  load_p(p, 0, a[0]);
  load_p(p, 1, a[1]);
  float d[32][4] = {};
  const long long t0 = clock64();
  for (int r = 0; r < kReps; ++r) {
    sparse_decode_family::transpose_values<kSpread>(src, dst, threadIdx.x);
    if constexpr (kMma) {
      fence_proxy_async();
      named_bar_sync(1, 128);
      wgmma_fence();
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int s = 0; s < 2; ++s)
          wgmma_m64n256k32_rs_e4m3(d, a[s], vt_desc(smem_u32(dst), s, h));
      wgmma_commit();
      wgmma_wait_all();
      reg_fence(d);
    }
    named_bar_sync(1, 128);  // the next pass overwrites dst
  }
  const long long t1 = clock64();
  if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < 32; ++j) s += d[j][0] + d[j][3];
  s += static_cast<float>(dst[threadIdx.x]);
  if (s == 12345.f) sink[threadIdx.x] = s;
}

double e4m3_value(uint8_t b) {
  const int sign = b >> 7, e = (b >> 3) & 15, m = b & 7;
  const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return sign ? -mag : mag;
}
uint8_t random_e4m3(std::mt19937& rng, int max_exp) {  // finite, |x| < 2^(max_exp - 6)
  uint8_t b = static_cast<uint8_t>(rng());
  const int e = ((b >> 3) & 15) % (max_exp + 1);
  return static_cast<uint8_t>((b & 0x87) | (e << 3));
}

template <bool kSpread>
void check(const uint8_t* dv, const uint8_t* dp, float* dout, const std::vector<uint8_t>& v, const std::vector<uint8_t>& p) {
  const size_t smem = 2 * kSrcBytes;
  cudaFuncSetAttribute(pv_check<kSpread>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  cudaMemset(dout, 0xff, kHeads * kCols * sizeof(float));  // NaN poison
  pv_check<kSpread><<<1, 128, smem>>>(dv, dp, dout);
  const cudaError_t err = cudaDeviceSynchronize();
  std::vector<float> o(kHeads * kCols);
  cudaMemcpy(o.data(), dout, o.size() * sizeof(float), cudaMemcpyDeviceToHost);
  double max_err = 0, max_ref = 0;
  int bad = 0;
  for (int h = 0; h < kHeads; ++h)
    for (int n = 0; n < kCols; ++n) {
      double ref = 0;
      for (int k = 0; k < kKeys; ++k) ref += e4m3_value(p[h * kKeys + k]) * e4m3_value(v[k * kCols + n]);
      const double got = o[h * kCols + n], e = std::fabs(got - ref);
      if (!(e <= 1e-3 * std::fabs(ref) + 1e-4)) ++bad;  // NaN counts as bad
      max_err = std::max(max_err, std::isnan(got) ? INFINITY : e);
      max_ref = std::max(max_ref, std::fabs(ref));
    }
  // ok: within 1e-3 of the largest |O| (the FP8 wgmma's accumulation errs in absolute terms);
  // "bad": elements outside 1e-3 relative + 1e-4, for the record.
  std::printf("{\"part\": \"check\", \"spread\": %s, \"max_abs_err\": %.3g, \"max_abs_ref\": %.3g, \"bad\": %d, "
              "\"ok\": %s, \"error\": \"%s\"}\n",
              kSpread ? "true" : "false", max_err, max_ref, bad, max_err <= 1e-3 * max_ref ? "true" : "false",
              cudaGetErrorString(err));
}

template <bool kMma, bool kSpread>
void time_it(int sms, const uint8_t* dv, const uint8_t* dp, long long* dcyc, float* dsink) {
  const size_t smem = 2 * kSrcBytes;
  cudaFuncSetAttribute(cost<kMma, kSpread>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  cost<kMma, kSpread><<<sms, 128, smem>>>(dv, dp, dcyc, dsink);
  cost<kMma, kSpread><<<sms, 128, smem>>>(dv, dp, dcyc, dsink);  // the second launch is timed
  const cudaError_t err = cudaDeviceSynchronize();
  std::vector<long long> c(sms);
  cudaMemcpy(c.data(), dcyc, sms * sizeof(long long), cudaMemcpyDeviceToHost);
  std::sort(c.begin(), c.end());
  std::printf("{\"part\": \"cost\", \"spread\": %s, \"with_wgmma\": %s, \"cycles_per_block\": %.1f, \"error\": \"%s\"}\n",
              kSpread ? "true" : "false", kMma ? "true" : "false", double(c[sms / 2]) / kReps, cudaGetErrorString(err));
}

}  // namespace

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  std::mt19937 rng(7);
  std::vector<uint8_t> v(kKeys * kCols), p(kHeads * kKeys);
  for (auto& b : v) b = random_e4m3(rng, 14);
  for (auto& b : p) b = random_e4m3(rng, 7);  // |p| < 2, as softmax weights (and their lo parts) are
  uint8_t *dv = nullptr, *dp = nullptr;
  float *dout = nullptr, *dsink = nullptr;
  long long* dcyc = nullptr;
  cudaMalloc(&dv, v.size());
  cudaMalloc(&dp, p.size());
  cudaMalloc(&dout, kHeads * kCols * sizeof(float));
  cudaMalloc(&dsink, 128 * sizeof(float));
  cudaMalloc(&dcyc, sms * sizeof(long long));
  cudaMemcpy(dv, v.data(), v.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(dp, p.data(), p.size(), cudaMemcpyHostToDevice);
  check<false>(dv, dp, dout, v, p);
  check<true>(dv, dp, dout, v, p);
  time_it<false, false>(sms, dv, dp, dcyc, dsink);
  time_it<false, true>(sms, dv, dp, dcyc, dsink);
  time_it<true, false>(sms, dv, dp, dcyc, dsink);
  time_it<true, true>(sms, dv, dp, dcyc, dsink);
  cudaFree(dv);
  cudaFree(dp);
  cudaFree(dout);
  cudaFree(dsink);
  cudaFree(dcyc);
  return 0;
}
