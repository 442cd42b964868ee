// Microbenchmark: what a split-KV combine's start costs after the attention kernel. At b = 1
// (V3.2 h128: 88 attention CTAs of ~10 µs each, then the combine) a call takes ~2.75 µs more
// than its attention kernel alone (docs/PERF.md, forty-fifth pass). The combine is launched as a
// programmatic dependent: its CTAs may start once every attention CTA has, but it reads the
// partials only after griddepcontrol.wait, i.e. once the whole attention grid has completed and
// its writes are flushed. How much of the 2.75 µs is that hand-off, and how much would a
// dependent save that reads as soon as every producing CTA has raised a counter?
//
// Primary: G CTAs of 384 threads with 200 KB of shared memory (one an SM, like the attention
// kernel), each busy for W ns, then writing 16 KB (its partial rows). Dependent: 128 CTAs of 128
// threads (the combine's grid at b1 h128), each reading 1 KB from each of eight primary CTAs'
// rows and writing 1 KB. Cases:
//   serial    the dependent launched in stream order (no programmatic dependence)
//   pdl_wait  the dependent programmatic, griddepcontrol.wait before its reads (the library's way)
//   counter   the dependent programmatic; each primary CTA raises a counter after its stores
//             (barrier, then red.release.gpu), the dependent's thread 0 polls it (ld.acquire.gpu)
//             until all G are in, and griddepcontrol.wait comes only at the dependent's end
// One CUDA graph per case of [memset of the counter, primary, dependent], replayed; %globaltimer
// marks each primary CTA's end and each dependent CTA's release (its wait or count done) and end.
// Printed per (case, G): medians over replays of the release of the first / median / last
// dependent CTA and of the dependent's last end, each minus the last primary CTA's end (ns),
// and of the replay's event time (µs).
//
// Build and run on the GPU machine:
//   nvcc -O3 -std=c++20 -arch=sm_90a bench/micro/pdl_handoff.cu -o pdl_handoff && ./pdl_handoff
// Prints one JSON line per (case, G).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr int kPrimaryThreads = 384, kDepCtas = 128, kDepThreads = 128;
constexpr int kPartFloats = 4096;        // 16 KB a primary CTA
constexpr int kPrimarySmem = 200 << 10;  // one primary CTA an SM
enum Case { kSerial = 0, kPdlWait = 1, kCounter = 2 };
const char* const kCaseNames[] = {"serial", "pdl_wait", "counter"};

__device__ __forceinline__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// marks: [G] primary ends, then [kDepCtas] dependent releases, then [kDepCtas] dependent ends.
__global__ void __launch_bounds__(kPrimaryThreads, 1)
    primary(float* part, unsigned* counter, uint64_t* marks, int busy_ns, int raise) {
  // (its dynamic shared memory, unused, keeps it one CTA an SM)
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const uint64_t t0 = now_ns();
  while (now_ns() - t0 < static_cast<uint64_t>(busy_ns)) {
  }
  for (int i = threadIdx.x; i < kPartFloats; i += kPrimaryThreads)
    part[static_cast<size_t>(blockIdx.x) * kPartFloats + i] = static_cast<float>(i + static_cast<int>(blockIdx.x));
  __syncthreads();  // every thread's stores, ordered before thread 0's release (cumulativity)
  if (threadIdx.x == 0) {
    if (raise) asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(counter) : "memory");
    marks[blockIdx.x] = now_ns();
  }
}

template <int kCase>
__global__ void __launch_bounds__(kDepThreads) dependent(const float* part, float* out, const unsigned* counter,
                                                         uint64_t* marks, int g) {
  if constexpr (kCase == kPdlWait) asm volatile("griddepcontrol.wait;" ::: "memory");
  if constexpr (kCase == kCounter) {
    if (threadIdx.x == 0) {
      unsigned n = 0;
      for (;;) {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(n) : "l"(counter) : "memory");
        if (n >= static_cast<unsigned>(g)) break;
        __nanosleep(64);
      }
    }
    __syncthreads();  // the other threads' reads after thread 0's acquire
  }
  const int b = blockIdx.x;
  if (threadIdx.x == 0) marks[g + b] = now_ns();
  float acc = 0.f;
#pragma unroll
  for (int k = 0; k < 8; ++k) {  // 1 KB from each of eight primary CTAs, as a head's splits
    const int src = (b + 11 * k) % g;
    const float2 v = reinterpret_cast<const float2*>(part + static_cast<size_t>(src) * kPartFloats +
                                                     (b % 16) * 256)[threadIdx.x];
    acc += v.x + v.y;
  }
  out[b * kDepThreads + threadIdx.x] = acc;
  if constexpr (kCase == kCounter) asm volatile("griddepcontrol.wait;" ::: "memory");  // later work's order
  __syncthreads();
  if (threadIdx.x == 0) marks[g + kDepCtas + b] = now_ns();
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

