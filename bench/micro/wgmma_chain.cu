// Microbenchmark: how long one narrow consumer's chain of small wgmmas takes. S^T = K Q^T in a
// 16/32-row tile is 36 m64nNk16 wgmmas (d_qk 576) accumulating into one S^T, waited for at the
// end of each block; if the tensor pipe serializes a chain on its accumulator, splitting the
// k-steps over independent accumulators (summed afterwards) shortens it. P V's 32 wgmmas already
// spread over 8 accumulators (the O^T tiles).
//
// One CTA per SM, one warpgroup, A from registers (RS, as the raw-ring consumers issue them) or
// from shared memory (SS, as consumer_narrow_wgmma.cuh), B from shared memory, bf16; `reps`
// chains of 36 k-steps, each committed and waited for. Prints one JSON line per (N, acc, way):
// cycles per chain (clock64 of CTA 0; median over CTAs in "median").
// Second part (not yet run): W = 1, 2, 3 warpgroups of a CTA each run their own RS chain at
// once, as the raw-ring tiles' consumer warpgroups do: if the cycles per chain grow with W, the
// SM's tensor pipe, not each warpgroup's chain, bounds narrow wgmmas (a third consumer
// warpgroup measured level in the 16-row kernels). The same with e4m3 operands at k32
// (m64nNk32, 18 k-steps for the same 576 values): what P V on FP8 tensor cores would cost
// per key.
// Build and run on the GPU machine:
//   nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -I src \
//     bench/micro/wgmma_chain.cu -o wgmma_chain && ./wgmma_chain
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "cuda/common/barriers.cuh"
#include "cuda/common/wgmma.cuh"

namespace {

using namespace smla::cuda;

constexpr int kSteps = 36;     // k-steps of S^T at d_qk 576
constexpr int kCols = 16 * kSteps;
constexpr int kReps = 2000;

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

template <int N, int kAcc, bool kSs>
__global__ void __launch_bounds__(128, 1) chain(long long* cycles, float* sink) {
  extern __shared__ __align__(1024) uint8_t smem[];
  constexpr int kBBytes = N * kCols * 2;  // B: N x 576 bf16, K-major core matrices
  for (int i = threadIdx.x; i < (kBBytes + 64 * kCols * 2) / 4; i += blockDim.x)
    reinterpret_cast<uint32_t*>(smem)[i] = 0x3c003c00u;  // small finite bf16 values
  fence_proxy_async();
  __syncthreads();
  const uint64_t db = gmma_desc(smem_u32(smem), 128, 16 * kCols);
  const uint64_t da = gmma_desc(smem_u32(smem + kBBytes), 128, 16 * kCols);
  uint32_t a[4] = {0x3c003c00u, 0x3c003c00u, 0x3c003c00u, 0x3c003c00u};
  float d[kAcc][N / 8][4];
#pragma unroll
  for (int k = 0; k < kAcc; ++k)
#pragma unroll
    for (int j = 0; j < N / 8; ++j) d[k][j][0] = d[k][j][1] = d[k][j][2] = d[k][j][3] = 0.f;
  const long long t0 = clock64();
  for (int r = 0; r < kReps; ++r) {
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kSteps; ++ks) {
      if constexpr (kSs) wgmma_m64nNk16_ss<N, 0>(d[ks % kAcc], desc_add(da, ks * 16), desc_add(db, ks * 16), 1);
      else wgmma_m64nNk16_rs<N, true>(d[ks % kAcc], a, desc_add(db, ks * 16), 1);
    }
    wgmma_commit();
    wgmma_wait<0>();
#pragma unroll
    for (int k = 0; k < kAcc; ++k) reg_fence(d[k]);
  }
  const long long t1 = clock64();
  if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < kAcc; ++k)
#pragma unroll
    for (int j = 0; j < N / 8; ++j) s += d[k][j][0] + d[k][j][3];
  if (s == 12345.f) sink[threadIdx.x] = s;  // keeps the chains alive
}

