// Microbenchmark: how long a 64-row CTA takes to get its Q tile (64 heads x 576 bf16 = 72 KB)
// into shared memory, by the ways the sparse-decode family could load it. The timelines of the
// one-unit CTAs (PERF.md, twenty-second and twenty-fifth passes) put Q in shared memory 5-9 us
// after a CTA's entry, even from a warm L2 at b = 1 (64 CTAs, 4.7 MB): ~15 GB/s per SM. The
// question: is that the load's own mechanism, or what runs beside it in the kernel?
//
// One CTA per SM-sized slot (the kernel's 384 threads: two consumer warpgroups load, the third
// warpgroup idles as a producer would), grids of 64, 128 and 132 CTAs, each CTA its own Q rows
// (a [grid, 64, 576] bf16 array, rows 1152 bytes apart). Ways (--way, or all):
//   0 16-byte __ldg into registers, then shared stores, in the wgmma core-matrix layout (the
//     family's load_q without kQCpAsync)
//   1 16-byte cp.async with zero-fill, one rolled loop, the same layout (load_q with kQCpAsync,
//     the default)
//   2 the TMA unit: nine 64 x 64 boxes of a 3-D tensor map in the 128-byte swizzle (the bf16 K
//     tiles' layout), issued by one thread, completing on an mbarrier
//   3 one cp.async.bulk per row (64 lanes, 1152 bytes each), rows contiguous, on an mbarrier
// Each CTA records %globaltimer after its barriers are set and again once every consumer thread
// has Q; the kernel is also timed by events. L2 cold (a 512 MB memset before every launch) and
// warm (the same launch repeated).
// Build and run on the GPU machine (the driver API for the tensor map: -lcuda):
//   nvcc -O3 -std=c++20 -arch=sm_90a -I src -I include bench/micro/q_tile_load.cu -lcuda -o q_tile_load && ./q_tile_load
// Prints one JSON line per (way, grid, L2): medians over 9 launches of the CTAs' median and
// largest ns from entry to Q, and of the kernel's time.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "cuda/common/barriers.cuh"
#include "cuda/common/cuda_check.h"
#include "cuda/common/gather.cuh"
#include "cuda/common/globaltimer.cuh"
#include "cuda/common/wgmma.cuh"

namespace {

using namespace smla::cuda;

constexpr int kRows = 64, kD = 576, kChunks = kD / 8;
constexpr int kRowBytes = kD * 2;
constexpr int kTileBytes = kRows * kRowBytes;  // 73,728
constexpr int kThreads = 384, kConsumers = 256;
constexpr int kSmem = kTileBytes + 1024 + 64;  // the tile (1024-aligned for the swizzle), the mbarrier


// The family's core-matrix offset of row r's 16-byte chunk ch (config.h tile_offset).
__device__ __forceinline__ int core_offset(int r, int ch) { return (r >> 3) * 16 * kD + ch * 128 + (r & 7) * 16; }

// ns[cta] = time from the CTA's barriers to Q in shared memory. sink: keeps the tile live.
template <int kWay>
__global__ void __launch_bounds__(kThreads, 1)
    q_load_kernel(const uint16_t* q, const __grid_constant__ CUtensorMap map, uint32_t* ns, uint32_t* sink) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  uint8_t* tile = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  auto* bar = reinterpret_cast<uint64_t*>(tile + kTileBytes);
  if (threadIdx.x == 0) {
    mbar_init(bar, 1);
    fence_mbarrier_init();
  }
  __syncthreads();
  const uint64_t t0 = globaltimer_ns();
  const uint16_t* src = q + static_cast<size_t>(blockIdx.x) * kRows * kD;
  const uint32_t tile_s = static_cast<uint32_t>(__cvta_generic_to_shared(tile));
  const uint32_t bar_s = static_cast<uint32_t>(__cvta_generic_to_shared(bar));
  if (threadIdx.x < kConsumers) {
    if constexpr (kWay == 0) {
      constexpr int kPer = kRows * kChunks / kConsumers;  // 18
      uint4 v[kPer];
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        const int i = threadIdx.x + k * kConsumers, r = i / kChunks, ch = i % kChunks;
        v[k] = __ldg(reinterpret_cast<const uint4*>(src + r * kD) + ch);
      }
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        const int i = threadIdx.x + k * kConsumers, r = i / kChunks, ch = i % kChunks;
        *reinterpret_cast<uint4*>(tile + core_offset(r, ch)) = v[k];
      }
    } else if constexpr (kWay == 1) {
#pragma unroll 1
      for (int i = threadIdx.x; i < kRows * kChunks; i += kConsumers) {
        const int r = i / kChunks, ch = i % kChunks;
        cp_async_16_zfill(tile_s + core_offset(r, ch), src + r * kD + ch * 8, 16);
      }
      cp_async_commit_group();
      cp_async_wait_group<0>();
    } else if constexpr (kWay == 2) {
      if (threadIdx.x == 0) {
        mbar_arrive_expect_tx(bar, kTileBytes);
        for (int b = 0; b < kD / 64; ++b) tma_load_3d(tile_s + b * kRows * 128, &map, b * 64, 0, blockIdx.x, bar_s);
      }
      mbar_wait(bar, 0);
    } else {
      if (threadIdx.x == 0) mbar_arrive_expect_tx(bar, kTileBytes);
      named_bar_sync(1, kConsumers);  // the expected bytes are set before any copy lands
      if (threadIdx.x < kRows)
        bulk_copy_g2s(tile_s + threadIdx.x * kRowBytes, src + threadIdx.x * kD, kRowBytes, bar_s);
      mbar_wait(bar, 0);
    }
    if constexpr (kWay <= 1) fence_proxy_async();  // as load_q: read next by wgmma
    named_bar_sync(2, kConsumers);
    if (threadIdx.x == 0) ns[blockIdx.x] = static_cast<uint32_t>(globaltimer_ns() - t0);
    // Keep the tile: one word per consumer thread, summed.
    if (reinterpret_cast<const uint32_t*>(tile)[threadIdx.x * 72] == 0x7fc17fc1u) atomicAdd(sink, 1u);
  }
}

