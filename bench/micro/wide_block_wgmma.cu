// Microbenchmark: the tensor-core work of one 64-key block in a 64-row CTA (64 heads, d_qk 576,
// d_v 512), with no loads, no softmax and no barriers on tiles: the floor under the 64-row
// consumers' ~3400 cycles per block (docs/PERF.md, sixteenth pass). Shared memory holds Q and
// one K tile (no-swizzle core matrices, as config.h Smem) and a P tile.
//   qk:      one warpgroup's S = Q K^T (36 x m64n64k16, Q and K from shared memory), waited for;
//   qk2:     two warpgroups each run that chain at once (cycles per pair of chains);
//   pv:      one warpgroup's O[:, 0:256] += P V (8 x m64n128k16, P from registers);
//   block:   the shipped schedule's MMAs: WG0 QK^T, then WG0 P V from registers beside WG1 P V
//            from shared memory (a named barrier hands over, as "P ready" does);
//   pair:    the seesaw's MMAs for two blocks: both QK^Ts at once, then all four P Vs.
// One CTA per SM; cycles per repetition (clock64 of warp 0; median over CTAs). One JSON line each.
// Build and run on the GPU machine:
//   nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -I src \
//     bench/micro/wide_block_wgmma.cu -o wide_block_wgmma && ./wide_block_wgmma
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "cuda/common/barriers.cuh"
#include "cuda/common/wgmma.cuh"
#include "cuda/sparse_decode/k_tile.cuh"

namespace {

using namespace smla::cuda;
using KT = smla::cuda::sparse_decode_family::KTileDesc<576, false>;

constexpr int kD = 576, kReps = 400;
constexpr int kQBytes = 64 * kD * 2, kKBytes = 64 * kD * 2, kPBytes = 64 * 64 * 2;
constexpr size_t kSmem = kQBytes + kKBytes + kPBytes;
enum Mode { kQk = 0, kQk2 = 1, kPv = 2, kBlock = 3, kPair = 4 };

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

struct Descs {
  uint64_t q, k, p;
  uint32_t v;
};

__device__ __forceinline__ void qk(float (&sc)[8][4], const Descs& d) {
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < kD / 16; ++ks) wgmma_m64n64k16_ss(sc, desc_add(d.q, ks * 16), desc_add(d.k, KT::k_step(ks)), ks > 0);
  wgmma_commit();
}
__device__ __forceinline__ float (&lo(float (&o)[32][4]))[16][4] { return *reinterpret_cast<float(*)[16][4]>(&o[0]); }
__device__ __forceinline__ float (&hi(float (&o)[32][4]))[16][4] { return *reinterpret_cast<float(*)[16][4]>(&o[16]); }
__device__ __forceinline__ void pv_rs(float (&o)[32][4], const uint32_t (&a)[4], uint32_t v) {
  const uint64_t dv = gmma_desc(v, KT::kRowGroup, 128);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const uint64_t d = desc_add(dv, kk * KT::kVKStep);
    wgmma_m64n128k16_rs(lo(o), a, d);
    wgmma_m64n128k16_rs(hi(o), a, desc_add(d, KT::v_col(128) / 16));
  }
  wgmma_commit();
}
__device__ __forceinline__ void pv_ss(float (&o)[32][4], uint64_t dp, uint32_t v) {
  const uint64_t dv = gmma_desc(v, KT::kRowGroup, 128);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const uint64_t d = desc_add(dv, kk * KT::kVKStep);
    wgmma_m64n128k16_ss_tb(lo(o), desc_add(dp, kk * 16), d, 1);
    wgmma_m64n128k16_ss_tb(hi(o), desc_add(dp, kk * 16), desc_add(d, KT::v_col(128) / 16), 1);
  }
  wgmma_commit();
}

