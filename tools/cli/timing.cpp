#include "cli/timing.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/buffer.h"
#include "smla/error.h"

#if SMLA_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace smla::cli {
namespace {

double median(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  return n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
}

// `ms` in the order the calls ran.
Timing summarize(const std::vector<double>& ms) {
  Timing t;
  t.iters = static_cast<int>(ms.size());
  if (ms.empty()) return t;
  t.median_ms = median(ms);
  t.min_ms = *std::min_element(ms.begin(), ms.end());
  if (ms.size() >= 9) {
    const auto third = static_cast<std::ptrdiff_t>(ms.size() / 3);
    t.first_third_ms = median({ms.begin(), ms.begin() + third});
    t.last_third_ms = median({ms.end() - third, ms.end()});
  }
  return t;
}

#if SMLA_WITH_CUDA
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw RuntimeError(std::string(what) + ": " + cudaGetErrorString(e));
}

// Larger than the H200's 60 MB L2 many times over: after the memset nothing of the inputs
// is left in L2.
constexpr size_t kFlushBytes = size_t(512) << 20;

const Buffer& flush_buffer() {
  static Buffer b(kFlushBytes, cuda_device(0));
  return b;
}

struct EventPair {
  cudaEvent_t start = nullptr, stop = nullptr;
  EventPair() {
    check(cudaEventCreate(&start), "cudaEventCreate");
    check(cudaEventCreate(&stop), "cudaEventCreate");
  }
  ~EventPair() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
};
#endif

}  // namespace

Timing time_cpu(const std::function<void()>& call, int warmup, int iters, const CallHook& hook) {
  for (int i = 0; i < warmup; ++i) {
    call();
    if (hook) hook("warm-up", i + 1, warmup);
  }
  std::vector<double> ms;
  const int n = std::max(iters, 1);
  for (int i = 0; i < n; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    const auto t1 = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    if (hook) hook("timed", i + 1, n);
  }
  return summarize(ms);
}

Timing time_cuda(const std::function<void(void* stream)>& call_once, int warmup, int iters, bool graph,
                 const CallHook& hook) {
#if SMLA_WITH_CUDA
  auto stream = static_cast<cudaStream_t>(cuda_stream());
  const Buffer& flush = flush_buffer();
  cudaGraph_t g = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (graph) {
    call_once(stream);  // first call outside the capture: one-time setup (function attributes)
    check(cudaStreamSynchronize(stream), "first call");
    check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    call_once(stream);
    check(cudaStreamEndCapture(stream, &g), "cudaStreamEndCapture");
    check(cudaGraphInstantiate(&exec, g, 0), "cudaGraphInstantiate");
  }
  auto call = [&](cudaStream_t s) {
    if (graph) check(cudaGraphLaunch(exec, s), "cudaGraphLaunch");
    else call_once(s);
  };
  struct GraphGuard {
    cudaGraph_t& g;
    cudaGraphExec_t& e;
    ~GraphGuard() {
      if (e) cudaGraphExecDestroy(e);
      if (g) cudaGraphDestroy(g);
    }
  } guard{g, exec};
  for (int i = 0; i < warmup; ++i) call(stream);
  check(cudaStreamSynchronize(stream), "warm-up");
  check(cudaGetLastError(), "warm-up launch");
  if (hook && warmup > 0) hook("warm-up", warmup, warmup);
  // One event pair per call, read after the loop: no host round trip between calls.
  std::vector<EventPair> events(std::max(iters, 1));
  const char* warm_env = std::getenv("SMLA_BENCH_WARM_L2");  // diagnostic: no flush between calls
  const bool warm_l2 = warm_env != nullptr && warm_env[0] == '1';
  for (auto& e : events) {
    if (!warm_l2)
      check(cudaMemsetAsync(flush.data(), 0, flush.bytes(), stream), "L2 flush");
    check(cudaEventRecord(e.start, stream), "cudaEventRecord");
    call(stream);
    check(cudaEventRecord(e.stop, stream), "cudaEventRecord");
  }
  check(cudaStreamSynchronize(stream), "timed calls");
  check(cudaGetLastError(), "timed launch");
  if (hook) hook("timed", static_cast<int>(events.size()), static_cast<int>(events.size()));
  std::vector<double> ms;
  for (auto& e : events) {
    float v = 0;
    check(cudaEventElapsedTime(&v, e.start, e.stop), "cudaEventElapsedTime");
    ms.push_back(v);
  }
  return summarize(ms);
#else
  (void)call_once;
  (void)warmup;
  (void)iters;
  (void)graph;
  (void)hook;
  throw RuntimeError("this smla binary was built without CUDA (configure with -DSMLA_CUDA=ON)");
#endif
}

double cuda_copy_ceiling_gbps() {
#if SMLA_WITH_CUDA
  const size_t bytes = size_t(1) << 30;
  Buffer src(bytes, cuda_device(0)), dst(bytes, cuda_device(0));
  auto stream = static_cast<cudaStream_t>(cuda_stream());
  const Timing t = time_cuda(
      [&](void*) { check(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, stream), "copy"); },
      3, 20);
  return 2.0 * static_cast<double>(bytes) / (t.median_ms * 1e-3) / 1e9;
#else
  return 0;
#endif
}

}  // namespace smla::cli