using Kernel = void (*)(const uint16_t*, const CUtensorMap, uint32_t*, uint32_t*);
Kernel kernel_for(int way) {
  switch (way) {
    case 0: return q_load_kernel<0>;
    case 1: return q_load_kernel<1>;
    case 2: return q_load_kernel<2>;
    default: return q_load_kernel<3>;
  }
}

// Q as a [grid, 64, 576] bf16 tensor: boxes of 64 columns x 64 rows x 1, 128-byte swizzle.
CUtensorMap q_map(const uint16_t* q, int grid) {
  CUtensorMap m{};
  const cuuint64_t dims[3] = {kD, kRows, static_cast<cuuint64_t>(grid)};
  const cuuint64_t strides[2] = {kRowBytes, static_cast<cuuint64_t>(kTileBytes)};
  const cuuint32_t box[3] = {64, kRows, 1}, unit[3] = {1, 1, 1};
  const CUresult r = cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<uint16_t*>(q), dims, strides,
                                            box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled failed: %d\n", static_cast<int>(r));
    std::exit(1);
  }
  return m;
}

template <typename T>
T median(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int only = -1;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string_view(argv[i]) == "--way") only = std::atoi(argv[i + 1]);
  const int grids[] = {64, 128, 132};
  const int max_grid = 132;
  uint16_t* q = nullptr;
  uint32_t *ns = nullptr, *sink = nullptr;
  void* flush = nullptr;
  const size_t flush_bytes = 512u << 20;
  SMLA_CUDA_CHECK(cudaMalloc(&q, static_cast<size_t>(max_grid) * kTileBytes));
  SMLA_CUDA_CHECK(cudaMalloc(&ns, max_grid * sizeof(uint32_t)));
  SMLA_CUDA_CHECK(cudaMalloc(&sink, sizeof(uint32_t)));
  SMLA_CUDA_CHECK(cudaMalloc(&flush, flush_bytes));
  SMLA_CUDA_CHECK(cudaMemset(q, 0x3c, static_cast<size_t>(max_grid) * kTileBytes));  // bf16 1.17: finite values
  cudaEvent_t e0, e1;
  SMLA_CUDA_CHECK(cudaEventCreate(&e0));
  SMLA_CUDA_CHECK(cudaEventCreate(&e1));
  for (int way = 0; way < 4; ++way) {
    if (only >= 0 && way != only) continue;
    Kernel k = kernel_for(way);
    SMLA_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    for (int grid : grids) {
      const CUtensorMap map = q_map(q, grid);
      for (int cold = 1; cold >= 0; --cold) {
        std::vector<uint32_t> med, mx;
        std::vector<float> kernel_us;
        for (int rep = 0; rep < 10; ++rep) {
          if (cold) SMLA_CUDA_CHECK(cudaMemset(flush, rep & 0xff, flush_bytes));
          SMLA_CUDA_CHECK(cudaEventRecord(e0));
          k<<<grid, kThreads, kSmem>>>(q, map, ns, sink);
          SMLA_CUDA_CHECK(cudaEventRecord(e1));
          SMLA_CUDA_CHECK(cudaEventSynchronize(e1));
          SMLA_CUDA_CHECK(cudaGetLastError());
          if (rep == 0) continue;  // the first launch loads the code
          float ms = 0.f;
          SMLA_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
          std::vector<uint32_t> h(grid);
          SMLA_CUDA_CHECK(cudaMemcpy(h.data(), ns, grid * sizeof(uint32_t), cudaMemcpyDeviceToHost));
          med.push_back(median(h));
          mx.push_back(*std::max_element(h.begin(), h.end()));
          kernel_us.push_back(ms * 1000.f);
        }
        std::printf("{\"bench\": \"q_tile_load\", \"way\": %d, \"ctas\": %d, \"l2\": \"%s\", \"q_in_smem_ns_median\": %u, "
                    "\"q_in_smem_ns_max\": %u, \"kernel_us\": %.2f}\n",
                    way, grid, cold ? "cold" : "warm", median(med), median(mx), median(kernel_us));
      }
    }
  }
  return 0;
}
