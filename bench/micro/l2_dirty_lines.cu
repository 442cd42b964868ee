// Microbenchmark: what the dirty lines a 512 MB memset leaves in L2 cost the gathers after it,
// and whether an L2 evict_first policy on the gathers avoids that cost. The benchmarks flush L2
// with a memset before every timed call (docs/BENCHMARKS.md), as FlashMLA's figures were
// measured: L2 then holds up to its whole size in dirty lines, and every line a kernel brings in
// evicts one of them first, a DRAM write beside each read. Gathers marked evict_first are meant
// to replace each other in a set before they replace a dirty line, so that the write-backs wait
// for later work.
//
// The gather: the raw ring of the 16-row sparse-decode tiles (src/cuda/sparse_decode/
// producer_raw_ring.cuh): one CTA per SM (up to 128), a ring of 4 slots of 64 random 656-byte
// rows of a 2.75 GB cache, one cp.async.bulk per row, nothing converted; also twice as many
// CTAs, two waves of them. And a sequential read of 256 MB (16-byte loads) as the dense streams do.
// Flushes: memset (dirty L2), a read of 512 MB (clean L2, other lines), or none.
// Build and run on the GPU machine:
//   nvcc -O3 -std=c++17 -arch=sm_90a -I src -I include bench/micro/l2_dirty_lines.cu -o l2_dirty && ./l2_dirty
// Prints one JSON line per (kernel, blocks, flush, policy): µs (median of 25) and GB/s of rows.
// Measured on an H200 (2026-12-05, two cards; docs/PERF.md, forty-seventh pass): 32 blocks a CTA
// 61.3 µs after the memset against 54.4 after the read flush (the dirty lines' write-backs),
// with every line evict_first 57.8 and 50.1; 128 blocks 209.0 / 203.2 and 208.2 / 185.0;
// fractions 0.5 and 0.25 as none; the sequential read level with and without the policy.
// On an H100 (2026-12-05, forty-eighth pass): one wave of 128 CTAs 86.1 -> 83.2 after the memset
// with the policy, two waves (256 CTAs) 149.6 -> 154.6: the second wave loses, so the kernels give
// a gather's rows the policy only in a one-wave grid; the first half of the blocks alone 88.1.
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

constexpr int kRing = 4;
constexpr int kSmem = kRing * kSlotBytes + 64;
constexpr int kMaxBlocks = 128;
constexpr size_t kSeqBytes = size_t(256) << 20;

// Policy 1: every line evict_first (the library's, gather.cuh); 2: half of them; 3: a quarter
// (the rest normal); 4 (the ring's choice, not here): every line of a CTA's first half of blocks,
// none after.
template <int kPolicy>
__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t p;
  if constexpr (kPolicy == 2) asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 0.5;\n" : "=l"(p));
  else if constexpr (kPolicy == 3) asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 0.25;\n" : "=l"(p));
  else p = l2_evict_first_policy();
  return p;
}

// Threads 0..63 copy one row each of block b into slot b % kRing (thread 0 arms it); every
// thread then reads a word of the slot and a CTA barrier frees it.
template <int kPolicy>
__global__ void __launch_bounds__(128, 1) ring_kernel(const uint8_t* cache, const int* slots, int blocks, uint32_t* sink) {
  extern __shared__ __align__(128) uint8_t smem[];
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem + kRing * kSlotBytes);
  const int t = threadIdx.x;
  const int* my = slots + static_cast<int64_t>(blockIdx.x) * kMaxBlocks * kKeys;
  uint64_t pol = 0;
  if constexpr (kPolicy > 0) pol = evict_first_policy<kPolicy>();
  if (t == 0)
    for (int s = 0; s < kRing; ++s) mbar_init(bars + s, 1);
  __syncthreads();
  auto issue = [&](int b, int idx) {
    if (t >= kKeys) return;
    if (t == 0) mbar_arrive_expect_tx(bars + b % kRing, kKeys * kRowBytes);
    const uint32_t bar = static_cast<uint32_t>(__cvta_generic_to_shared(bars + b % kRing));
    const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem + (b % kRing) * kSlotBytes + t * kStride));
    const uint8_t* src = cache + static_cast<int64_t>(idx) * kRowBytes;
    if (kPolicy == 0 || (kPolicy == 4 && 2 * b >= blocks)) bulk_copy_g2s(dst, src, kRowBytes, bar);
    else bulk_copy_g2s(dst, src, kRowBytes, bar, pol);
  };
  for (int b = 0; b < kRing && b < blocks; ++b) issue(b, t < kKeys ? __ldg(my + b * kKeys + t) : 0);
  uint32_t x = 0;
  for (int b = 0; b < blocks; ++b) {
    mbar_wait(bars + b % kRing, (b / kRing) & 1);
    x ^= *reinterpret_cast<const uint32_t*>(smem + (b % kRing) * kSlotBytes + (t & 63) * kStride + (t >> 6) * 16);
    __syncthreads();
    if (b + kRing < blocks) issue(b + kRing, t < kKeys ? __ldg(my + (b + kRing) * kKeys + t) : 0);
  }
  if (x == 0x12345678u) sink[blockIdx.x] = x;
}

