// Microbenchmark: the sparse-decode producer's row gathers through the LSU (16-byte loads into
// registers, src/cuda/sparse_decode/producer.cuh) against bulk copies by the TMA unit
// (cp.async.bulk, one per 656-byte V3.2 row) into a ring of raw rows in shared memory, each
// followed (or not) by the same conversion and K-tile stores. The question: at h_q <= 32 the
// L1/shared pipe is the busiest (ncu: LSU data wavefronts 75% of cycles, 40% of them the
// gathers); bulk copies take the gathers off it but read the raw rows back from shared memory.
//
// One CTA per SM (the shared memory of every way is the same, 200 KB), 256 threads (the two
// producer warpgroups of a 16-row CTA), 256 blocks of 64 random slots of a 2.75 GB cache each.
// Ways (--way, or all):
//   0 LDG, one block ahead in registers, converted and stored (the shipped producer's loop)
//   1 LDG gathers only (the rows kept live, nothing converted or stored)
//   2 bulk copies into a ring of 3 raw blocks, converted from shared memory and stored
//   3 bulk copies only (ring of 3)
//   4 as 2 with a ring of 2, 5 with a ring of 1
//   6, 7 ring slots of half a block (32 rows), 2 or 3 of them, converted and stored
// Build and run on the GPU machine:
//   nvcc -O3 -std=c++17 -arch=sm_90a -I src -I include bench/micro/gather_bulk_vs_ldg.cu -o gather_bench && ./gather_bench
// Prints one JSON line per way: row bytes per second and ns per block per SM (median of 7).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string_view>
#include <vector>

#include "cuda/common/barriers.cuh"
#include "cuda/common/cuda_check.h"
#include "cuda/common/fp8.cuh"
#include "cuda/common/gather.cuh"
#include "median_time.cuh"

namespace {

using namespace smla::cuda;

constexpr int kRowBytes = 656;           // V3.2 fp8_ds_mla row: 512 e4m3, 4 fp32 scales, 64 bf16
constexpr int kKeys = 64;                // keys per block
constexpr int kThreads = 256;
constexpr int kD = 576;
constexpr int kTileBytes = kKeys * kD * 2;
constexpr int kBlockBytes = kKeys * kRowBytes;  // one raw block in the ring
constexpr int kMaxRing = 3;
constexpr int kSmem = kTileBytes + kMaxRing * kBlockBytes + 64;
constexpr int kBlocks = 256;
constexpr int64_t kCacheRows = 128LL * 32768;  // b128's cache: 2.75 GB


// A thread's share of a key row, as the producer holds it: a quarter of each 64-byte chunk.
struct Share {
  uint4 lat[8];
  uint4 rope[2];
  float4 sc;
};

__device__ __forceinline__ void convert_store(const Share& s, uint8_t* tile, int j, int q) {
  uint8_t* dst = tile + (j >> 3) * 16 * kD + (j & 7) * 16;
  const float sc[4] = {s.sc.x, s.sc.y, s.sc.z, s.sc.w};
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    uint4 lo, hi;
    e4m3x16_to_bf16(s.lat[i], sc[i / 2], lo, hi);
    *reinterpret_cast<uint4*>(dst + (8 * i + 2 * q) * 128) = lo;
    *reinterpret_cast<uint4*>(dst + (8 * i + 2 * q + 1) * 128) = hi;
  }
  *reinterpret_cast<uint4*>(dst + (64 + 2 * q) * 128) = s.rope[0];
  *reinterpret_cast<uint4*>(dst + (64 + 2 * q + 1) * 128) = s.rope[1];
}

__device__ __forceinline__ uint32_t fold(const Share& s) {
  uint32_t x = __float_as_uint(s.sc.x) ^ s.rope[0].x ^ s.rope[1].w;
#pragma unroll
  for (int i = 0; i < 8; ++i) x ^= s.lat[i].x ^ s.lat[i].w;
  return x;
}

