// Microbenchmark: does the producer's per-block `fence.proxy.async.shared::cta` (SASS:
// MEMBAR.ALL.CTA + FENCE.VIEW.ASYNC.S) wait for the thread's global loads and L2 prefetches still
// in flight? The sparse-decode producer issues the next block's loads (and an L2 prefetch two
// blocks further) before it converts and stores the current block, then fences and arrives. If
// the fence waits for them, every block costs one full memory round trip whatever the lookahead.
//
// Each way runs one warp per SM (like one producer warp per scheduler) through a loop of
// iterations; iteration i loads (or prefetches) a 16-byte chunk of a random line of a 2 GiB
// buffer for iteration i + 1, does `kWork` dependent FMAs standing in for the conversion, then
// the way's fence, then consumes iteration i's value. Cycles per iteration (median over SMs):
//   0 load, no fence               (meant to overlap: ~max(work, latency); measured no faster
//                                   than way 6, so the load is issued late as written: PERF.md)
//   1 load, fence.proxy.async      (the producer's pattern)
//   2 load, __threadfence_block()  (MEMBAR.CTA alone)
//   3 load, mbarrier.arrive        (release at CTA scope, no proxy fence)
//   4 L2 prefetch, fence.proxy.async, then the load it prefetched one iteration later
//   5 L2 prefetch, no fence, same loads
//   6 serial: load and use in the same iteration (one full round trip each)
//   7 bulk L2 prefetch (cp.async.bulk.prefetch.L2, async proxy) two ahead + load one ahead,
//     fence.proxy.async: does the fence wait for bulk prefetches?
//   8 coherent load (ld.global, not .nc) one ahead, fence.proxy.async
//
// Build and run on the GPU machine:
//   nvcc -O3 -std=c++17 -arch=sm_90a bench/micro/fence_vs_loads.cu -o fence_bench && ./fence_bench
// Prints one JSON line per way.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

constexpr int kIters = 512;
constexpr int kWork = 256;  // dependent FMAs per iteration (~1,000 cycles: more than a load's latency)
constexpr size_t kBytes = size_t(2) << 30;

__device__ __forceinline__ size_t line_of(uint32_t sm, uint32_t lane, uint32_t i) {
  uint32_t h = (sm * 0x9E3779B1u) ^ (i * 0x85EBCA77u) ^ (lane * 0xC2B2AE3Du);
  h ^= h >> 15;
  h *= 0x2C1B3C6Du;
  h ^= h >> 13;
  return static_cast<size_t>(h) % (kBytes / 128);
}

__device__ __forceinline__ uint4 ldg(const uint8_t* p) {
  uint4 v;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ uint4 ldg_coherent(const uint8_t* p) {
  uint4 v;
  asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ void prefetch_l2(const uint8_t* p) { asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p)); }
__device__ __forceinline__ void bulk_prefetch_l2(const uint8_t* p) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], 128;\n" ::"l"(p) : "memory");
}