// A grid-stride read of `bytes` with 16-byte non-coherent loads, evict_first or not.
template <bool kHint>
__global__ void __launch_bounds__(512) read_kernel(const uint4* p, size_t n, uint32_t* sink) {
  uint64_t pol = 0;
  if constexpr (kHint) pol = evict_first_policy<1>();
  uint32_t x = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint4 v;
    if constexpr (kHint)
      asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;\n"
                   : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                   : "l"(p + i), "l"(pol));
    else
      asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                   : "l"(p + i));
    x ^= v.x ^ v.w;
  }
  if (x == 0x12345678u) sink[0] = x;
}

}  // namespace

int main() {
  int sms = 0;
  SMLA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  int l2 = 0;
  SMLA_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  const int ctas = std::min(sms, 128);
  const Buffers buf = make_buffers();
  uint8_t *cache = buf.cache, *flush = buf.flush;
  uint8_t* seq = nullptr;
  SMLA_CUDA_CHECK(cudaMalloc(&seq, kSeqBytes));
  SMLA_CUDA_CHECK(cudaMemset(seq, 0x22, kSeqBytes));
  int* slots = random_slots(static_cast<size_t>(2 * ctas) * kMaxBlocks * kKeys);  // two waves' worth
  uint32_t* sink = nullptr;
  SMLA_CUDA_CHECK(cudaMalloc(&sink, sms * sizeof(uint32_t)));
  using Ring = void (*)(const uint8_t*, const int*, int, uint32_t*);
  const Ring rings[] = {ring_kernel<0>, ring_kernel<1>, ring_kernel<2>, ring_kernel<3>, ring_kernel<4>};
  for (Ring r : rings) SMLA_CUDA_CHECK(cudaFuncSetAttribute(r, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  const char* flushes[] = {"memset", "read", "none"};
  // the share of lines marked evict_first
  const char* fractions[] = {"0", "1.0", "0.5", "0.25", "\"first half of the blocks\""};
  std::printf("{\"l2_bytes\": %d, \"sms\": %d, \"ctas\": %d}\n", l2, sms, ctas);
  // kernel 0: ring gather of `blocks` blocks a CTA; 1: sequential read of 256 MB; 2: the ring
  // gather in two waves of CTAs (as 256 CTAs of the 16-row tiles run V3.2 b128 s_q2 h16).
  for (int kernel = 0; kernel < 3; ++kernel)
    for (int blocks : {32, 128}) {
      if (kernel != 0 && blocks != 32) continue;
      const int grid = kernel == 2 ? 2 * ctas : ctas;
      for (int f = 0; f < 3; ++f)
        for (int hint = 0; hint < (kernel == 1 ? 2 : 5); ++hint) {
          if (kernel == 2 && (hint == 2 || hint == 3)) continue;
          const double s = median_seconds(
              26,
              [&] {
                if (f == 0) SMLA_CUDA_CHECK(cudaMemsetAsync(flush, 0, kFlushBytes));
                if (f == 1) read_kernel<false><<<sms * 4, 512>>>(reinterpret_cast<const uint4*>(flush), kFlushBytes / 16, sink);
              },
              [&] {
                if (kernel != 1) {
                  rings[hint]<<<grid, 128, kSmem>>>(cache, slots, blocks, sink);
                } else {
                  if (hint) read_kernel<true><<<sms * 4, 512>>>(reinterpret_cast<const uint4*>(seq), kSeqBytes / 16, sink);
                  else read_kernel<false><<<sms * 4, 512>>>(reinterpret_cast<const uint4*>(seq), kSeqBytes / 16, sink);
                }
              });
          const double bytes = kernel != 1 ? static_cast<double>(grid) * blocks * kKeys * kRowBytes : double(kSeqBytes);
          std::printf(
              "{\"kernel\": \"%s\", \"ctas\": %d, \"blocks\": %d, \"flush\": \"%s\", \"evict_first\": %s, \"us\": %.2f, "
              "\"GBps\": %.0f}\n",
              kernel == 1 ? "sequential read" : "ring gather", kernel == 1 ? 0 : grid, kernel == 1 ? 0 : blocks, flushes[f],
              fractions[hint], s * 1e6, bytes / s * 1e-9);
        }
    }
  return 0;
}