// Ways 0 and 1: thread t takes key (t / 32 % 4) * 8 + t % 8 of round t / 128, quarter (t % 32) / 8.
template <bool kConvert>
__global__ void __launch_bounds__(kThreads, 1) ldg_kernel(const uint8_t* cache, const int* slots, uint32_t* sink) {
  extern __shared__ __align__(128) uint8_t smem[];
  const int t = threadIdx.x, lane = t & 31, q = lane >> 3;
  const int key = ((t >> 5) & 3) * 8 + (lane & 7) + 32 * (t >> 7);
  const int* my = slots + static_cast<int64_t>(blockIdx.x) * kBlocks * kKeys;
  auto load = [&](Share& s, int b) {
    const uint8_t* r = cache + static_cast<int64_t>(__ldg(my + b * kKeys + key)) * kRowBytes;
#pragma unroll
    for (int i = 0; i < 8; ++i) s.lat[i] = ldg_nc_v4_l2_256(r + i * 64 + q * 16);
    s.rope[0] = ldg_nc_v4(r + 528 + q * 32);
    s.rope[1] = ldg_nc_v4(r + 528 + q * 32 + 16);
    const uint4 v = ldg_nc_v4(r + 512);
    s.sc = make_float4(__uint_as_float(v.x), __uint_as_float(v.y), __uint_as_float(v.z), __uint_as_float(v.w));
  };
  Share a, b;
  uint32_t x = 0;
  load(a, 0);
  for (int blk = 0; blk < kBlocks; blk += 2) {
    if (blk + 1 < kBlocks) load(b, blk + 1);
    if (kConvert) convert_store(a, smem, key, q);
    else x ^= fold(a);
    if (blk + 2 < kBlocks) load(a, blk + 2);
    if (blk + 1 < kBlocks) {
      if (kConvert) convert_store(b, smem, key, q);
      else x ^= fold(b);
    }
  }
  if (x == 0x12345678u) sink[blockIdx.x] = x;  // keeps the loads
}

// Ways 2-4: threads 0..63 each copy one row of block b into ring slot b % kRing; thread 0 arms
// the slot's barrier for 64 rows. After the wait every thread reads its share from the slot
// (same lane mapping as above), converts and stores it; a CTA barrier frees the slot.
template <bool kConvert, int kRing>
__global__ void __launch_bounds__(kThreads, 1) bulk_kernel(const uint8_t* cache, const int* slots, uint32_t* sink) {
  extern __shared__ __align__(128) uint8_t smem[];
  uint8_t* tile = smem;
  uint8_t* ring = smem + kTileBytes;
  uint64_t* bars = reinterpret_cast<uint64_t*>(ring + kMaxRing * kBlockBytes);
  const int t = threadIdx.x, lane = t & 31, q = lane >> 3;
  const int key = ((t >> 5) & 3) * 8 + (lane & 7) + 32 * (t >> 7);
  const int* my = slots + static_cast<int64_t>(blockIdx.x) * kBlocks * kKeys;
  if (t == 0)
    for (int s = 0; s < kRing; ++s) mbar_init(bars + s, 1);
  __syncthreads();
  auto issue = [&](int b, int slot_index) {
    if (t >= kKeys) return;
    const uint32_t bar = static_cast<uint32_t>(__cvta_generic_to_shared(bars + b % kRing));
    if (t == 0) mbar_arrive_expect_tx(bars + b % kRing, kBlockBytes);
    const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(ring + (b % kRing) * kBlockBytes + t * kRowBytes));
    bulk_copy_g2s(dst, cache + static_cast<int64_t>(slot_index) * kRowBytes, kRowBytes, bar);
  };
  int next = t < kKeys ? __ldg(my + kRing * kKeys + t) : 0;  // index of block kRing, one step ahead
  for (int b = 0; b < kRing; ++b) issue(b, t < kKeys ? __ldg(my + b * kKeys + t) : 0);
  uint32_t x = 0;
  for (int b = 0; b < kBlocks; ++b) {
    mbar_wait(bars + b % kRing, (b / kRing) & 1);
    const uint8_t* r = ring + (b % kRing) * kBlockBytes + key * kRowBytes;
    Share s;
#pragma unroll
    for (int i = 0; i < 8; ++i) s.lat[i] = *reinterpret_cast<const uint4*>(r + i * 64 + q * 16);
    s.rope[0] = *reinterpret_cast<const uint4*>(r + 528 + q * 32);
    s.rope[1] = *reinterpret_cast<const uint4*>(r + 528 + q * 32 + 16);
    s.sc = *reinterpret_cast<const float4*>(r + 512);
    if (kConvert) convert_store(s, tile, key, q);
    else x ^= fold(s);
    __syncthreads();  // every thread has read slot b % kRing
    if (b + kRing < kBlocks) {
      const int idx = next;
      if (b + kRing + 1 < kBlocks && t < kKeys) next = __ldg(my + (b + kRing + 1) * kKeys + t);
      issue(b + kRing, idx);
    }
  }
  if (x == 0x12345678u) sink[blockIdx.x] = x;
}

