// A minimal parallel-for over an index range: the CPU backend splits independent rows
// (query tokens, requests) over the machine's cores.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace smla::ref {

template <typename F>
void parallel_for(int64_t n, F&& body) {
  if (n <= 0) return;
  unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  int64_t workers = std::min<int64_t>(n, hw);
  if (workers <= 1) {
    for (int64_t i = 0; i < n; ++i) body(i);
    return;
  }
  std::exception_ptr err;
  std::mutex mu;
  std::vector<std::thread> pool;
  pool.reserve(workers);
  for (int64_t w = 0; w < workers; ++w) {
    pool.emplace_back([&, w] {
      try {
        for (int64_t i = w; i < n; i += workers) body(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!err) err = std::current_exception();
      }
    });
  }
  for (auto& t : pool) t.join();
  if (err) std::rethrow_exception(err);
}

// body(i) for i in [0, n): over the cores when `spread`, in order on this thread otherwise (the
// level of a nested loop that is not the parallel one).
template <typename F>
void for_each_index(int64_t n, bool spread, F&& body) {
  if (spread) {
    parallel_for(n, body);
  } else {
    for (int64_t i = 0; i < n; ++i) body(i);
  }
}

}  // namespace smla::ref
