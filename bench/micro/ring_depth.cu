// Microbenchmark: how the depth of a raw ring (the slots a CTA keeps in flight) sets the pace of a
// one-wave gather whose consumer takes a fixed time per block. The 32-row roles kernel ran faster
// on three slots than on four (H200 and H100, docs/PERF.md fifty-fourth pass) and, in one wave,
// faster again on two (H100s, fifty-fifth pass), though its consumer sets the pace: this asks
// whether fewer rows in flight make each row land sooner (queues in L2 / DRAM) and whether the
// shared memory the slots leave to L1 matters (the same ring with the smem of four slots).
//
// The gather is l2_dirty_lines.cu's: one CTA per SM (or two waves of them), 32 blocks of 64
// random 656-byte rows of a 2.75 GB cache a CTA, one cp.async.bulk per row with the L2
// evict_first policy (as the one-wave raw ring copies them), a memset flush of 512 MB before
// every timed run (the benchmarks' method). The consumer: after a block's rows land, thread 0
// spins `delay` ns (%globaltimer), then the CTA frees the slot and the next block is issued
// into it. Each CTA also sums the time its thread 0 waits for rows.
// Build and run on the GPU machine:
//   nvcc -O3 -std=c++17 -arch=sm_90a -I src -I include bench/micro/ring_depth.cu -o ring_depth && ./ring_depth
// Prints one JSON line per (CTAs, slots, shared memory, delay): µs (median of 15), GB/s of rows,
// and the median over CTAs of the wait for rows per block.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
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

// kRing slots; the barriers sit past `smem_slots` slots (the shared memory the launch asks for).
template <int kRing>
__global__ void __launch_bounds__(128, 1) ring_kernel(const uint8_t* cache, const int* slots, int smem_slots, int delay_ns,
                                                      uint64_t* wait_ns, uint32_t* sink) {
  extern __shared__ __align__(128) uint8_t smem[];
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem + smem_slots * kSlotBytes);
  const int t = threadIdx.x;
  const int* my = slots + static_cast<int64_t>(blockIdx.x) * kBlocks * kKeys;
  const uint64_t pol = l2_evict_first_policy();
  if (t == 0)
    for (int s = 0; s < kRing; ++s) mbar_init(bars + s, 1);
  __syncthreads();
  auto issue = [&](int b) {
    if (t >= kKeys) return;
    const int idx = __ldg(my + b * kKeys + t);
    if (t == 0) mbar_arrive_expect_tx(bars + b % kRing, kKeys * kRowBytes);
    const uint32_t bar = static_cast<uint32_t>(__cvta_generic_to_shared(bars + b % kRing));
    const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem + (b % kRing) * kSlotBytes + t * kStride));
    bulk_copy_g2s(dst, cache + static_cast<int64_t>(idx) * kRowBytes, kRowBytes, bar, pol);
  };
  for (int b = 0; b < kRing && b < kBlocks; ++b) issue(b);
  uint32_t x = 0;
  uint64_t waited = 0;
  for (int b = 0; b < kBlocks; ++b) {
    const uint64_t t0 = t == 0 ? now_ns() : 0;
    mbar_wait(bars + b % kRing, (b / kRing) & 1);
    if (t == 0) {
      const uint64_t t1 = now_ns();
      waited += t1 - t0;
      while (now_ns() < t1 + static_cast<uint64_t>(delay_ns)) {
      }
    }
    x ^= *reinterpret_cast<const uint32_t*>(smem + (b % kRing) * kSlotBytes + (t & 63) * kStride + (t >> 6) * 16);
    __syncthreads();
    if (b + kRing < kBlocks) issue(b + kRing);
  }
  if (t == 0) wait_ns[blockIdx.x] = waited;
  if (x == 0x12345678u) sink[blockIdx.x] = x;
}

}  // namespace

int main() {
  const Gather gather = make_gather(kBlocks);
  const int sms = gather.sms, ctas = gather.ctas;
  uint8_t *cache = gather.buf.cache, *flush = gather.buf.flush;
  int* slots = gather.slots;
  uint64_t* wait_ns = nullptr;
  uint32_t* sink = nullptr;
  SMLA_CUDA_CHECK(cudaMalloc(&wait_ns, 2 * ctas * sizeof(uint64_t)));
  SMLA_CUDA_CHECK(cudaMalloc(&sink, 2 * ctas * sizeof(uint32_t)));
  using Ring = void (*)(const uint8_t*, const int*, int, int, uint64_t*, uint32_t*);
  const Ring rings[] = {nullptr, nullptr, ring_kernel<2>, ring_kernel<3>, ring_kernel<4>};
  const int max_smem = 4 * kSlotBytes + 64;
  for (int r = 2; r <= 4; ++r)
    SMLA_CUDA_CHECK(cudaFuncSetAttribute(rings[r], cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem));
  std::printf("{\"sms\": %d, \"ctas\": %d, \"blocks\": %d}\n", sms, ctas, kBlocks);
  std::vector<uint64_t> w(2 * ctas);
  for (int waves : {1, 2})
    for (int delay : {0, 1000, 2000})
      for (int ring : {2, 3, 4})
        for (int smem_slots : {ring, 4}) {
          // the padded plan (the carveout's question) at 0 and 2000 ns; four slots have one plan
          if (smem_slots != ring && delay == 1000) continue;
          const int grid = waves * ctas;
          const double s = median_seconds(
              16, [&] { SMLA_CUDA_CHECK(cudaMemsetAsync(flush, 0, kFlushBytes)); },
              [&] { rings[ring]<<<grid, 128, smem_slots * kSlotBytes + 64>>>(cache, slots, smem_slots, delay, wait_ns, sink); });
          SMLA_CUDA_CHECK(cudaMemcpy(w.data(), wait_ns, grid * sizeof(uint64_t), cudaMemcpyDeviceToHost));
          std::vector<uint64_t> v(w.begin(), w.begin() + grid);
          std::sort(v.begin(), v.end());
          const double bytes = static_cast<double>(grid) * kBlocks * kKeys * kRowBytes;
          std::printf(
              "{\"ctas\": %d, \"slots\": %d, \"smem_slots\": %d, \"delay_ns\": %d, \"us\": %.2f, \"GBps\": %.0f, "
              "\"wait_ns_per_block\": %.0f}\n",
              grid, ring, smem_slots, delay, s * 1e6, bytes / s * 1e-9, static_cast<double>(v[v.size() / 2]) / kBlocks);
          if (ring == 4) break;
        }
  return 0;
}