// Ways 5-7: ring slots of 32 rows (half a block), so that a ring as small as the shared memory a
// 16/32-row CTA has left (42-63 KB) still overlaps copies with conversion. Each thread converts
// 16-byte pieces `part` + 8 i of one row of a slot; threads 0..31 copy the slot's rows.
template <int kRing>
__global__ void __launch_bounds__(kThreads, 1) bulk_half_kernel(const uint8_t* cache, const int* slots, uint32_t* sink) {
  constexpr int kSlotKeys = 32, kSlotBytes = kSlotKeys * kRowBytes, kSlots = kBlocks * 2;
  extern __shared__ __align__(128) uint8_t smem[];
  uint8_t* tile = smem;
  uint8_t* ring = smem + kTileBytes;
  uint64_t* bars = reinterpret_cast<uint64_t*>(ring + kMaxRing * kBlockBytes);
  // A warp: eight rows (all eight rows of a core-matrix group: conflict-free stores) x four
  // consecutive pieces; warps 4..7 take pieces 4..7.
  const int t = threadIdx.x, lane = t & 31, w = t >> 5;
  const int row = 8 * (w & 3) + (lane & 7), part = (lane >> 3) + 4 * (w >> 2);
  const int* my = slots + static_cast<int64_t>(blockIdx.x) * kBlocks * kKeys;
  if (t == 0)
    for (int s = 0; s < kRing; ++s) mbar_init(bars + s, 1);
  __syncthreads();
  auto issue = [&](int h, int slot_index) {
    if (t >= kSlotKeys) return;
    if (t == 0) mbar_arrive_expect_tx(bars + h % kRing, kSlotBytes);
    const uint32_t bar = static_cast<uint32_t>(__cvta_generic_to_shared(bars + h % kRing));
    const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(ring + (h % kRing) * kSlotBytes + t * kRowBytes));
    bulk_copy_g2s(dst, cache + static_cast<int64_t>(slot_index) * kRowBytes, kRowBytes, bar);
  };
  int next = t < kSlotKeys ? __ldg(my + kRing * kSlotKeys + t) : 0;
  for (int h = 0; h < kRing; ++h) issue(h, t < kSlotKeys ? __ldg(my + h * kSlotKeys + t) : 0);
  for (int h = 0; h < kSlots; ++h) {
    mbar_wait(bars + h % kRing, (h / kRing) & 1);
    const uint8_t* r = ring + (h % kRing) * kSlotBytes + row * kRowBytes;
    const float4 sc = *reinterpret_cast<const float4*>(r + 512);
    const float scs[4] = {sc.x, sc.y, sc.z, sc.w};
    const int j = (h & 1) * 32 + row;
    uint8_t* dst = tile + (j >> 3) * 16 * kD + (j & 7) * 16;
#pragma unroll
    for (int i = 0; i < 4; ++i) {  // latent piece c = 8 i + part: values 16 c .. 16 c + 15, scale tile i
      const int c = 8 * i + part;
      uint4 lo, hi;
      e4m3x16_to_bf16(*reinterpret_cast<const uint4*>(r + c * 16), scs[i], lo, hi);
      *reinterpret_cast<uint4*>(dst + (2 * c) * 128) = lo;
      *reinterpret_cast<uint4*>(dst + (2 * c + 1) * 128) = hi;
    }
    *reinterpret_cast<uint4*>(dst + (64 + part) * 128) = *reinterpret_cast<const uint4*>(r + 528 + part * 16);
    __syncthreads();
    if (h + kRing < kSlots) {
      const int idx = next;
      if (h + kRing + 1 < kSlots && t < kSlotKeys) next = __ldg(my + (h + kRing + 1) * kSlotKeys + t);
      issue(h + kRing, idx);
    }
  }
  if (sink == nullptr) sink[0] = 0;
}

}  // namespace

