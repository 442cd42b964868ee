// The producer of kRawConsumer tiles (config.h): rows copied by the TMA unit into a ring of
// kRawRing raw blocks, nothing converted or stored here. Lanes 0..7 of each of the eight producer
// warps (kRawWgs 2: lanes 0..15 of four) own one row of every block (a warp issues cp.async.bulk
// one lane at a time, so the copies are spread over the warps). A row's copy arms its slot's "full" barrier for its bytes; a
// skipped key (past the length, causal, a missing page) is not copied: its slot row is zeroed
// (stale or uninitialized bytes could be e4m3 NaN, and P V reads every row) and marked in `ok`.
// The slot of block i is reissued for block i + kRawRing once the consumer warps released it.
// Tried and removed (same-call A/Bs, 2026-12-01): loading the indices four blocks ahead instead
// of one (level: sparse b128 h16 67.8 -> 68.4 µs, dense fp8 h16 177.3 -> 179.7); having the TMA
// unit also prefetch each lane's row of block i + 4 / i + 6 into L2 (cp.async.bulk.prefetch.L2:
// far slower, sparse h16 68.8 -> 92.5 / 100.2 µs, dense fp8 h16 180.7 -> 261.4 / 268.0); loading
// each lane's first index at the kernel's entry, before the barriers' setup, with or without the
// consumers' Q lines prefetched into L2 there (2026-12-02, level within 1%: b1 h128 16.9 / 17.0
// / 16.7, b128 h16 67.7 / 68.1 / 68.0, h32 87.9 / 88.8 / 88.1, dense fp8 h16 178.6 / 180.0 / 179.7).
// Tried and removed (2026-12-06, docs/PERF.md fifty-fifth pass, an H100, two reps): no copy
// until the consumers' Q is in shared memory (b128 h16 85.5 -> 87.3 µs, b1 h128 16.8 -> 17.8) or
// until its loads are issued (level): the copies do not hold Q back (code in 285e7cc).
#pragma once

#include <cstdint>

#include "cuda/common/barriers.cuh"
#include "cuda/common/gather.cuh"
#include "cuda/common/wgmma.cuh"
#include "cuda/sparse_decode/config.h"
#include "cuda/sparse_decode/ds_block.cuh"
#include "cuda/sparse_decode/producer.cuh"
#include "cuda/sparse_decode/work.cuh"

