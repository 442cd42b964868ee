// Microbenchmark: what converting a gathered FP8 key block costs the sparse-decode producer
// (src/cuda/sparse_decode/producer.cuh) when it converts from registers, as it does, and stores
// 16-bit values into a K tile (1 KB per key). One CTA per SM, one warpgroup converting, like the
// 64-row CTA's producer: each thread takes two keys of every 64-key block (a quarter of each
// 64-byte chunk of their rows) and writes them with 16-byte stores in the tile's layout.
//
// Ways (--way, or all): 0 the shipped path (e4m3 -> f16 -> f32, x scale, -> bf16), 1 e4m3 -> f16
// only (lower bound of any f16 tile), 2 e4m3 -> f16 x f16 scale (one HMUL2), 3 e4m3 -> f16 x
// mantissa x power of two (two HMUL2: any float32 scale, f16 rounding once), 4 no conversion
// (the stores alone), 5 e4m3 -> bf16 by bit moves x bf16 scale (exact for power-of-two scales).
// (A way 6, the stores as st.async into the own tile on an mbarrier's transaction count, failed
// on the device with a plain and with a one-CTA cluster launch; bench/results has the record.)
//
// Build and run on the GPU machine:
//   nvcc -O3 -std=c++17 -arch=sm_90a -I src bench/micro/convert_from_registers.cu -o convert_bench && ./convert_bench
// Prints one JSON line per way: cycles per 64-key block (median over CTAs) and per key.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "cuda/common/fp8.cuh"

namespace {

constexpr int kThreads = 128;
constexpr int kChunks = 8;      // 64-byte latent chunks of a V3.2 row (512 e4m3 values)
constexpr int kRounds = 2;      // keys per thread per block
constexpr int kD = 576;         // tile row: 512 latent + 64 RoPE values
constexpr int kTileBytes = 64 * kD * 2;
constexpr int kBlocks = 256;    // blocks converted per CTA

__device__ __forceinline__ uint32_t h2_bits(__half2 h) { return *reinterpret_cast<uint32_t*>(&h); }
__device__ __forceinline__ __half2 e4m3x2_to_h2(uint32_t pair) {
  const __half2_raw r = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(pair & 0xffffu), __NV_E4M3);
  return *reinterpret_cast<const __half2*>(&r);
}
// f16 bits of e4m3 values -> bf16 bits of the same values times 2^-112 (every e4m3 value is an
// f16 normal, so the result is a bf16 normal): sign kept, exponent and mantissa moved down 3.
__device__ __forceinline__ uint32_t f16x2_to_bf16x2_shifted(uint32_t h) {
  const uint32_t mag = (h >> 3) & 0x0fff0fffu;
  return (h & 0x80008000u) | mag;
}

struct Scale {
  float f;          // way 0
  __half2 h;        // way 2: the scale in f16
  __half2 m, p2;    // way 3: mantissa in [1, 2) and the power of two
  __nv_bfloat162 b; // way 5: scale x 2^112 in bf16
};

template <int kWay>
__device__ __forceinline__ void convert16(const uint4& in, const Scale& s, uint4& lo, uint4& hi) {
  if constexpr (kWay == 0) {
    smla::cuda::e4m3x16_to_bf16(in, s.f, lo, hi);
  } else if constexpr (kWay == 4) {
    lo = in;
    hi = in;
  } else {
    const uint32_t w[4] = {in.x, in.y, in.z, in.w};
    uint32_t o[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const __half2 h = e4m3x2_to_h2(w[i / 2] >> (16 * (i % 2)));
      if constexpr (kWay == 1) o[i] = h2_bits(h);
      if constexpr (kWay == 2) o[i] = h2_bits(__hmul2(h, s.h));
      if constexpr (kWay == 3) o[i] = h2_bits(__hmul2(__hmul2(h, s.m), s.p2));
      if constexpr (kWay == 5) {
        uint32_t b = f16x2_to_bf16x2_shifted(h2_bits(h));
        __nv_bfloat162 v = __hmul2(*reinterpret_cast<__nv_bfloat162*>(&b), s.b);
        o[i] = *reinterpret_cast<uint32_t*>(&v);
      }
    }
    lo = make_uint4(o[0], o[1], o[2], o[3]);
    hi = make_uint4(o[4], o[5], o[6], o[7]);
  }
}

