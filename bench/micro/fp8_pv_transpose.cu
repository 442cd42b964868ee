// Microbenchmark and layout check for P·V on FP8 tensor cores (the next step for dense
// decode of fp8_e4m3 caches with fp8 q, docs/PERF.md fifteenth pass). FP8 wgmma takes B only
// K-major, so V (key rows of 512 e4m3 values, as the TMA unit lands them: boxes of 128 bytes x
// 64 rows, 128-byte swizzle) must be transposed in shared memory into Vᵀ (512 rows of 64 keys).
// One warpgroup does it with 16-byte loads, 4 x 4 byte transposes (prmt) and 16-byte stores:
// thread t takes keys 16 (t % 4) .. + 15 of columns 16 (t / 4) .. + 15 (all 64 x 512 in one pass).
// Vᵀ in two layouts: the no-swizzle canonical one (8 x 16-byte core matrices; LBO 128, SBO 512;
// its stores meet on one 16-byte bank group: 8-way conflicts) and the 64-byte swizzle (rows of 64
// bytes, chunk ^= (row / 2) % 4; SBO 512; 2-way conflicts on paper).
//
// Part 1 (check): random finite e4m3 V (64 x 512) and P (64 heads x 64 keys), O = P V by
// m64n256k32 e4m3 wgmmas (P from registers in the k32 A-fragment layout, two k-steps, two
// halves of N) against a host float64 reference, for both layouts. Part 2 (cost): cycles per
// 64-key block of the transpose alone and of transpose + the four wgmmas, one CTA per SM, the
// median over CTAs. One JSON line per result.
// Build and run on the GPU machine:
//   nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -I src \
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

namespace {

using namespace smla::cuda;

constexpr int kKeys = 64, kCols = 512, kHeads = 64;
constexpr int kSrcBytes = kKeys * kCols;  // four 128-byte-wide boxes of 64 rows (8192 bytes each)
constexpr int kReps = 1000;

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Byte of (key k, column n) in the source tile: TMA boxes of 128 columns, 128-byte swizzle.
__host__ __device__ __forceinline__ int src_offset(int k, int n) {
  return (n / 128) * 8192 + k * 128 + ((((n % 128) / 16) ^ (k % 8)) * 16) + n % 16;
}
// Byte of the 16-byte chunk q (keys 16q .. 16q + 15) of Vᵀ row n.
template <bool kSw64>
__device__ __forceinline__ int dst_offset(int n, int q) {
  if constexpr (kSw64) return (n / 8) * 512 + (n % 8) * 64 + ((q ^ ((n % 8) >> 1)) * 16);
  else return (n / 8) * 512 + q * 128 + (n % 8) * 16;
}
template <bool kSw64>
__device__ __forceinline__ uint64_t vt_desc(uint32_t addr) {
  return kSw64 ? (gmma_desc(addr, 16, 512) | (2ull << 62)) : gmma_desc(addr, 128, 512);
}
// Start of k-step s (keys 32 s ..) and N half h (columns 256 h ..) of Vᵀ.
template <bool kSw64>
__device__ __forceinline__ uint32_t vt_step(int s, int h) {
  return h * (256 / 8) * 512 + s * (kSw64 ? 32 : 256);
}

// A, B, C, D: 4 columns of keys k .. k + 3; out[b]: column b of the four keys.
__device__ __forceinline__ void transpose4(uint32_t a, uint32_t b, uint32_t c, uint32_t d, uint32_t (&out)[4]) {
  const uint32_t ab_lo = __byte_perm(a, b, 0x5140), ab_hi = __byte_perm(a, b, 0x7362);
  const uint32_t cd_lo = __byte_perm(c, d, 0x5140), cd_hi = __byte_perm(c, d, 0x7362);
  out[0] = __byte_perm(ab_lo, cd_lo, 0x5410);
  out[1] = __byte_perm(ab_lo, cd_lo, 0x7632);
  out[2] = __byte_perm(ab_hi, cd_hi, 0x5410);
  out[3] = __byte_perm(ab_hi, cd_hi, 0x7632);
}

// The warpgroup's transpose of the whole 64 x 512 tile (128 threads).
template <bool kSw64>
__device__ __forceinline__ void transpose_tile(const uint8_t* src, uint8_t* dst) {
  const int t = threadIdx.x & 127, q = t % 4, cg = t / 4;
  uint4 row[16];
#pragma unroll
  for (int j = 0; j < 16; ++j) row[j] = *reinterpret_cast<const uint4*>(src + src_offset(16 * q + j, 16 * cg));
#pragma unroll
  for (int w = 0; w < 4; ++w) {  // columns 4w .. 4w + 3 of the thread's 16
    uint32_t col[4][4];          // col[b][m]: column 4w + b, keys 4m .. 4m + 3
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      auto word = [&](int j) { return reinterpret_cast<const uint32_t*>(&row[4 * m + j])[w]; };
      uint32_t o[4];
      transpose4(word(0), word(1), word(2), word(3), o);
#pragma unroll
      for (int b = 0; b < 4; ++b) col[b][m] = o[b];
    }
#pragma unroll
    for (int b = 0; b < 4; ++b)
      *reinterpret_cast<uint4*>(dst + dst_offset<kSw64>(16 * cg + 4 * w + b, q)) =
          make_uint4(col[b][0], col[b][1], col[b][2], col[b][3]);
  }
}

