// One launcher per (rows, d_qk, format); included only by instantiations/*.cu so that the
// kernels compile in parallel.
#pragma once

#include <algorithm>
#include <cstdint>

#include "cuda/attention/attention_launch.h"
#include "cuda/common/cuda_check.h"
#include "cuda/common/device_info.h"
#include "cuda/common/pdl.cuh"
#include "cuda/common/per_device.h"
#include "cuda/sparse_decode/kernel.cuh"
#include "cuda/sparse_decode/launch.h"

namespace smla::cuda::sparse_decode_family {

// The launch configuration of kKernel (a sparse_decode_kernel of these rows, d, format and
// pairing): its block and shared memory (the function's limit raised on first use), in attrs[0]
// the clusters of two CTAs along grid.y of pairs, in attrs[1] the programmatic dependence on the
// split schedule kernel (the kernel waits for it before it reads anything). Pairs use both
// attributes, other kernels attrs[1] alone. kDs32Roles: the 32-row decode kernel in roles.
template <auto kKernel, int kRows, int kD, int kFmt, bool kPair, bool kPersist, bool kDs32Roles = false>
cudaLaunchConfig_t launch_config(dim3 grid, cudaStream_t stream, cudaLaunchAttribute (&attrs)[2]) {
  constexpr size_t kSmem = smem_bytes<kRows, kD, kFmt, kDs32Roles>();
  raise_dynamic_smem<kKernel>(kSmem);  // on each device the process launches on (per_device.h)
  attrs[0] = {};
  attrs[0].id = cudaLaunchAttributeClusterDimension;
  attrs[0].val.clusterDim.x = 1;
  attrs[0].val.clusterDim.y = kPair ? kPairCtas : 1;
  attrs[0].val.clusterDim.z = 1;
  attrs[1] = pdl_attribute();
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(kernel_threads<kRows, kFmt, kPair, kPersist>());
  cfg.dynamicSmemBytes = kSmem;
  cfg.stream = stream;
  cfg.attrs = kPair ? attrs : attrs + 1;
  cfg.numAttrs = kPair ? 2 : 1;
  return cfg;
}

// One kernel launch; kPair: as clusters of two CTAs along grid.y (config.h, kPairCtas);
// kPersist: the persistent kernel on `resident` CTAs (pairs: clusters) walking `grid` as units.
// kDs32Roles: the 32-row fp8_ds_mla decode kernel in roles (config.h kRawRoles).
template <int kRows, int kD, int kFmt, bool kPair, bool kPersist, bool kLogits, bool kDs32Roles = false>
void launch_kernel(const AttnParams& p, dim3 grid, int64_t resident, cudaStream_t stream) {
  constexpr auto kernel = sparse_decode_kernel<kRows, kD, kFmt, kPair, kPersist, kLogits, kDs32Roles>;
  cudaLaunchAttribute attrs[2];
  cudaLaunchConfig_t cfg = launch_config<kernel, kRows, kD, kFmt, kPair, kPersist, kDs32Roles>(grid, stream, attrs);
  AttnParams args = p;
  // q's tensor map, where this instance reads it (else its Q load never looks at q_tma).
  if constexpr (kLoadsQByTma<kRows, kD, kFmt, kPair, kPersist, kLogits || kFmt == static_cast<int>(CacheFormat::bf16), kLogits>)
    args.q_tma = q_tma_map(args) ? 1 : 0;
  if constexpr (kPersist && kPersistEnds<kFmt>)
    args.o_tma = o_tma_map(args) ? 1 : 0;
  if constexpr (kPersist) {
    args.unit_gx = static_cast<int>(grid.x);
    args.unit_gy = static_cast<int>(grid.y);
    args.unit_gz = static_cast<int>(grid.z);
    cfg.gridDim = dim3(static_cast<unsigned>(resident), kPair ? kPairCtas : 1, 1);
  }
  SMLA_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, args));
  if constexpr (kPersist) print_unit_timeline(stream);  // SMLA_SD_TIMELINE=3 only (timeline.cuh)
  if constexpr (kDs32Roles) print_role_timeline(stream);  // SMLA_SD_TIMELINE=4 only
}