template <int kCase>
void launch_dependent(cudaStream_t s, const float* part, float* out, const unsigned* counter, uint64_t* marks, int g) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(kDepCtas);
  cfg.blockDim = dim3(kDepThreads);
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = kCase == kSerial ? 0 : 1;
  check(cudaLaunchKernelEx(&cfg, dependent<kCase>, part, out, counter, marks, g), "dependent launch");
}

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

template <int kCase>
void measure(int g, int busy_ns, int reps) {
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  float *part = nullptr, *out = nullptr;
  unsigned* counter = nullptr;
  uint64_t* marks = nullptr;
  check(cudaMalloc(&part, static_cast<size_t>(g) * kPartFloats * sizeof(float)), "malloc");
  check(cudaMalloc(&out, kDepCtas * kDepThreads * sizeof(float)), "malloc");
  check(cudaMalloc(&counter, sizeof(unsigned)), "malloc");
  const int n_marks = g + 2 * kDepCtas;
  check(cudaMalloc(&marks, n_marks * sizeof(uint64_t)), "malloc");
  check(cudaFuncSetAttribute(primary, cudaFuncAttributeMaxDynamicSharedMemorySize, kPrimarySmem), "smem");

  cudaGraph_t graph;
  cudaGraphExec_t exec;
  check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "capture");
  check(cudaMemsetAsync(counter, 0, sizeof(unsigned), s), "memset");
  primary<<<g, kPrimaryThreads, kPrimarySmem, s>>>(part, counter, marks, busy_ns, kCase == kCounter ? 1 : 0);
  check(cudaGetLastError(), "primary launch");
  launch_dependent<kCase>(s, part, out, counter, marks, g);
  check(cudaStreamEndCapture(s, &graph), "end capture");
  check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");

  cudaEvent_t e0, e1;
  check(cudaEventCreate(&e0), "event");
  check(cudaEventCreate(&e1), "event");
  std::vector<double> first, mid, last, end, us;
  std::vector<uint64_t> h(n_marks);
  for (int rep = 0; rep < reps + 5; ++rep) {
    check(cudaEventRecord(e0, s), "record");
    check(cudaGraphLaunch(exec, s), "graph launch");
    check(cudaEventRecord(e1, s), "record");
    check(cudaStreamSynchronize(s), "sync");
    if (rep < 5) continue;  // warm-up
    float ms = 0.f;
    check(cudaEventElapsedTime(&ms, e0, e1), "elapsed");
    check(cudaMemcpy(h.data(), marks, n_marks * sizeof(uint64_t), cudaMemcpyDeviceToHost), "copy");
    const uint64_t p_end = *std::max_element(h.begin(), h.begin() + g);
    std::vector<double> rel(kDepCtas);
    for (int b = 0; b < kDepCtas; ++b) rel[b] = static_cast<double>(static_cast<int64_t>(h[g + b] - p_end));
    std::sort(rel.begin(), rel.end());
    const uint64_t d_end = *std::max_element(h.begin() + g + kDepCtas, h.end());
    first.push_back(rel.front());
    mid.push_back(rel[kDepCtas / 2]);
    last.push_back(rel.back());
    end.push_back(static_cast<double>(static_cast<int64_t>(d_end - p_end)));
    us.push_back(ms * 1e3);
  }
  std::printf("{\"micro\": \"pdl_handoff\", \"case\": \"%s\", \"primary_ctas\": %d, \"busy_ns\": %d, \"reps\": %d, "
              "\"release_first_ns\": %.0f, \"release_median_ns\": %.0f, \"release_last_ns\": %.0f, "
              "\"dependent_end_ns\": %.0f, \"replay_us\": %.2f}\n",
              kCaseNames[kCase], g, busy_ns, reps, median(first), median(mid), median(last), median(end), median(us));
  check(cudaGraphExecDestroy(exec), "destroy");
  check(cudaGraphDestroy(graph), "destroy");
  check(cudaEventDestroy(e0), "event");
  check(cudaEventDestroy(e1), "event");
  check(cudaFree(part), "free");
  check(cudaFree(out), "free");
  check(cudaFree(counter), "free");
  check(cudaFree(marks), "free");
  check(cudaStreamDestroy(s), "stream");
}

}  // namespace

int main() {
  const int busy_ns = 8000, reps = 200;
  for (int g : {88, 128}) {
    measure<kSerial>(g, busy_ns, reps);
    measure<kPdlWait>(g, busy_ns, reps);
    measure<kCounter>(g, busy_ns, reps);
  }
  return 0;
}