template <int kWay>
__global__ void __launch_bounds__(kThreads, 1) convert_kernel(const uint4* src, const float* scales, long long* cycles) {
  extern __shared__ __align__(128) uint8_t smem[];
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5, q = lane >> 3, key = warp * 8 + (lane & 7);
  uint4 lat[kRounds][kChunks];
  Scale sc[kRounds];
#pragma unroll
  for (int r = 0; r < kRounds; ++r) {
#pragma unroll
    for (int i = 0; i < kChunks; ++i) lat[r][i] = src[(blockIdx.x * kThreads + t) * kRounds * kChunks + r * kChunks + i];
    const float f = scales[(blockIdx.x * kThreads + t) * kRounds + r];
    int e;
    const float m = frexpf(f, &e);  // f = m * 2^e, m in [0.5, 1)
    sc[r].f = f;
    sc[r].h = __float2half2_rn(f);
    sc[r].m = __float2half2_rn(2.f * m);
    sc[r].p2 = __float2half2_rn(ldexpf(1.f, e - 1));
    sc[r].b = __float2bfloat162_rn(ldexpf(f, 112));
  }
  __syncthreads();
  const long long t0 = clock64();
  for (int blk = 0; blk < kBlocks; ++blk) {
    uint8_t* tile = smem + (blk & 1) * kTileBytes;
#pragma unroll
    for (int r = 0; r < kRounds; ++r) {
      const int j = r * 32 + key;
      uint8_t* dst = tile + (j >> 3) * 16 * kD + (j & 7) * 16;
#pragma unroll
      for (int i = 0; i < kChunks; ++i) {
        uint4 v = lat[r][i];
        // The block's bytes change every iteration as gathered rows would, so the compiler
        // cannot hoist the conversion out of the loop (an empty asm statement does not stop it).
        const uint32_t salt = static_cast<uint32_t>(blk) * 0x01010101u & 0x3f3f3f3fu;
        v = make_uint4(v.x ^ salt, v.y ^ salt, v.z ^ salt, v.w ^ salt);
        uint4 lo, hi;
        convert16<kWay>(v, sc[r], lo, hi);
        const int c = 8 * i + 2 * q;
        *reinterpret_cast<uint4*>(dst + c * 128) = lo;
        *reinterpret_cast<uint4*>(dst + (c + 1) * 128) = hi;
      }
    }
    __syncwarp();
  }
  __syncthreads();
  if (t == 0) cycles[blockIdx.x] = clock64() - t0;
}

template <int kWay>
void run(const uint4* src, const float* scales, long long* d_cycles, int ctas, const char* what) {
  const int smem = 2 * kTileBytes + 16;
  cudaFuncSetAttribute(convert_kernel<kWay>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  convert_kernel<kWay><<<ctas, kThreads, smem>>>(src, scales, d_cycles);  // warm-up
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaEventRecord(e0);
  convert_kernel<kWay><<<ctas, kThreads, smem>>>(src, scales, d_cycles);
  cudaEventRecord(e1);
  if (cudaDeviceSynchronize() != cudaSuccess) {
    std::printf("{\"way\": %d, \"error\": \"%s\"}\n", kWay, cudaGetErrorString(cudaGetLastError()));
    return;
  }
  std::vector<long long> c(ctas);
  cudaMemcpy(c.data(), d_cycles, ctas * sizeof(long long), cudaMemcpyDeviceToHost);
  std::nth_element(c.begin(), c.begin() + ctas / 2, c.end());
  const double per_block = static_cast<double>(c[ctas / 2]) / kBlocks;
  float ms = 0.f;
  cudaEventElapsedTime(&ms, e0, e1);
  // The event time checks the clock counter: ns per block from the whole launch.
  std::printf("{\"way\": %d, \"what\": \"%s\", \"cycles_per_block\": %.1f, \"cycles_per_key\": %.2f, \"ns_per_block\": %.1f}\n",
              kWay, what, per_block, per_block / 64, 1e6 * ms / kBlocks);
}

}  // namespace

int main(int argc, char** argv) {
  int way = -1;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string_view(argv[i]) == "--way") way = std::atoi(argv[i + 1]);
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const size_t n_vec = static_cast<size_t>(sms) * kThreads * kRounds * kChunks;
  std::vector<uint4> h_src(n_vec);
  uint32_t x = 12345;
  auto next = [&] { x = x * 1664525u + 1013904223u; return x; };
  // Finite e4m3 bytes only (0x7f / 0xff are NaN).
  auto byte = [&] { uint32_t b = next() >> 24; return (b & 0x7f) == 0x7f ? b - 1 : b; };
  for (auto& v : h_src) {
    uint32_t w[4];
    for (auto& wi : w) wi = byte() | byte() << 8 | byte() << 16 | byte() << 24;
    v = make_uint4(w[0], w[1], w[2], w[3]);
  }
  std::vector<float> h_scales(static_cast<size_t>(sms) * kThreads * kRounds);
  for (auto& s : h_scales) s = 0.001f + static_cast<float>(next() % 1000) * 1e-5f;
  uint4* d_src;
  float* d_scales;
  long long* d_cycles;
  cudaMalloc(&d_src, n_vec * sizeof(uint4));
  cudaMalloc(&d_scales, h_scales.size() * sizeof(float));
  cudaMalloc(&d_cycles, sms * sizeof(long long));
  cudaMemcpy(d_src, h_src.data(), n_vec * sizeof(uint4), cudaMemcpyHostToDevice);
  cudaMemcpy(d_scales, h_scales.data(), h_scales.size() * sizeof(float), cudaMemcpyHostToDevice);
  if (way < 0 || way == 0) run<0>(d_src, d_scales, d_cycles, sms, "e4m3 -> f16 -> f32 x scale -> bf16 (shipped)");
  if (way < 0 || way == 1) run<1>(d_src, d_scales, d_cycles, sms, "e4m3 -> f16, no scale");
  if (way < 0 || way == 2) run<2>(d_src, d_scales, d_cycles, sms, "e4m3 -> f16 x f16 scale");
  if (way < 0 || way == 3) run<3>(d_src, d_scales, d_cycles, sms, "e4m3 -> f16 x mantissa x 2^k");
  if (way < 0 || way == 4) run<4>(d_src, d_scales, d_cycles, sms, "no conversion (stores only)");
  if (way < 0 || way == 5) run<5>(d_src, d_scales, d_cycles, sms, "e4m3 -> bf16 bit moves x bf16 scale");
  return 0;
}
