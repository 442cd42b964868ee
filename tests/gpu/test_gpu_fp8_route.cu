// The packed producer's two dequantization routes (cuda/common/fp8.cuh) on the device: the bf16
// route gives the float32 route's bits for every e4m3 byte but the two NaNs, at every scale it
// accepts (powers of two from a float32 subnormal up to 2^7, other bf16 values, 0), and refuses
// the scales it cannot take exactly.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cuda/common/fp8.cuh"

namespace {

// Thread t: scale t / 16, e4m3 bytes 16 (t % 16) .. 16 (t % 16) + 15 through both routes.
__global__ void both_routes(const float* scales, int n, uint32_t* f32_route, uint32_t* bf16_route, int* accepted) {
  const int t = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (t >= 16 * n) return;
  const float s = scales[t / 16];
  uint32_t w[4];
  for (int k = 0; k < 4; ++k) {
    const uint32_t b = 16u * static_cast<uint32_t>(t % 16) + 4u * k;
    w[k] = b | (b + 1) << 8 | (b + 2) << 16 | (b + 3) << 24;
  }
  const uint4 in = make_uint4(w[0], w[1], w[2], w[3]);
  uint4 lo, hi;
  smla::cuda::e4m3x16_to_bf16(in, s, lo, hi);
  const uint32_t a[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  smla::cuda::e4m3x16_to_bf16_route(in, smla::cuda::bf16_route_multiplier(s), lo, hi);
  const uint32_t b[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  for (int k = 0; k < 8; ++k) {
    f32_route[8 * t + k] = a[k];
    bf16_route[8 * t + k] = b[k];
  }
  if (t % 16 == 0) accepted[t / 16] = smla::cuda::bf16_route_scale(s);
}

// fp8_model1's multiplier for UE8M0 byte b (producer.cuh) against the general one.
__global__ void ue8m0_multipliers(uint32_t* general) {
  const uint32_t b = threadIdx.x;
  general[b] = smla::cuda::bf16_route_multiplier(smla::cuda::ue8m0_to_float(b));
}

float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

#define CU(x) ASSERT_EQ((x), cudaSuccess) << #x

TEST(GpuFp8Route, Bf16RouteGivesTheFloat32RouteBits) {
  const std::vector<float> take = {0.0f, bits_float(0x00400000u) /* 2^-127 */, std::ldexp(1.0f, -126), std::ldexp(1.0f, -60),
                                   std::ldexp(1.0f, -22), std::ldexp(1.0f, -9), 0.75f, 1.0f, 1.5f, std::ldexp(3.0f, -12),
                                   127.5f, 128.0f, -2.0f};
  const std::vector<float> refuse = {256.0f, 1.0f / 448.0f, 0.1f, 128.5f, bits_float(0x00004000u), NAN};
  std::vector<float> scales = take;
  scales.insert(scales.end(), refuse.begin(), refuse.end());
  const int n = static_cast<int>(scales.size());
  float* d_s = nullptr;
  uint32_t *d_a = nullptr, *d_b = nullptr;
  int* d_ok = nullptr;
  CU(cudaMalloc(&d_s, n * sizeof(float)));
  CU(cudaMalloc(&d_a, 128 * n * sizeof(uint32_t)));
  CU(cudaMalloc(&d_b, 128 * n * sizeof(uint32_t)));
  CU(cudaMalloc(&d_ok, n * sizeof(int)));
  CU(cudaMemcpy(d_s, scales.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CU(cudaMemset(d_a, 0xa5, 128 * n * sizeof(uint32_t)));  // poisoned: every word must be written
  CU(cudaMemset(d_b, 0x5a, 128 * n * sizeof(uint32_t)));
  CU(cudaMemset(d_ok, 0x7f, n * sizeof(int)));
  both_routes<<<(16 * n + 127) / 128, 128>>>(d_s, n, d_a, d_b, d_ok);
  CU(cudaGetLastError());
  std::vector<uint32_t> a(128 * n), b(128 * n);
  std::vector<int> ok(n);
  CU(cudaMemcpy(a.data(), d_a, a.size() * 4, cudaMemcpyDeviceToHost));
  CU(cudaMemcpy(b.data(), d_b, b.size() * 4, cudaMemcpyDeviceToHost));
  CU(cudaMemcpy(ok.data(), d_ok, ok.size() * 4, cudaMemcpyDeviceToHost));
  int nonzero = 0, subnormal = 0;
  for (int i = 0; i < n; ++i) {
    const bool expect = i < static_cast<int>(take.size());
    EXPECT_EQ(ok[i], expect ? 1 : 0) << "scale " << scales[i];
    if (!expect) continue;
    for (int byte = 0; byte < 256; ++byte) {
      if ((byte & 0x7f) == 0x7f) continue;  // NaN: finite on the bf16 route (documented)
      const uint32_t wa = a[128 * i + byte / 2], wb = b[128 * i + byte / 2];
      const uint16_t ha = static_cast<uint16_t>(byte % 2 ? wa >> 16 : wa), hb = static_cast<uint16_t>(byte % 2 ? wb >> 16 : wb);
      EXPECT_EQ(ha, hb) << "scale " << scales[i] << " byte 0x" << std::hex << byte;
      nonzero += (ha & 0x7fff) != 0;
      subnormal += (ha & 0x7f80) == 0 && (ha & 0x7f) != 0;
    }
  }
  EXPECT_GT(nonzero, 2000);  // the comparison saw real values,
  EXPECT_GT(subnormal, 10);  // bf16 subnormals among them (scale 2^-127)
  uint32_t* d_m = nullptr;
  CU(cudaMalloc(&d_m, 135 * sizeof(uint32_t)));
  ue8m0_multipliers<<<1, 135>>>(d_m);
  std::vector<uint32_t> m(135);
  CU(cudaMemcpy(m.data(), d_m, m.size() * 4, cudaMemcpyDeviceToHost));
  for (uint32_t byte = 0; byte <= 134; ++byte) EXPECT_EQ(m[byte], ((byte + 120u) << 7) * 0x10001u) << "UE8M0 byte " << byte;
  cudaFree(d_s);
  cudaFree(d_a);
  cudaFree(d_b);
  cudaFree(d_ok);
  cudaFree(d_m);
}

}  // namespace
