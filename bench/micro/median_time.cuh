// The microbenchmarks' timing loop: `reps` runs of prepare() (untimed: a flush) then launch()
// (timed by CUDA events on the default stream), the first run dropped (it loads the code); the
// median of the rest in seconds.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "cuda/common/cuda_check.h"

template <typename Prepare, typename Launch>
double median_seconds(int reps, Prepare prepare, Launch launch) {
  cudaEvent_t e0, e1;
  SMLA_CUDA_CHECK(cudaEventCreate(&e0));
  SMLA_CUDA_CHECK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int rep = 0; rep < reps; ++rep) {
    prepare();
    SMLA_CUDA_CHECK(cudaEventRecord(e0));
    launch();
    SMLA_CUDA_CHECK(cudaEventRecord(e1));
    SMLA_CUDA_CHECK(cudaEventSynchronize(e1));
    SMLA_CUDA_CHECK(cudaGetLastError());
    float m = 0;
    SMLA_CUDA_CHECK(cudaEventElapsedTime(&m, e0, e1));
    if (rep > 0) ms.push_back(m);
  }
  SMLA_CUDA_CHECK(cudaEventDestroy(e0));
  SMLA_CUDA_CHECK(cudaEventDestroy(e1));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2] * 1e-3;
}
