// Microbenchmark: what does running a kernel's code for the first time cost? At b = 1 a
// sparse-decode CTA runs most of its ~100 KB of SASS once (Q load, one block, the epilogue), and
// its phases take microseconds each even with every byte of data in L2 (PERF.md, twenty-second
// pass: b1 h128 20.9 µs cold, 19.4 with no L2 flush). If instruction fetch sets that pace, the
// b = 1 floor is the code on the startup path, not its loads.
//
// Kernels of N straight-line instructions (four independent IMAD chains, so a warm SM issues
// about one a cycle), one CTA of 128 threads per SM; each CTA's first thread records
// %globaltimer at entry and exit. Three cases per N, each the median over SMs:
//   cold_l2   after a 512 MB memset (the benchmark method: L2 holds no code or data)
//   again     the same kernel relaunched at once (code in L2, perhaps in the SM's caches)
//   evicted   after a different kernel of the same size ran (code in L2, the SM's instruction
//             caches refilled by other code)
// Printed: ns and ns per KB of code (16 bytes an instruction); "again" is the warm rate.
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

// Four instructions whose immediates differ by step and by kernel (kSalt), so that no two
// kernels share code and ptxas cannot fold a chain (y is known only at run time).
template <uint32_t kSalt, int I>
__device__ __forceinline__ void step4(uint32_t& a, uint32_t& b, uint32_t& c, uint32_t& d, uint32_t y) {
  constexpr uint32_t k = (static_cast<uint32_t>(I) * 2654435761u + kSalt) & 0xffffu;
  asm volatile(
      "mad.lo.u32 %0, %0, %4, %5;\n"
      "mad.lo.u32 %1, %1, %4, %6;\n"
      "mad.lo.u32 %2, %2, %4, %7;\n"
      "mad.lo.u32 %3, %3, %4, %8;\n"
      : "+r"(a), "+r"(b), "+r"(c), "+r"(d)
      : "r"(y), "n"(k | 1), "n"(k | 3), "n"(k | 5), "n"(k | 7));
}

template <uint32_t kSalt, int... I>
__device__ __forceinline__ void body(std::integer_sequence<int, I...>, uint32_t& a, uint32_t& b, uint32_t& c,
                                     uint32_t& d, uint32_t y) {
  (step4<kSalt, I>(a, b, c, d, y), ...);
}

template <int kInstrs, uint32_t kSalt>
__global__ void __launch_bounds__(128, 1) straight_line(uint64_t* ns, uint32_t* sink, uint32_t y) {
  const uint64_t t0 = now_ns();
  uint32_t a = threadIdx.x, b = a ^ 1u, c = a ^ 2u, d = a ^ 3u;
  body<kSalt>(std::make_integer_sequence<int, kInstrs / 4>{}, a, b, c, d, y);
  __syncthreads();
  const uint64_t t1 = now_ns();
  if (threadIdx.x == 0) ns[blockIdx.x] = t1 - t0;
  if ((a ^ b ^ c ^ d) == 0x12345678u) sink[blockIdx.x] = a;  // keeps the chains live
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

template <int kInstrs>
void measure(int sms, void* flush, size_t flush_bytes, uint64_t* ns, uint32_t* sink) {
  auto median_ns = [&] {
    std::vector<uint64_t> h(sms);
    check(cudaMemcpy(h.data(), ns, sms * sizeof(uint64_t), cudaMemcpyDeviceToHost), "copy");
    std::nth_element(h.begin(), h.begin() + sms / 2, h.end());
    return static_cast<double>(h[sms / 2]);
  };
  auto print = [&](const char* which, double t) {
    const double kb = kInstrs * 16.0 / 1024.0;
    std::printf("{\"micro\": \"cold_code\", \"instructions\": %d, \"code_kb\": %.0f, \"case\": \"%s\", \"ns\": %.0f, "
                "\"ns_per_kb\": %.1f}\n",
                kInstrs, kb, which, t, t / kb);
  };
  const uint32_t y = 3;
  for (int rep = 0; rep < 3; ++rep) {  // the first rep also loads the module's code
    check(cudaMemset(flush, rep, flush_bytes), "flush");
    straight_line<kInstrs, 0x1111u><<<sms, 128>>>(ns, sink, y);
    check(cudaDeviceSynchronize(), "cold");
    const double cold = median_ns();
    straight_line<kInstrs, 0x1111u><<<sms, 128>>>(ns, sink, y);
    check(cudaDeviceSynchronize(), "again");
    const double again = median_ns();
    straight_line<kInstrs, 0x2222u><<<sms, 128>>>(ns, sink, y);  // other code of the same size
    straight_line<kInstrs, 0x1111u><<<sms, 128>>>(ns, sink, y);
    check(cudaDeviceSynchronize(), "evicted");
    const double evicted = median_ns();
    if (rep == 0) continue;
    print("cold_l2", cold);
    print("again", again);
    print("evicted", evicted);
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
  check(cudaMalloc(&ns, sms * sizeof(uint64_t)), "malloc");
  check(cudaMalloc(&sink, sms * sizeof(uint32_t)), "malloc");
  measure<1024>(sms, flush, flush_bytes, ns, sink);
  measure<4096>(sms, flush, flush_bytes, ns, sink);
  measure<8192>(sms, flush, flush_bytes, ns, sink);
  return 0;
}
