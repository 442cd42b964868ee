// Microbenchmark: the raw ring's row copies by the TMA unit (one cp.async.bulk a row) against
// 16-byte cp.async (LDGSTS) by the producer warps, same rows, same ring. bulk_issue_rate.cu found
// the TMA unit accepting a block's 64 row copies in ~0.9 µs however many warps issue them, which
// is the roles kernel's ~1.0 µs from a slot's release to its copies issued (docs/PERF.md
// fifty-seventh pass); 16-byte copies go through the load/store units instead, 41 per row.
//
// The gather is ring_depth.cu's: 128 CTAs (one wave) or 256, 32 blocks of 64 random 656-byte rows
// of a 2.75 GB cache a CTA, a ring of 2 or 3 slots, the L2 evict_first policy on every copy, a
// memset flush of 512 MB before every timed run. The consumer: after a block's rows land, thread 0
// spins `delay` ns, then the CTA frees the slot and the next block is issued into it.
// Paths: 0 = bulk, one copy a row by lanes 0..15 of the four warps (the roles kernel's producer);
// 1 = cp.async by the four warps (warp w: rows 16 w .. 16 w + 15, lane l: 16-byte pieces l and
// 32 + l of each row, one cp.async.mbarrier.arrive.noinc a thread and block); 2 = the same by
// eight warps (8 rows each). `issue_ns`: thread 0's median over blocks of the time from the
// block's issue start until every issuing thread has issued (a CTA barrier after the issue,
// in a separate run: the throughput runs have no such barrier).
// Build and run on the GPU machine:
//   nvcc -O3 -std=c++17 -arch=sm_90a -I src -I include -I bench/micro bench/micro/row_copy_path.cu -o row_copy_path && ./row_copy_path
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "cuda/common/barriers.cuh"
#include "cuda/common/cuda_check.h"
#include "cuda/common/gather.cuh"
#include "median_time.cuh"
#include "v32_rows.cuh"

namespace {

using namespace smla::cuda;
using namespace v32_rows;

constexpr int kBlocks = 32;  // V3.2 topk 2048
constexpr int kThreads = 256;
constexpr int kPieces = kRowBytes / 16;  // 41

__device__ __forceinline__ void cp_async_16_policy(uint32_t dst, const void* src, uint64_t pol) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "l"(pol) : "memory");
}

// How many threads arrive on a slot's barrier a phase.
__host__ __device__ constexpr int arrivals(int path) { return path == 0 ? 1 : path == 1 ? 128 : 256; }

template <int kRing, int kPath>
__global__ void __launch_bounds__(kThreads, 1) ring_kernel(const uint8_t* cache, const int* slots, int delay_ns, bool timed_issue,
                                                           uint32_t* issue_ns, uint32_t* sink) {
  extern __shared__ __align__(128) uint8_t smem[];
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem + kRing * kSlotBytes);
  const int t = threadIdx.x, warp = t / 32, lane = t % 32;
  const int* my = slots + static_cast<int64_t>(blockIdx.x) * kBlocks * kKeys;
  const uint64_t pol = l2_evict_first_policy();
  if (t == 0)
    for (int s = 0; s < kRing; ++s) mbar_init(bars + s, arrivals(kPath));
  __syncthreads();
  auto issue = [&](int b) {
    uint64_t* bar = bars + b % kRing;
    uint8_t* slot = smem + (b % kRing) * kSlotBytes;
    if constexpr (kPath == 0) {
      if (warp >= 4 || lane >= 16) return;
      const int row = warp * 16 + lane;
      const int idx = __ldg(my + b * kKeys + row);
      if (row == 0) mbar_arrive_expect_tx(bar, kKeys * kRowBytes);
      bulk_copy_g2s(static_cast<uint32_t>(__cvta_generic_to_shared(slot + row * kStride)), cache + static_cast<int64_t>(idx) * kRowBytes,
                    kRowBytes, static_cast<uint32_t>(__cvta_generic_to_shared(bar)), pol);
    } else {
      constexpr int kWarps = kPath == 1 ? 4 : 8, kRowsPerWarp = kKeys / kWarps;
      if (warp >= kWarps) return;
      const int r0 = warp * kRowsPerWarp;
      const int idx = __ldg(my + b * kKeys + r0 + lane % kRowsPerWarp);  // lane r holds row r0 + r's slot
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const int s = __shfl_sync(~0u, idx, r);
        const uint8_t* src = cache + static_cast<int64_t>(s) * kRowBytes;
        const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(slot + (r0 + r) * kStride));
        cp_async_16_policy(dst + 16 * lane, src + 16 * lane, pol);
        if (lane + 32 < kPieces) cp_async_16_policy(dst + 16 * (lane + 32), src + 16 * (lane + 32), pol);
      }
      mbar_arrive_on_cp_async(bar);
    }
  };
  uint32_t spans[kBlocks];
  for (int b = 0; b < kRing && b < kBlocks; ++b) issue(b);
  uint32_t x = 0;
  for (int b = 0; b < kBlocks; ++b) {
    mbar_wait(bars + b % kRing, (b / kRing) & 1);
    if (t == 0) {
      const uint64_t t1 = now_ns();
      while (now_ns() < t1 + static_cast<uint64_t>(delay_ns)) {
      }
    }
    x ^= *reinterpret_cast<const uint32_t*>(smem + (b % kRing) * kSlotBytes + (t & 63) * kStride + (t >> 6) * 16);
    __syncthreads();
    if (b + kRing < kBlocks) {
      const uint64_t t0 = t == 0 && timed_issue ? now_ns() : 0;
      issue(b + kRing);
      if (timed_issue) {
        __syncthreads();
        if (t == 0) spans[b] = static_cast<uint32_t>(now_ns() - t0);
      }
    }
  }
  if (timed_issue && t == 0) {
    const int n = kBlocks - kRing;  // insertion sort: a median of few values
    for (int i = 1; i < n; ++i)
      for (int j = i; j > 0 && spans[j - 1] > spans[j]; --j) {
        const uint32_t v = spans[j];
        spans[j] = spans[j - 1], spans[j - 1] = v;
      }
    issue_ns[blockIdx.x] = spans[n / 2];
  }
  if (x == 0x12345678u) sink[blockIdx.x] = x;
}