template <int N, int kAcc, bool kSs>
void run(int sms, long long* dcyc, float* dsink) {
  constexpr size_t smem = (N + 64) * kCols * 2;
  cudaFuncSetAttribute(chain<N, kAcc, kSs>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  chain<N, kAcc, kSs><<<sms, 128, smem>>>(dcyc, dsink);
  chain<N, kAcc, kSs><<<sms, 128, smem>>>(dcyc, dsink);  // the second launch is timed
  cudaDeviceSynchronize();
  std::vector<long long> c(sms);
  cudaMemcpy(c.data(), dcyc, sms * sizeof(long long), cudaMemcpyDeviceToHost);
  std::sort(c.begin(), c.end());
  std::printf("{\"N\": %d, \"acc\": %d, \"way\": \"%s\", \"cycles_per_chain\": %.1f, \"per_wgmma\": %.2f, \"error\": \"%s\"}\n",
              N, kAcc, kSs ? "ss" : "rs", double(c[sms / 2]) / kReps, double(c[sms / 2]) / kReps / kSteps,
              cudaGetErrorString(cudaGetLastError()));
}

template <int N, bool kSs>
void all_acc(int sms, long long* dcyc, float* dsink) {
  run<N, 1, kSs>(sms, dcyc, dsink);
  run<N, 2, kSs>(sms, dcyc, dsink);
  run<N, 4, kSs>(sms, dcyc, dsink);
}

// d[N / 8][4] (+)= A (64 x 32 e4m3 from registers) * B (32 x N e4m3, K-major, shared).
template <int N>
__device__ __forceinline__ void wgmma_m64nNk32_rs_e4m3(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t desc_b) {
  static_assert(N == 16, "N is 16");
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 "
               "{%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, %12, p, 1, 1;\n}\n"
               : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),
                 "+f"(d[1][2]), "+f"(d[1][3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
}

// W warpgroups, each its own chain of RS wgmmas over 576 values (f16: 36 k16 steps; e4m3: 18
// k32 steps) into one accumulator; thread 0 of each warpgroup records its cycles.
template <int W, bool kFp8>
__global__ void __launch_bounds__(128 * W, 1) chains(long long* cycles, float* sink) {
  extern __shared__ __align__(1024) uint8_t smem[];
  constexpr int N = 16, kBBytes = N * kCols * 2;
  for (int i = threadIdx.x; i < kBBytes / 4; i += blockDim.x)
    reinterpret_cast<uint32_t*>(smem)[i] = kFp8 ? 0x38383838u : 0x3c003c00u;  // 1.0 in e4m3 / f16
  fence_proxy_async();
  __syncthreads();
  const uint64_t db = gmma_desc(smem_u32(smem), 128, 16 * kCols);
  const uint32_t one = kFp8 ? 0x38383838u : 0x3c003c00u;
  uint32_t a[4] = {one, one, one, one};
  float d[N / 8][4];
#pragma unroll
  for (int j = 0; j < N / 8; ++j) d[j][0] = d[j][1] = d[j][2] = d[j][3] = 0.f;
  constexpr int kK = kFp8 ? kSteps / 2 : kSteps;
  const long long t0 = clock64();
  for (int r = 0; r < kReps; ++r) {
    wgmma_fence();
#pragma unroll 6  // fully unrolled, the 36 descriptors exceed 384 threads' registers (C7512)
    for (int ks = 0; ks < kK; ++ks) {
      if constexpr (kFp8) wgmma_m64nNk32_rs_e4m3<N>(d, a, desc_add(db, ks * 16));
      else wgmma_m64nNk16_rs<N, false>(d, a, desc_add(db, ks * 16), 1);
    }
    wgmma_commit();
    wgmma_wait<0>();
    reg_fence(d);
  }
  const long long t1 = clock64();
  if ((threadIdx.x & 127) == 0) cycles[blockIdx.x * W + (threadIdx.x >> 7)] = t1 - t0;
  const float s = d[0][0] + d[1][3];
  if (s == 12345.f) sink[threadIdx.x & 127] = s;
}

template <int W, bool kFp8>
void run_chains(int sms, long long* dcyc, float* dsink) {
  constexpr size_t smem = 16 * kCols * 2;
  cudaFuncSetAttribute(chains<W, kFp8>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  chains<W, kFp8><<<sms, 128 * W, smem>>>(dcyc, dsink);
  chains<W, kFp8><<<sms, 128 * W, smem>>>(dcyc, dsink);  // the second launch is timed
  cudaDeviceSynchronize();
  std::vector<long long> c(sms * W);
  cudaMemcpy(c.data(), dcyc, c.size() * sizeof(long long), cudaMemcpyDeviceToHost);
  std::sort(c.begin(), c.end());
  const double per = double(c[c.size() / 2]) / kReps;
  std::printf("{\"warpgroups\": %d, \"type\": \"%s\", \"N\": 16, \"cycles_per_chain\": %.1f, \"per_wgmma\": %.2f, "
              "\"per_576_values_per_sm\": %.1f, \"error\": \"%s\"}\n",
              W, kFp8 ? "e4m3 k32" : "f16 k16", per, per / (kFp8 ? kSteps / 2 : kSteps), per / W,
              cudaGetErrorString(cudaGetLastError()));
}

}  // namespace

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  long long* dcyc = nullptr;
  float* dsink = nullptr;
  cudaMalloc(&dcyc, sms * sizeof(long long));
  cudaMalloc(&dsink, 128 * sizeof(float));
  all_acc<16, false>(sms, dcyc, dsink);
  all_acc<16, true>(sms, dcyc, dsink);
  all_acc<32, false>(sms, dcyc, dsink);
  all_acc<32, true>(sms, dcyc, dsink);
  cudaFree(dcyc);
  cudaMalloc(&dcyc, 3 * sms * sizeof(long long));
  run_chains<1, false>(sms, dcyc, dsink);
  run_chains<2, false>(sms, dcyc, dsink);
  run_chains<3, false>(sms, dcyc, dsink);
  run_chains<1, true>(sms, dcyc, dsink);
  run_chains<2, true>(sms, dcyc, dsink);
  run_chains<3, true>(sms, dcyc, dsink);
  cudaFree(dsink);
  return 0;
}