// d[32][4] (+)= A (64 x 32 e4m3 from registers) * B (32 x 256 e4m3, K-major, shared).
__device__ __forceinline__ void wgmma_m64n256k32_rs_e4m3(float (&d)[32][4], const uint32_t (&a)[4], uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
      "}, {%128, %129, %130, %131}, %132, p, 1, 1;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]),
        "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]),
        "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
        "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]),
        "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]),
        "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]),
        "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]),
        "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3]),
        "+f"(d[16][0]), "+f"(d[16][1]), "+f"(d[16][2]), "+f"(d[16][3]), "+f"(d[17][0]), "+f"(d[17][1]), "+f"(d[17][2]), "+f"(d[17][3]),
        "+f"(d[18][0]), "+f"(d[18][1]), "+f"(d[18][2]), "+f"(d[18][3]), "+f"(d[19][0]), "+f"(d[19][1]), "+f"(d[19][2]), "+f"(d[19][3]),
        "+f"(d[20][0]), "+f"(d[20][1]), "+f"(d[20][2]), "+f"(d[20][3]), "+f"(d[21][0]), "+f"(d[21][1]), "+f"(d[21][2]), "+f"(d[21][3]),
        "+f"(d[22][0]), "+f"(d[22][1]), "+f"(d[22][2]), "+f"(d[22][3]), "+f"(d[23][0]), "+f"(d[23][1]), "+f"(d[23][2]), "+f"(d[23][3]),
        "+f"(d[24][0]), "+f"(d[24][1]), "+f"(d[24][2]), "+f"(d[24][3]), "+f"(d[25][0]), "+f"(d[25][1]), "+f"(d[25][2]), "+f"(d[25][3]),
        "+f"(d[26][0]), "+f"(d[26][1]), "+f"(d[26][2]), "+f"(d[26][3]), "+f"(d[27][0]), "+f"(d[27][1]), "+f"(d[27][2]), "+f"(d[27][3]),
        "+f"(d[28][0]), "+f"(d[28][1]), "+f"(d[28][2]), "+f"(d[28][3]), "+f"(d[29][0]), "+f"(d[29][1]), "+f"(d[29][2]), "+f"(d[29][3]),
        "+f"(d[30][0]), "+f"(d[30][1]), "+f"(d[30][2]), "+f"(d[30][3]), "+f"(d[31][0]), "+f"(d[31][1]), "+f"(d[31][2]), "+f"(d[31][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}

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

// Part 1: O = P V (64 x 512, float) through the transposed tile.
template <bool kSw64>
__global__ void __launch_bounds__(128, 1) pv_check(const uint8_t* v, const uint8_t* p, float* o) {
  extern __shared__ __align__(1024) uint8_t smem[];
  uint8_t *src = smem, *dst = smem + kSrcBytes;
  fill_src(v, src);
  __syncthreads();
  transpose_tile<kSw64>(src, dst);
  fence_proxy_async();
  __syncthreads();
  uint32_t a[2][4];
  load_p(p, 0, a[0]);
  load_p(p, 1, a[1]);
  const int lane = threadIdx.x & 31, g = 16 * (threadIdx.x >> 5) + lane / 4;
  for (int h = 0; h < 2; ++h) {
    float d[32][4] = {};
    wgmma_fence();
    for (int s = 0; s < 2; ++s) wgmma_m64n256k32_rs_e4m3(d, a[s], vt_desc<kSw64>(smem_u32(dst) + vt_step<kSw64>(s, h)));
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
template <bool kSw64, bool kMma>
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
    transpose_tile<kSw64>(src, dst);
    if constexpr (kMma) {
      fence_proxy_async();
      named_bar_sync(1, 128);
      wgmma_fence();
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int s = 0; s < 2; ++s)
          wgmma_m64n256k32_rs_e4m3(d, a[s], vt_desc<kSw64>(smem_u32(dst) + vt_step<kSw64>(s, h)));
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

template <bool kSw64>
void check(const uint8_t* dv, const uint8_t* dp, float* dout, const std::vector<uint8_t>& v, const std::vector<uint8_t>& p) {
  const size_t smem = 2 * kSrcBytes;
  cudaFuncSetAttribute(pv_check<kSw64>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  cudaMemset(dout, 0xff, kHeads * kCols * sizeof(float));  // NaN poison
  pv_check<kSw64><<<1, 128, smem>>>(dv, dp, dout);
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
  std::printf("{\"part\": \"check\", \"vt_layout\": \"%s\", \"max_abs_err\": %.3g, \"max_abs_ref\": %.3g, \"bad\": %d, "
              "\"ok\": %s, \"error\": \"%s\"}\n",
              kSw64 ? "sw64" : "canonical", max_err, max_ref, bad, bad == 0 ? "true" : "false", cudaGetErrorString(err));
}

template <bool kSw64, bool kMma>
void time_it(int sms, const uint8_t* dv, const uint8_t* dp, long long* dcyc, float* dsink) {
  const size_t smem = 2 * kSrcBytes;
  cudaFuncSetAttribute(cost<kSw64, kMma>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  cost<kSw64, kMma><<<sms, 128, smem>>>(dv, dp, dcyc, dsink);
  cost<kSw64, kMma><<<sms, 128, smem>>>(dv, dp, dcyc, dsink);  // the second launch is timed
  const cudaError_t err = cudaDeviceSynchronize();
  std::vector<long long> c(sms);
  cudaMemcpy(c.data(), dcyc, sms * sizeof(long long), cudaMemcpyDeviceToHost);
  std::sort(c.begin(), c.end());
  std::printf("{\"part\": \"cost\", \"vt_layout\": \"%s\", \"with_wgmma\": %s, \"cycles_per_block\": %.1f, \"error\": \"%s\"}\n",
              kSw64 ? "sw64" : "canonical", kMma ? "true" : "false", double(c[sms / 2]) / kReps, cudaGetErrorString(err));
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
  time_it<true, false>(sms, dv, dp, dcyc, dsink);
  time_it<false, true>(sms, dv, dp, dcyc, dsink);
  time_it<true, true>(sms, dv, dp, dcyc, dsink);
  cudaFree(dv);
  cudaFree(dp);
  cudaFree(dout);
  cudaFree(dsink);
  cudaFree(dcyc);
  return 0;
}