using Ring = void (*)(const uint8_t*, const int*, int, bool, uint32_t*, uint32_t*);
template <int kRing>
Ring ring_of(int path) {
  return path == 0 ? ring_kernel<kRing, 0> : path == 1 ? ring_kernel<kRing, 1> : ring_kernel<kRing, 2>;
}

}  // namespace

int main() {
  const Gather gather = make_gather(kBlocks);
  const int sms = gather.sms, ctas = gather.ctas;
  uint8_t *cache = gather.buf.cache, *flush = gather.buf.flush;
  int* slots = gather.slots;
  uint32_t *issue_ns = nullptr, *sink = nullptr;
  SMLA_CUDA_CHECK(cudaMalloc(&issue_ns, 2 * ctas * sizeof(uint32_t)));
  SMLA_CUDA_CHECK(cudaMalloc(&sink, 2 * ctas * sizeof(uint32_t)));
  std::printf("{\"sms\": %d, \"ctas\": %d, \"blocks\": %d}\n", sms, ctas, kBlocks);
  std::fflush(stdout);
  const char* names[] = {"bulk", "cp_async_4_warps", "cp_async_8_warps"};
  std::vector<uint32_t> v(2 * ctas);
  for (int waves : {1, 2})
    for (int delay : {0, 1000, 2000})
      for (int ring : {2, 3})
        for (int path : {0, 1, 2}) {
          const Ring k = ring == 2 ? ring_of<2>(path) : ring_of<3>(path);
          const int smem = ring * kSlotBytes + 64, grid = waves * ctas;
          SMLA_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
          auto run = [&](bool timed) {
            return median_seconds(
                12, [&] { SMLA_CUDA_CHECK(cudaMemsetAsync(flush, 0, kFlushBytes)); },
                [&] { k<<<grid, kThreads, smem>>>(cache, slots, delay, timed, issue_ns, sink); });
          };
          const double s = run(false);
          run(true);
          SMLA_CUDA_CHECK(cudaMemcpy(v.data(), issue_ns, grid * sizeof(uint32_t), cudaMemcpyDeviceToHost));
          std::vector<uint32_t> w(v.begin(), v.begin() + grid);
          std::sort(w.begin(), w.end());
          const double bytes = static_cast<double>(grid) * kBlocks * kKeys * kRowBytes;
          std::printf("{\"ctas\": %d, \"slots\": %d, \"delay_ns\": %d, \"path\": \"%s\", \"us\": %.2f, \"GBps\": %.0f, \"issue_ns\": %u}\n",
                      grid, ring, delay, names[path], s * 1e6, bytes / s * 1e-9, w[w.size() / 2]);
          std::fflush(stdout);
        }
  return 0;
}