template <int kWay>
__global__ void __launch_bounds__(32, 1) fence_kernel(const uint8_t* buf, long long* cycles, float* sink) {
  __shared__ uint64_t bar;
  __shared__ uint4 tile[32];
  const uint32_t lane = threadIdx.x, sm = blockIdx.x;
  if (lane == 0) asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(&bar))), "r"((1u << 20) - 1));  // the largest count: never completes
  __syncwarp();
  const uint32_t bar_addr = static_cast<uint32_t>(__cvta_generic_to_shared(&bar));
  auto addr = [&](uint32_t i) { return buf + line_of(sm, lane, i) * 128 + (lane & 7) * 16; };
  float acc = static_cast<float>(lane);
  uint4 cur = ldg(addr(0));
  if constexpr (kWay == 4 || kWay == 5) prefetch_l2(addr(1));
  if constexpr (kWay == 7) bulk_prefetch_l2(addr(1) - (lane & 7) * 16);
  const long long t0 = clock64();
  for (uint32_t i = 0; i < kIters; ++i) {
    uint4 nxt = make_uint4(0, 0, 0, 0);
    if constexpr (kWay == 6) {
      cur = ldg(addr(i));
    } else if constexpr (kWay == 4 || kWay == 5) {
      prefetch_l2(addr(i + 2));
      nxt = ldg(addr(i + 1));  // prefetched one iteration ago
    } else if constexpr (kWay == 7) {
      bulk_prefetch_l2(addr(i + 2) - (lane & 7) * 16);  // the whole 128-byte line
      nxt = ldg(addr(i + 1));
    } else if constexpr (kWay == 8) {
      nxt = ldg_coherent(addr(i + 1));
    } else {
      nxt = ldg(addr(i + 1));
    }
#pragma unroll
    for (int k = 0; k < kWork; ++k) acc = fmaf(acc, 1.0001f, 0.5f);
    tile[lane] = make_uint4(__float_as_uint(acc), 0, 0, 0);  // a shared-memory store, as the producer's
    if constexpr (kWay == 1 || kWay == 4 || kWay == 7 || kWay == 8) asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    if constexpr (kWay == 2) __threadfence_block();
    if constexpr (kWay == 3) asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar_addr) : "memory");
    acc += __uint_as_float(cur.x & 0x3fffffu) * 1e-30f;  // consume iteration i's value
    if constexpr (kWay != 6) cur = nxt;
  }
  const long long t1 = clock64();
  if (lane == 0) cycles[sm] = t1 - t0;
  sink[sm * 32 + lane] = acc + __uint_as_float(tile[lane ^ 1].x);
}

template <int kWay>
void run(const uint8_t* buf, long long* d_cycles, float* d_sink, int sms, const char* what) {
  fence_kernel<kWay><<<sms, 32>>>(buf, d_cycles, d_sink);
  fence_kernel<kWay><<<sms, 32>>>(buf, d_cycles, d_sink);
  if (cudaDeviceSynchronize() != cudaSuccess) {
    std::printf("{\"way\": %d, \"error\": \"%s\"}\n", kWay, cudaGetErrorString(cudaGetLastError()));
    return;
  }
  std::vector<long long> c(sms);
  cudaMemcpy(c.data(), d_cycles, sms * sizeof(long long), cudaMemcpyDeviceToHost);
  std::nth_element(c.begin(), c.begin() + sms / 2, c.end());
  std::printf("{\"way\": %d, \"what\": \"%s\", \"cycles_per_iteration\": %.1f, \"work_fmas\": %d}\n", kWay, what,
              static_cast<double>(c[sms / 2]) / kIters, kWork);
}

}  // namespace

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  uint8_t* buf;
  long long* d_cycles;
  float* d_sink;
  if (cudaMalloc(&buf, kBytes) != cudaSuccess) return 1;
  cudaMemset(buf, 1, kBytes);
  cudaMalloc(&d_cycles, sms * sizeof(long long));
  cudaMalloc(&d_sink, sms * 32 * sizeof(float));
  run<6>(buf, d_cycles, d_sink, sms, "serial: load and use in one iteration (a round trip each)");
  run<0>(buf, d_cycles, d_sink, sms, "load one ahead, no fence");
  run<1>(buf, d_cycles, d_sink, sms, "load one ahead, fence.proxy.async.shared::cta");
  run<2>(buf, d_cycles, d_sink, sms, "load one ahead, __threadfence_block");
  run<3>(buf, d_cycles, d_sink, sms, "load one ahead, mbarrier.arrive (release)");
  run<5>(buf, d_cycles, d_sink, sms, "L2 prefetch two ahead + load one ahead, no fence");
  run<4>(buf, d_cycles, d_sink, sms, "L2 prefetch two ahead + load one ahead, fence.proxy.async.shared::cta");
  run<7>(buf, d_cycles, d_sink, sms, "bulk L2 prefetch two ahead + load one ahead, fence.proxy.async.shared::cta");
  run<8>(buf, d_cycles, d_sink, sms, "coherent load one ahead, fence.proxy.async.shared::cta");
  return 0;
}
