// Microbenchmark: what sending a pair's converted rows into the peer CTA's shared memory costs.
// In the 64-row pair kernels each CTA converts one 32-key round of every block (32 rows x 576
// bf16 = 36,864 bytes) and writes it into its own K tile and, 16 bytes at a time by st.async,
// into its peer's; the kernels run 10-18% faster without the peer's copy (docs/PERF.md,
// fiftieth pass). Here the two CTAs of each cluster do only that hand-over, with the kernels'
// flow control (two stages; "full" armed by the receiver for the peer's bytes; each CTA's
// consumer warp waits for "full" and frees the stage in both CTAs), and no conversion or MMA.
// Ways (36,864 bytes a CTA and block into its own tile in every way but 3):
//   0 own tile only                      (the floor: STS.128)
//   1 + st.async to the peer             (the kernels' way: 2,304 16-byte stores a block)
//   2 + st.shared::cluster to the peer   (plain remote stores; "full" waits for none of them)
//   3 st.async to the peer only
//   4 + one bulk copy a warp to the peer (fence.proxy.async, __syncwarp, lane 0 copies 9 KB)
// Printed per way: ns per block (a CTA's loop time / blocks, median over CTAs) and the kernel's
// time by CUDA events (median of replays).
//
// Build and run on the GPU machine:
//   nvcc -O3 -std=c++20 -arch=sm_90a -I src -I include bench/micro/peer_rows.cu -o peer_rows && ./peer_rows
// Prints one JSON line per way.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "cuda/common/barriers.cuh"
#include "cuda/common/cluster.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/common/wgmma.cuh"
#include "median_time.cuh"

namespace {

using namespace smla::cuda;

constexpr int kProducers = 128;                  // one producer warpgroup
constexpr int kThreads = kProducers + 32;        // and one consumer warp
constexpr int kRoundBytes = 32 * 576 * 2;        // a CTA's 32 rows of bf16 K
constexpr int kTileBytes = 2 * kRoundBytes;      // a K tile: the block's 64 rows
constexpr int kStores = kRoundBytes / 16 / kProducers;  // 18 16-byte stores a thread
constexpr int kBlocks = 4096;
constexpr int kSmem = 2 * kTileBytes + 64;       // two stages, then the barriers
enum Way { kOwn = 0, kStAsync = 1, kRemote = 2, kPeerOnly = 3, kBulk = 4 };

// A 16-byte store into this CTA's shared memory that the compiler keeps (nothing reads it back).
__device__ __forceinline__ void st_shared_v4(uint32_t dst, const uint4& v) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}

template <int kWay>
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(kThreads, 1) hand_over(long long* ns) {
  extern __shared__ __align__(1024) uint8_t smem[];
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + 2 * kTileBytes);  // [2], then empty[2]
  uint64_t* empty = full + 2;
  const uint32_t tile0 = smem_addr(smem), peer_rank = cluster_ctarank() ^ 1u;
  const int t = threadIdx.x;
  if (t == 0) {
    for (int s = 0; s < 2; ++s) {
      mbar_init(full + s, kProducers);
      mbar_init(empty + s, 2);  // each CTA's consumer warp
    }
    fence_mbarrier_init();
  }
  cluster_sync();
  constexpr bool kPeerBytes = kWay == kStAsync || kWay == kPeerOnly || kWay == kBulk;
  const long long t0 = clock64();
  if (t < kProducers) {
    const int warp = t / 32, lane = t % 32;
    const uint4 v = make_uint4(t, peer_rank, 1, 2);
    for (int i = 0; i < kBlocks; ++i) {
      const int s = i & 1;
      if (i >= 2) mbar_wait(empty + s, ((i >> 1) - 1) & 1);
      // This CTA's round: its half of the tile, each warp a contiguous 9 KB group (tile_offset's
      // 8-row groups), the lanes' 16-byte stores side by side.
      const uint32_t own = tile0 + s * kTileBytes + (peer_rank ^ 1u) * kRoundBytes + warp * (kRoundBytes / 4);
      const uint32_t peer = map_to_cta(own, peer_rank), peer_full = map_to_cta(smem_addr(full + s), peer_rank);
#pragma unroll
      for (int k = 0; k < kStores; ++k) {
        const uint32_t off = (k * 32 + lane) * 16;
        if (kWay != kPeerOnly) st_shared_v4(own + off, v);
        if (kWay == kStAsync || kWay == kPeerOnly) st_async_v4(peer + off, v, peer_full);
        if (kWay == kRemote) st_cluster_v4(peer + off, v);
      }
      if (kWay == kBulk) {
        fence_proxy_async();
        __syncwarp();
        if (lane == 0) bulk_copy_s2peer(peer, own, kRoundBytes / 4, peer_full);
      }
      if (kPeerBytes && t == 0) mbar_arrive_expect_tx(full + s, kRoundBytes);  // the peer's bytes into this CTA
      else mbar_arrive(full + s);
    }
  } else if (t == kProducers) {  // the consumer warp's lane 0: frees each stage in both CTAs
    for (int i = 0; i < kBlocks; ++i) {
      const int s = i & 1;
      mbar_wait(full + s, (i >> 1) & 1);
      mbar_arrive(empty + s);
      mbar_arrive_cluster(map_to_cta(smem_addr(empty + s), peer_rank));
    }
  }
  __syncthreads();
  if (t == 0) ns[blockIdx.x] = clock64() - t0;
  cluster_sync();
}

template <int kWay>
void run(int ctas, long long* d_cycles, int clock_khz) {
  auto k = hand_over<kWay>;
  SMLA_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  const double s = median_seconds(
      7, [] {}, [&] { k<<<ctas, kThreads, kSmem>>>(d_cycles); });
  std::vector<long long> c(ctas);
  SMLA_CUDA_CHECK(cudaMemcpy(c.data(), d_cycles, ctas * sizeof(long long), cudaMemcpyDeviceToHost));
  std::sort(c.begin(), c.end());
  const double cyc = static_cast<double>(c[ctas / 2]) / kBlocks;
  const char* names[] = {"own", "st_async", "remote_plain", "peer_only", "bulk_per_warp"};
  std::printf(
      "{\"way\": \"%s\", \"cycles_per_block\": %.1f, \"ns_per_block\": %.1f, \"kernel_us\": %.1f, \"ctas\": %d, "
      "\"bytes_per_block\": %d}\n",
      names[kWay], cyc, cyc * 1e6 / clock_khz, s * 1e6, ctas, kRoundBytes);
}

}  // namespace

int main() {
  cudaDeviceProp prop{};
  SMLA_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  int clock_khz = 0;
  SMLA_CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  const int ctas = prop.multiProcessorCount / 2 * 2;
  long long* d_cycles = nullptr;
  SMLA_CUDA_CHECK(cudaMalloc(&d_cycles, ctas * sizeof(long long)));
  std::printf("{\"device\": \"%s\", \"clock_khz\": %d}\n", prop.name, clock_khz);
  run<kOwn>(ctas, d_cycles, clock_khz);
  run<kStAsync>(ctas, d_cycles, clock_khz);
  run<kRemote>(ctas, d_cycles, clock_khz);
  run<kPeerOnly>(ctas, d_cycles, clock_khz);
  run<kBulk>(ctas, d_cycles, clock_khz);
  SMLA_CUDA_CHECK(cudaFree(d_cycles));
  return 0;
}