int main(int argc, char** argv) {
  int only = -1;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string_view(argv[i]) == "--way") only = std::atoi(argv[i + 1]);
  int sms = 0;
  SMLA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  uint8_t* cache = nullptr;
  SMLA_CUDA_CHECK(cudaMalloc(&cache, kCacheRows * kRowBytes));
  SMLA_CUDA_CHECK(cudaMemset(cache, 0x11, kCacheRows * kRowBytes));
  std::vector<int> h(static_cast<size_t>(sms) * kBlocks * kKeys);
  std::mt19937_64 rng(7);
  for (auto& v : h) v = static_cast<int>(rng() % kCacheRows);
  int* slots = nullptr;
  uint32_t* sink = nullptr;
  SMLA_CUDA_CHECK(cudaMalloc(&slots, h.size() * sizeof(int)));
  SMLA_CUDA_CHECK(cudaMalloc(&sink, sms * sizeof(uint32_t)));
  SMLA_CUDA_CHECK(cudaMemcpy(slots, h.data(), h.size() * sizeof(int), cudaMemcpyHostToDevice));
  using Kernel = void (*)(const uint8_t*, const int*, uint32_t*);
  const Kernel ways[] = {ldg_kernel<true>,       ldg_kernel<false>,      bulk_kernel<true, 3>, bulk_kernel<false, 3>,
                         bulk_kernel<true, 2>,    bulk_kernel<true, 1>,   bulk_half_kernel<2>,  bulk_half_kernel<3>};
  const char* what[] = {"LDG, one block ahead, converted + stored (shipped loop)", "LDG gathers only",
                        "bulk copies, ring of 3 blocks (126 KB), converted + stored", "bulk copies only, ring of 3 blocks",
                        "bulk copies, ring of 2 blocks (84 KB), converted + stored",
                        "bulk copies, ring of 1 block (42 KB), converted + stored",
                        "bulk copies, ring of 2 half blocks (42 KB), converted + stored",
                        "bulk copies, ring of 3 half blocks (63 KB), converted + stored"};
  constexpr int kWays = sizeof(ways) / sizeof(ways[0]);
  for (int w = 0; w < kWays; ++w) {
    if (only >= 0 && w != only) continue;
    SMLA_CUDA_CHECK(cudaFuncSetAttribute(ways[w], cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    const double s = median_seconds(
        8, [&] { SMLA_CUDA_CHECK(cudaMemset(cache, 0x11, 512 << 20)); },  // flush L2 between runs
        [&] { ways[w]<<<sms, kThreads, kSmem>>>(cache, slots, sink); });
    const double bytes = static_cast<double>(sms) * kBlocks * kKeys * kRowBytes;
    std::printf("{\"way\": %d, \"what\": \"%s\", \"us\": %.1f, \"row_GBps\": %.0f, \"ns_per_block_per_sm\": %.0f}\n", w, what[w],
                s * 1e6, bytes / s * 1e-9, s * 1e9 / kBlocks);
  }
  return 0;
}