// CTAs (pairs: two-CTA clusters) of the persistent kernel resident at once on the current
// device: one per SM (the count sparse prefill's tail split plans with, launch.cu), or the
// clusters the occupancy query finds, once per device.
template <int kRows, int kD, int kFmt, bool kPair, bool kLogits>
int64_t persistent_slots() {
  if constexpr (!kPair) {
    return static_cast<int64_t>(current_device_info().sm_count);
  } else {
    struct Tag {};
    return once_per_device<Tag>([] {
      constexpr auto kernel = sparse_decode_kernel<kRows, kD, kFmt, kPair, true, kLogits>;
      cudaLaunchAttribute attrs[2];
      cudaLaunchConfig_t one = launch_config<kernel, kRows, kD, kFmt, kPair, true>(dim3(1, kPairCtas, 1), nullptr, attrs);
      one.numAttrs = 1;  // the cluster shape alone
      int clusters = 0;
      SMLA_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, kernel, &one));
      return static_cast<int64_t>(std::max(clusters, 1));
    });
  }
}

// 64-row packed tiles: the persistent kernel when the units exceed one wave (config.h,
// has_persistent), unless SMLA_SPARSE_DECODE_KERNEL names one (launch.h).
template <int kRows, int kD, int kFmt, bool kPair, bool kLogits>
void launch_tiles(const AttnParams& p, dim3 grid, cudaStream_t stream) {
  if constexpr (has_persistent(kRows, kFmt)) {
    const int64_t units = static_cast<int64_t>(grid.x) * (grid.y / (kPair ? kPairCtas : 1)) * grid.z;
    const int64_t slots = persistent_slots<kRows, kD, kFmt, kPair, kLogits>();
    const PersistentChoice choice = persistent_by_env();
    // Dense decode off the TMA path keeps one-unit CTAs: its launch order puts the CTAs that read
    // the same keys side by side (work.cuh dense_cta_position); persistent CTAs measured 20% slower
    // (s_q2 h128 page 48, 2026-12-03).
    const bool takes = !(kPersistEnds<kFmt> && p.dense);
    if (takes && (choice == PersistentChoice::always || (choice == PersistentChoice::beyond_one_wave && units > slots))) {
      // Persistent CTAs read the device schedule from split_offsets (split_lookup.cuh split_slot),
      // and the combine reads it there too.
      if (p.split_inline) launch_split_plan(p, stream);
      return launch_kernel<kRows, kD, kFmt, kPair, true, kLogits>(p, grid, std::min(units, slots), stream);
    }
  }
  launch_kernel<kRows, kD, kFmt, kPair, false, kLogits>(p, grid, 0, stream);
}

// pair: clusters of two CTAs along grid.y (two head tiles of one token) that share each block's
// gathers; only 64-row tiles of packed formats (and of bf16 with kBf16Pairs) have a pair kernel
// (launch.cu decides).
// kLogits: the kernels that also keep max_logits (kernel.cuh), for sparse prefill from a packed cache.
template <int kRows, int kD, int kFmt, bool kLogits>
void launch_instance(const AttnParams& p, dim3 grid, bool pair, cudaStream_t stream) {
  if constexpr (kRows == 64 && kFmt != kDenseE4m3Fp8 &&
                (!bf16_rows(kFmt) || (kBf16Pairs && kFmt == static_cast<int>(CacheFormat::bf16)))) {
    if (pair) return launch_tiles<kRows, kD, kFmt, true, kLogits>(p, grid, stream);
  }
  launch_tiles<kRows, kD, kFmt, false, kLogits>(p, grid, stream);
}

#define SMLA_INSTANTIATE_SPARSE_DECODE(D, FMT)                                                      \
  template void launch_instance<16, D, FMT, false>(const AttnParams&, dim3, bool, cudaStream_t);         \
  template void launch_instance<32, D, FMT, false>(const AttnParams&, dim3, bool, cudaStream_t);         \
  template void launch_instance<64, D, FMT, false>(const AttnParams&, dim3, bool, cudaStream_t);

// The packed formats' kernels that also keep max_logits (sparse prefill from the paged cache).
#define SMLA_INSTANTIATE_SPARSE_DECODE_LOGITS(D, FMT)                                               \
  template void launch_instance<16, D, FMT, true>(const AttnParams&, dim3, bool, cudaStream_t);          \
  template void launch_instance<32, D, FMT, true>(const AttnParams&, dim3, bool, cudaStream_t);          \
  template void launch_instance<64, D, FMT, true>(const AttnParams&, dim3, bool, cudaStream_t);

// Formats with 16/32-row tiles only (fp8_e4m3 dense decode: h_q <= 32).
#define SMLA_INSTANTIATE_SPARSE_DECODE_NARROW(D, FMT)                                               \
  template void launch_instance<16, D, FMT, false>(const AttnParams&, dim3, bool, cudaStream_t);         \
  template void launch_instance<32, D, FMT, false>(const AttnParams&, dim3, bool, cudaStream_t);

}  // namespace smla::cuda::sparse_decode_family