template <int kMode>
__global__ void __launch_bounds__(256, 1) block_mmas(long long* cycles, float* sink) {
  extern __shared__ __align__(1024) uint8_t smem[];
  for (int i = threadIdx.x; i < static_cast<int>(kSmem / 4); i += blockDim.x)
    reinterpret_cast<uint32_t*>(smem)[i] = 0x3c003c00u;  // small finite bf16 values
  fence_proxy_async();
  __syncthreads();
  const int wg = threadIdx.x / 128;
  const Descs d{gmma_desc(smem_u32(smem), 128, KT::kRowGroup), KT::k(smem_u32(smem + kQBytes)),
                gmma_desc(smem_u32(smem + kQBytes + kKBytes), 128, 8 * 128), smem_u32(smem + kQBytes) + 256 * wg / 8 * 128};
  const uint32_t a[4] = {0x3c003c00u, 0x3c003c00u, 0x3c003c00u, 0x3c003c00u};
  float sc[8][4], o[32][4];
#pragma unroll
  for (int i = 0; i < 32; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
#pragma unroll
  for (int i = 0; i < 8; ++i) sc[i][0] = sc[i][1] = sc[i][2] = sc[i][3] = 0.f;
  const bool active = kMode == kQk2 || kMode == kBlock || kMode == kPair || wg == 0;
  const long long t0 = clock64();
  for (int r = 0; r < kReps && active; ++r) {
    if constexpr (kMode == kQk || kMode == kQk2) {
      qk(sc, d);
      wgmma_wait<0>();
      reg_fence(sc);
    } else if constexpr (kMode == kPv) {
      pv_rs(o, a, d.v);
      wgmma_wait<0>();
      reg_fence(o);
    } else if constexpr (kMode == kBlock) {
      if (wg == 0) {
        qk(sc, d);
        wgmma_wait<0>();
        reg_fence(sc);
        named_bar_arrive(1, 256);
        pv_rs(o, a, d.v);
      } else {
        named_bar_sync(1, 256);
        pv_ss(o, d.p, d.v);
      }
      wgmma_wait<0>();
      reg_fence(o);
    } else {  // kPair
      qk(sc, d);
      wgmma_wait<0>();
      reg_fence(sc);
      pv_rs(o, a, d.v);
      pv_ss(o, d.p, d.v);
      wgmma_wait<0>();
      reg_fence(o);
    }
  }
  const long long t1 = clock64();
  if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
  const float s = sc[0][0] + o[0][0] + o[31][3];
  if (s == 12345.f) sink[threadIdx.x] = s;  // keeps the work alive
}

template <int kMode>
void run(const char* name, int sms, long long* dcyc, float* dsink) {
  cudaFuncSetAttribute(block_mmas<kMode>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmem));
  block_mmas<kMode><<<sms, 256, kSmem>>>(dcyc, dsink);
  block_mmas<kMode><<<sms, 256, kSmem>>>(dcyc, dsink);  // the second launch is timed
  cudaDeviceSynchronize();
  std::vector<long long> c(sms);
  cudaMemcpy(c.data(), dcyc, sms * sizeof(long long), cudaMemcpyDeviceToHost);
  std::sort(c.begin(), c.end());
  std::printf("{\"mode\": \"%s\", \"cycles_per_rep\": %.1f, \"error\": \"%s\"}\n", name, double(c[sms / 2]) / kReps,
              cudaGetErrorString(cudaGetLastError()));
}

}  // namespace

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  long long* dcyc = nullptr;
  float* dsink = nullptr;
  cudaMalloc(&dcyc, sms * sizeof(long long));
  cudaMalloc(&dsink, 256 * sizeof(float));
  run<kQk>("qk", sms, dcyc, dsink);
  run<kQk2>("qk2", sms, dcyc, dsink);
  run<kPv>("pv", sms, dcyc, dsink);
  run<kBlock>("block", sms, dcyc, dsink);
  run<kPair>("pair", sms, dcyc, dsink);
  cudaFree(dcyc);
  cudaFree(dsink);
  return 0;
}