namespace smla::cuda::sparse_decode_family {

// kReadOnce: each row is read by this CTA alone (decode), so its copy may carry the L2
// evict_first policy (producer.cuh copy_row_g2s). kDs32Roles: on the run-time roles kernel's plan.
template <int kRows, int kFmt, bool kReadOnce, bool kDs32Roles = false>
__device__ void produce_raw_ring(const AttnParams& p, const Work& w, uint8_t* smem) {
  using S = RingSmem<kRows, kFmt, kDs32Roles>;
  using R = RawRow<kFmt>;
  constexpr int kStride = kRawRingStride<kFmt>;
  // the first fill's slots in flight at once (config.h kRawFirstFill; all where few CTAs contend)
  constexpr int kFirst = kRawFirstFill<kRows, kFmt, kReadOnce>;
  const int first = kFirst > 0 && grid_fills_half_the_sms() ? kFirst : S::kRing;
  static_assert(R::kBytes <= kStride && R::kBytes % 16 == 0, "a ring row holds one cache row");
  static_assert(!(kE4m3Runs && R::kDense) || kStride == R::kBytes, "runs of rows keep the cache's pitch");
  // Rows per producer warp: eight warps (lanes 0..7) or, with two consumer warpgroups, four (0..15);
  // S::kKt (SMLA_SD_DS32_ROLES_KT): two (every lane), the other two convert the latent columns.
  constexpr int kProducerThreads = kernel_threads<kRows, kFmt>() - raw_consumer_threads<kRows, kFmt>();
  constexpr int kLanes = kKeys / ((kProducerThreads - (S::kKt ? kDsKtThreads : 0)) / 32);
  const int pt = static_cast<int>(threadIdx.x) - raw_consumer_threads<kRows, kFmt>();
  if constexpr (S::kKt) {
    static_assert(kLanes == 32 && kProducerThreads == 64 + kDsKtThreads, "two issuing warps, two converting");
    if (pt >= 64) {
      uint64_t* bars = reinterpret_cast<uint64_t*>(smem + S::bars);
      ds_convert_kt<S>(pt - 64, w.kb_end - w.kb_begin, smem + S::ring, bars, bars + 2 * S::kRing, bars + 2 * S::kRing + 1,
                       smem + S::kt);
      return;
    }
  }
  // kRawCpAsync: every lane copies pieces of its warp's rows (lane l and l + kLanes own one row)
  constexpr bool kCp = kRawCpAsync<kFmt>;
  static_assert(!kCp || (!R::kDense && !kRawNoCopy && kRawPrefetch == 0 && !S::kKt), "16-byte copies: fp8_ds_mla rows, copied");
  if (!kCp && (pt & 31) >= kLanes) return;
  const int row = (pt >> 5) * kLanes + (pt & (kLanes - 1));
  const int blocks = w.kb_end - w.kb_begin;
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + S::bars);
  uint64_t* empty = full + S::kRing;
  uint8_t* ok_bytes = smem + S::ok;
  uint8_t* ring = smem + S::ring;
  int32_t idx = blocks > 0 ? load_key_index<R::kDense>(p, w, w.kb_begin * kKeys + row) : -1;
  // kRawPrefetch: the index of the row this lane prefetches next (block i + kRawPrefetch)
  int32_t pidx = kRawPrefetch > 0 && kRawPrefetch < blocks
                     ? load_key_index<R::kDense>(p, w, (w.kb_begin + kRawPrefetch) * kKeys + row) : -1;
  for (int i = 0; i < blocks; ++i) {
    const int slot = i % S::kRing;
    const int v = (w.kb_begin + i) * kKeys + row;
    const KeyAddr a = key_addr(p, w, v, idx);
    if (i + 1 < blocks) idx = load_key_index<R::kDense>(p, w, v + kKeys);
    if (i >= S::kRing) mbar_wait(empty + slot, ((i / S::kRing) - 1) & 1);
    if (i >= first && i < S::kRing) mbar_wait(full + (i - first), 0);  // the first fill's later slots
    if (kBlockTimeline && pt == 0) block_event(1, i);
    if (kRoleMarks<kDs32Roles> && pt == 0) role_mark(0, i);
    const bool ok = a.page != nullptr;
    uint8_t* dst = ring + slot * S::kSlotBytes + row * kStride;
    if constexpr (kRawNoCopy) {  // consumers' speed alone: zeroed rows, nothing copied
      ok_bytes[slot * kKeys + row] = 1;
      if (i < S::kRing)
        for (int c = 0; c < R::kBytes / 16; ++c) reinterpret_cast<uint4*>(dst)[c] = make_uint4(0, 0, 0, 0);
      mbar_arrive(full + slot);
      continue;
    }
    if constexpr (kCp) {
      // The warp's kLanes rows, each as 16-byte pieces by all 32 lanes; a skipped row's pieces
      // zero-filled (src-size 0 reads nothing: any global address serves)
      const int ln = pt & 31;
      if (ln < kLanes) ok_bytes[slot * kKeys + row] = ok;
      const uint8_t* mine = ok ? R::row(a) : reinterpret_cast<const uint8_t*>(unit_q(p, w));
      const uint32_t base = smem_addr(ring + slot * S::kSlotBytes + (pt >> 5) * kLanes * kStride);
      const bool pol = rows_evict_first<kReadOnce, false>(i, blocks);
#pragma unroll
      for (int r = 0; r < kLanes; ++r) {
        const uint8_t* src = reinterpret_cast<const uint8_t*>(__shfl_sync(~0u, reinterpret_cast<uint64_t>(mine), r));
        const uint32_t n = __shfl_sync(~0u, ok ? 16u : 0u, r);
#pragma unroll
        for (int c = ln; c < R::kBytes / 16; c += 32) {
          if (pol) cp_async_16_zfill(base + r * kStride + 16 * c, src + 16 * c, n, l2_evict_first_policy());
          else cp_async_16_zfill(base + r * kStride + 16 * c, src + 16 * c, n);
        }
      }
      mbar_arrive_on_cp_async(full + slot);
    } else {
      ok_bytes[slot * kKeys + row] = ok;
      if (!ok) {
#pragma unroll
        for (int c = 0; c < R::kBytes / 16; ++c) reinterpret_cast<uint4*>(dst)[c] = make_uint4(0, 0, 0, 0);
        fence_proxy_async();  // a later bulk copy into this row is ordered after these stores
      }
      if constexpr (kE4m3Runs && R::kDense) {
        // A lane heads a run when its row is real and does not continue the lane before it in
        // the cache; it copies the run (the rows of the following lanes that continue it).
        constexpr uint32_t kMask = kLanes == 32 ? ~0u : (1u << kLanes) - 1;
        const int ln = pt & 31;
        const uint64_t src = ok ? reinterpret_cast<uint64_t>(R::row(a)) : 0;
        const uint64_t prev = __shfl_up_sync(kMask, src, 1);
        const bool cont = ok && ln > 0 && prev != 0 && src == prev + R::kBytes;
        const uint32_t m = __ballot_sync(kMask, cont);
        const int len = ok && !cont ? __ffs(~(m >> (ln + 1))) : 0;
        mbar_arrive_expect_tx(full + slot, len * R::kBytes);
        if (len > 0)
          copy_row_g2s<kReadOnce, R::kDense>(smem_addr(dst), reinterpret_cast<const void*>(src), len * R::kBytes,
                                             smem_addr(full + slot), i, blocks);
      } else {
        mbar_arrive_expect_tx(full + slot, ok ? R::kBytes : 0);
        if (ok) copy_row_g2s<kReadOnce, R::kDense>(smem_addr(dst), R::row(a), R::kBytes, smem_addr(full + slot), i, blocks);
      }
    }
    if constexpr (kRawPrefetch > 0) {
      if (i + kRawPrefetch < blocks) {
        const int vp = v + kRawPrefetch * kKeys;
        const KeyAddr pa = key_addr(p, w, vp, pidx);
        if (i + kRawPrefetch + 1 < blocks) pidx = load_key_index<R::kDense>(p, w, vp + kKeys);
        if (pa.page != nullptr) {
          const uint8_t* src = R::row(pa);
#pragma unroll
          for (int o = 0; o < R::kBytes; o += 128) prefetch_l2_line(src + o);
          prefetch_l2_line(src + R::kBytes - 1);
        }
      }
    }
    if (kTimeline && pt == 0 && i == 0) timeline_mark(7);
    if (kBlockTimeline && pt == 0) block_event(3, i);
    if (kRoleMarks<kDs32Roles> && pt == 0) role_mark(1, i);
  }
  if (kTimeline && pt == 0) timeline_mark(8);
}

}  // namespace smla::cuda::sparse_decode_family
