// Microbenchmark: what does running a kernel's code for the first time cost? At b = 1 a
// sparse-decode CTA runs most of its ~100 KB of SASS once (Q load, one block, the epilogue), and
// its phases take microseconds each even with every byte of data in L2 (PERF.md, twenty-second
// pass: b1 h128 20.9 µs cold, 19.4 with no L2 flush). If instruction fetch sets that pace, the
// b = 1 floor is the code on the startup path, not its loads.
//
// Kernels of N straight-line instructions (eight independent IMAD chains, so that no chain's
// latency sets the pace; measured ~2.5 cycles an instruction a scheduler, IMAD's issue rate),
// one CTA of 128 threads per SM, run twice in a rolled loop: the first pass fetches the code,
// the second runs it from the SM's instruction caches where it fits. Each CTA's first thread
// records %globaltimer at entry, after the first pass and at exit. Three cases per N, each the median over SMs:
//   cold_l2   after a 512 MB memset (the benchmark method: L2 holds no code or data)
//   again     the same kernel relaunched at once (code in L2, perhaps in the SM's caches)
//   evicted   after a different kernel of the same size ran (code in L2, the SM's instruction
//             caches refilled by other code)
// Printed: each pass's ns and ns per KB of code (16 bytes an instruction); pass 2 is the warm
// rate, pass 1 minus pass 2 what fetching the code cost.
//
// Build and run on the GPU machine:
//   nvcc -O3 -std=c++20 -arch=sm_90a bench/micro/cold_code.cu -o cold_code && ./cold_code
// Prints one JSON line per (N, case).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <utility>
#include <vector>

namespace {

__device__ __forceinline__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

constexpr int kChains = 8;

// Eight instructions whose immediates differ by step and by kernel (kSalt), so that no two
// kernels share code and ptxas cannot fold a chain (y is known only at run time).
template <uint32_t kSalt, int I>
__device__ __forceinline__ void step(uint32_t (&r)[kChains], uint32_t y) {
  constexpr uint32_t k = (static_cast<uint32_t>(I) * 2654435761u + kSalt) & 0xffffu;
  asm volatile(
      "mad.lo.u32 %0, %0, %8, %9;\n"
      "mad.lo.u32 %1, %1, %8, %10;\n"
      "mad.lo.u32 %2, %2, %8, %11;\n"
      "mad.lo.u32 %3, %3, %8, %12;\n"
      "mad.lo.u32 %4, %4, %8, %13;\n"
      "mad.lo.u32 %5, %5, %8, %14;\n"
      "mad.lo.u32 %6, %6, %8, %15;\n"
      "mad.lo.u32 %7, %7, %8, %16;\n"
      : "+r"(r[0]), "+r"(r[1]), "+r"(r[2]), "+r"(r[3]), "+r"(r[4]), "+r"(r[5]), "+r"(r[6]), "+r"(r[7])
      : "r"(y), "n"(k | 1), "n"(k | 3), "n"(k | 5), "n"(k | 7), "n"(k | 9), "n"(k | 11), "n"(k | 13), "n"(k | 15));
}

template <uint32_t kSalt, int... I>
__device__ __forceinline__ void body(std::integer_sequence<int, I...>, uint32_t (&r)[kChains], uint32_t y) {
  (step<kSalt, I>(r, y), ...);
}

// ns[2 x + 0]: CTA x's first pass, ns[2 x + 1]: its second.
template <int kInstrs, uint32_t kSalt>
__global__ void __launch_bounds__(128, 1) straight_line(uint64_t* ns, uint32_t* sink, uint32_t y) {
  const uint64_t t0 = now_ns();
  uint64_t t1 = t0;
  uint32_t r[kChains];
#pragma unroll
  for (int i = 0; i < kChains; ++i) r[i] = threadIdx.x ^ static_cast<uint32_t>(i);
#pragma unroll 1
  for (int pass = 0; pass < 2; ++pass) {
    body<kSalt>(std::make_integer_sequence<int, kInstrs / kChains>{}, r, y + static_cast<uint32_t>(pass));
    if (pass == 0) t1 = now_ns();
  }
  const uint64_t t2 = now_ns();
  if (threadIdx.x == 0) {
    ns[2 * blockIdx.x] = t1 - t0;
    ns[2 * blockIdx.x + 1] = t2 - t1;
  }
  uint32_t x = 0;
#pragma unroll
  for (int i = 0; i < kChains; ++i) x ^= r[i];
  if (x == 0x12345678u) sink[blockIdx.x] = x;  // keeps the chains live
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

template <int kInstrs>
void measure(int sms, void* flush, size_t flush_bytes, uint64_t* ns, uint32_t* sink) {
  auto median_ns = [&](int pass) {
    std::vector<uint64_t> h(2 * sms), v(sms);
    check(cudaMemcpy(h.data(), ns, 2 * sms * sizeof(uint64_t), cudaMemcpyDeviceToHost), "copy");
    for (int x = 0; x < sms; ++x) v[x] = h[2 * x + pass];
    std::nth_element(v.begin(), v.begin() + sms / 2, v.end());
    return static_cast<double>(v[sms / 2]);
  };
  auto print = [&](const char* which) {
    const double kb = kInstrs * 16.0 / 1024.0, p1 = median_ns(0), p2 = median_ns(1);
    std::printf("{\"micro\": \"cold_code\", \"instructions\": %d, \"code_kb\": %.0f, \"case\": \"%s\", "
                "\"pass1_ns\": %.0f, \"pass2_ns\": %.0f, \"pass1_ns_per_kb\": %.1f, \"pass2_ns_per_kb\": %.1f}\n",
                kInstrs, kb, which, p1, p2, p1 / kb, p2 / kb);
  };
  const uint32_t y = 3;
  for (int rep = 0; rep < 3; ++rep) {  // the first rep also loads the module's code
    check(cudaMemset(flush, rep, flush_bytes), "flush");
    straight_line<kInstrs, 0x1111u><<<sms, 128>>>(ns, sink, y);
    check(cudaDeviceSynchronize(), "cold");
    if (rep > 0) print("cold_l2");
    straight_line<kInstrs, 0x1111u><<<sms, 128>>>(ns, sink, y);
    check(cudaDeviceSynchronize(), "again");
    if (rep > 0) print("again");
    straight_line<kInstrs, 0x2222u><<<sms, 128>>>(ns, sink, y);  // other code of the same size
    straight_line<kInstrs, 0x1111u><<<sms, 128>>>(ns, sink, y);
    check(cudaDeviceSynchronize(), "evicted");
    if (rep > 0) print("evicted");
  }
}

}  // namespace

int main() {
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "SM count");
  const size_t flush_bytes = size_t(512) << 20;
  void* flush = nullptr;
  uint64_t* ns = nullptr;
  uint32_t* sink = nullptr;
  check(cudaMalloc(&flush, flush_bytes), "malloc");
  check(cudaMalloc(&ns, 2 * sms * sizeof(uint64_t)), "malloc");
  check(cudaMalloc(&sink, sms * sizeof(uint32_t)), "malloc");
  measure<1024>(sms, flush, flush_bytes, ns, sink);
  measure<4096>(sms, flush, flush_bytes, ns, sink);
  measure<8192>(sms, flush, flush_bytes, ns, sink);
  return 0;
}
