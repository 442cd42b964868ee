// Microbenchmark: how long a CTA takes to issue one ring block's 64 row copies (cp.async.bulk, one
// 656-byte V3.2 row each) and how long until they land. The 32-row roles kernel's per-block marks
// (docs/PERF.md fifty-sixth pass) put ~1.0 µs between a slot's release and its producer's first
// lane having issued its copies, with no load waited for in that span of its SASS: the warp's
// copies go out lane by lane (an ELECT loop, the copy's operands in uniform registers), so the
// question is what the TMA unit takes to accept them.
//
// One CTA, or one per SM, 256 threads; `warps` (2, 4 or 8) warps issue the block's 64 copies,
// 64 / warps lanes each (the roles kernel: 8 warps of 8 lanes), from random slots of a 2.75 GB cache
// (a memset flush of 512 MB before every timed run). Per block, thread 0 of each issuing warp
// records %globaltimer before its first copy and after its last; thread 0 of the CTA records when
// the block's rows are in. Blocks go one at a time (a ring of one slot), so the issue spans are
// the TMA unit's alone, not a queue behind earlier blocks.
// Build and run on the GPU machine:
//   nvcc -O3 -std=c++17 -arch=sm_90a -I src -I include bench/micro/bulk_issue_rate.cu -o bulk_issue && ./bulk_issue
// Prints one JSON line per (CTAs, warps): medians over CTAs and blocks of the issue span of the
// first warp and of the last warp to finish, the rows' landing after the first issue, and the run.
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
constexpr int kThreads = 256;

// out[cta][block][0..2]: the first warp's issue span, the slowest warp's end of issue after the
// block's start, the rows in after the block's start (ns).
__global__ void __launch_bounds__(kThreads, 1) issue_kernel(const uint8_t* cache, const int* slots, int warps, uint32_t* out) {
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ uint64_t bar;
  __shared__ uint64_t start, ends[8];
  const int t = threadIdx.x, warp = t / 32, lane = t % 32, per = kKeys / warps;
  const int* my = slots + static_cast<int64_t>(blockIdx.x) * kBlocks * kKeys;
  const uint64_t pol = l2_evict_first_policy();
  if (t == 0) mbar_init(&bar, 1);
  __syncthreads();
  const bool issues = warp < warps && lane < per;
  const int row = warp * per + lane;
  for (int b = 0; b < kBlocks; ++b) {
    const int idx = issues ? __ldg(my + b * kKeys + row) : 0;  // loaded before the span starts
    __syncthreads();
    if (t == 0) {
      start = now_ns();
      mbar_arrive_expect_tx(&bar, kKeys * kRowBytes);
    }
    __syncthreads();
    if (issues) {
      const uint64_t t0 = lane == 0 ? now_ns() : 0;
      const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem + row * kStride));
      bulk_copy_g2s(dst, cache + static_cast<int64_t>(idx) * kRowBytes, kRowBytes,
                    static_cast<uint32_t>(__cvta_generic_to_shared(&bar)), pol);
      __syncwarp(per == 32 ? ~0u : (1u << per) - 1);  // only the issuing lanes are here
      if (lane == 0) {
        const uint64_t t1 = now_ns();
        ends[warp] = t1;
        if (warp == 0) out[(static_cast<int64_t>(blockIdx.x) * kBlocks + b) * 3] = static_cast<uint32_t>(t1 - t0);
      }
    }
    mbar_wait(&bar, b & 1);
    const uint64_t in = t == 0 ? now_ns() : 0;
    __syncthreads();  // every issuing warp's end is written
    if (t == 0) {
      uint64_t last = 0;
      for (int w = 0; w < warps; ++w) last = ends[w] > last ? ends[w] : last;
      uint32_t* o = out + (static_cast<int64_t>(blockIdx.x) * kBlocks + b) * 3;
      o[1] = static_cast<uint32_t>(last - start);
      o[2] = static_cast<uint32_t>(in - start);
    }
  }
}

double median_of(std::vector<uint32_t> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

int main() {
  int sms = 0;
  SMLA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const Buffers buf = make_buffers();
  uint8_t *cache = buf.cache, *flush = buf.flush;
  const int max_ctas = std::min(sms, 128);
  const size_t blocks = static_cast<size_t>(max_ctas) * kBlocks;  // every CTA's blocks
  int* slots = random_slots(blocks * kKeys);
  uint32_t* out = nullptr;
  SMLA_CUDA_CHECK(cudaMalloc(&out, blocks * 3 * sizeof(uint32_t)));
  const int smem = kKeys * kStride;
  SMLA_CUDA_CHECK(cudaFuncSetAttribute(issue_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  std::printf("{\"sms\": %d, \"blocks\": %d, \"keys\": %d}\n", sms, kBlocks, kKeys);
  std::fflush(stdout);
  std::vector<uint32_t> o(blocks * 3);
  for (int ctas : {1, max_ctas})
    for (int warps : {2, 4, 8}) {  // 32, 16 or 8 lanes of a warp issue
      const double s = median_seconds(
          8, [&] { SMLA_CUDA_CHECK(cudaMemsetAsync(flush, 0, kFlushBytes)); },
          [&] { issue_kernel<<<ctas, kThreads, smem>>>(cache, slots, warps, out); });
      SMLA_CUDA_CHECK(cudaMemcpy(o.data(), out, static_cast<size_t>(ctas) * kBlocks * 3 * sizeof(uint32_t), cudaMemcpyDeviceToHost));
      std::vector<uint32_t> first, last, in;
      for (int i = 0; i < ctas * kBlocks; ++i) first.push_back(o[3 * i]), last.push_back(o[3 * i + 1]), in.push_back(o[3 * i + 2]);
      std::printf(
          "{\"ctas\": %d, \"warps\": %d, \"lanes_per_warp\": %d, \"first_warp_issue_ns\": %.0f, \"all_issued_ns\": %.0f, "
          "\"rows_in_ns\": %.0f, \"us\": %.2f}\n",
          ctas, warps, kKeys / warps, median_of(first), median_of(last), median_of(in), s * 1e6);
      std::fflush(stdout);  // each line kept if a later configuration is cut off
    }
  return 0;
}
