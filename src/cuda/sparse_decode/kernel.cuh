// The warp-specialized sparse-decode kernel (sm_90a): one CTA per (split of a request's key
// list, head tile, query token):
//   64-row tiles: WG0, WG1 consumers on wgmma (consumer_wide.cuh), WG2 the producer;
//   16/32-row tiles: WG0 the consumer on wgmma with the keys in M (consumer_narrow_wgmma.cuh),
//             the next two warpgroups producers.
//   Producers gather and dequantize 64-key blocks into two K tiles (producer.cuh); two 64-row
//   tiles of one token may run as a cluster pair that shares the gathers.
// Producer and consumers meet on mbarriers only ("full" per K tile: the rows are in; "empty":
// every consumer warp is done with it), so gathers and dequantization overlap the MMAs.
// docs/design/sparse_decode_sm90.md has the design and its numbers.
#pragma once

#include <cstdint>

#include "cuda/attention/attention_params.h"
#include "cuda/common/barriers.cuh"
#include "cuda/common/cluster.cuh"
#include "cuda/common/gather.cuh"
#include "cuda/common/pdl.cuh"
#include "cuda/sparse_decode/config.h"
#include "cuda/sparse_decode/consumer_alt.cuh"
#include "cuda/sparse_decode/consumer_fp8.cuh"
#include "cuda/sparse_decode/consumer_narrow_raw.cuh"
#include "cuda/sparse_decode/consumer_narrow_raw_ds.cuh"
#include "cuda/sparse_decode/consumer_narrow_raw_ds32.cuh"
#include "cuda/sparse_decode/consumer_narrow_raw_ds32_roles.cuh"
#include "cuda/sparse_decode/consumer_narrow_wgmma.cuh"
#include "cuda/sparse_decode/consumer_seesaw.cuh"
#include "cuda/sparse_decode/consumer_wide.cuh"
#include "cuda/sparse_decode/producer.cuh"
#include "cuda/sparse_decode/producer_dense_tma.cuh"
#include "cuda/sparse_decode/producer_e4m3_fp8.cuh"
#include "cuda/sparse_decode/producer_raw_ring.cuh"
#include "cuda/sparse_decode/q_e4m3.cuh"
#include "cuda/sparse_decode/timeline.cuh"
#include "cuda/sparse_decode/work.cuh"
#include "metadata/index_math.h"

namespace smla::cuda::sparse_decode_family {

// Q rows r < heads of this tile's token into the core-matrix tile; padded rows are zeros (their
// scores are finite and they are never written out). The consumer warps load it while the
// producer issues its first gathers; every load is issued before the first store (one round
// trip), and the consumers meet at a named barrier before their first MMA reads it.
// kFp8Q (kernels that serve fp8 q: kE4m3Wide): with p.q_kind 2 each 8-value chunk is 8 e4m3
// bytes (q_e4m3.cuh), converted exactly to bf16 (q_scale is in the logits' scale).
// kAfterStaged (persistent CTAs with config.h kPersistStaged): the previous unit's O rows were
// staged in the Q tile (d512: row 63 in the P tile); the loads are issued first, and the stores
// wait until both consumer warpgroups' bulk copies have read them (their copying lanes wait
// before they arrive), so the next P, written after Q, waits too.
// kSw (config.h kQTma, load_q_tma where the launch built no map): the cp.async path writes the
// layout of the TMA unit's boxes instead, 64 columns (8 KB) each in the 128-byte swizzle.
template <int kRows, int kD, bool kFp8Q = false, bool kCpAsync = false, bool kAfterStaged = false, bool kSw = false>
__device__ __forceinline__ void load_q(const AttnParams& p, const Work& w, uint8_t* smem) {
  constexpr int kChunks = kD / 8;
  constexpr int kTotal = kRows * kChunks;
  constexpr int kThreads = consumer_threads(kRows);
  constexpr int kPer = (kTotal + kThreads - 1) / kThreads;
  static_assert(!kAfterStaged || (!kFp8Q && !kCpAsync), "the staged rows' barrier is on the unrolled bf16 path");
  static_assert(!kSw || (kCpAsync && kRows == 64), "the swizzled layout is written by the 64-row cp.async path");
  // Row r's 16-byte chunk ch (columns 8 ch .. 8 ch + 7) in the tile.
  auto offset = [](int r, int ch) {
    return kSw ? (ch >> 3) * 8192 + r * 128 + (((ch & 7) ^ (r & 7)) << 4) : tile_offset<kD>(r, ch);
  };
  if (kFp8Q && p.q_kind == 2) {
    uint2 b[kPer];  // converted at the stores: half the registers of bf16 chunks
    load_q_e4m3_chunks<kRows, kD, kThreads>(p, w, b);
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int i = static_cast<int>(threadIdx.x) + k * kThreads;
      const int r = i / kChunks, ch = i % kChunks;
      uint4 lo, hi;
      e4m3x16_to_bf16(make_uint4(b[k].x, b[k].y, 0, 0), 1.0f, lo, hi);
      if (i < kTotal) *reinterpret_cast<uint4*>(smem + Smem<kRows, kD>::q + tile_offset<kD>(r, ch)) = lo;
    }
    fence_proxy_async();  // Q is read by wgmma
    named_bar_sync(kBarQReady, kThreads);
    return;
  }
  const uint16_t* q = unit_q(p, w);
  if constexpr (kCpAsync) {  // config.h kQCpAsync: one rolled loop of 16-byte cp.async (zeros for padded rows)
    const uint32_t tile = static_cast<uint32_t>(__cvta_generic_to_shared(smem + Smem<kRows, kD>::q));
#pragma unroll 1
    for (int i = static_cast<int>(threadIdx.x); i < kTotal; i += kThreads) {
      const int r = i / kChunks, ch = i % kChunks;
      const bool real = r < w.heads;
      cp_async_16_zfill(tile + offset(r, ch), real ? q + r * p.q_sh + ch * 8 : q, real ? 16 : 0);
    }
    cp_async_commit_group();
    cp_async_wait_group<0>();
  } else {
    uint4 v[kPer];
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int i = static_cast<int>(threadIdx.x) + k * kThreads;
      const int r = i / kChunks, ch = i % kChunks;
      v[k] = make_uint4(0, 0, 0, 0);
      if (i < kTotal && r < w.heads) v[k] = __ldg(reinterpret_cast<const uint4*>(q + r * p.q_sh) + ch);
    }
    if constexpr (kAfterStaged) named_bar_sync(kBarStagedOut, kThreads);
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int i = static_cast<int>(threadIdx.x) + k * kThreads;
      const int r = i / kChunks, ch = i % kChunks;
      if (i < kTotal) *reinterpret_cast<uint4*>(smem + Smem<kRows, kD>::q + tile_offset<kD>(r, ch)) = v[k];
    }
  }
  fence_proxy_async();  // Q is read by wgmma
  named_bar_sync(kBarQReady, kThreads);
}

// One thread issues the unit's Q boxes onto Q's mbarrier (p.q_tma only).
template <int kD>
__device__ __forceinline__ void issue_q_tma(const AttnParams& p, const Work& w, uint8_t* smem) {
  using S = Smem<64, kD>;
  const uint32_t tile = smem_addr(smem + S::q);
  uint64_t* bar = reinterpret_cast<uint64_t*>(smem + S::q_bar);
  mbar_arrive_expect_tx(bar, 64 * kD * 2);
#pragma unroll
  for (int b = 0; b < kD / 64; ++b) tma_load_4d(tile + b * 8192, &p.q_map, 64 * b, w.head0, w.t, w.req, smem_addr(bar));
}

// config.h kQTma: Q by the TMA unit into the 128-byte-swizzled tile (boxes of 64 columns, 8 KB
// each; padded rows past h_q are the map's zero fill), one thread issuing, every consumer thread
// waiting on Q's mbarrier (phase: the CTA's units before this one, for persistent CTAs). Where
// the launch built no map (p.q_tma == 0), load_q's cp.async writes the same layout (zeros for
// padded rows). kAfterStaged (persistent CTAs, config.h kPersistStaged): nothing is written before both
// warpgroups' bulk copies have read the previous unit's staged O rows (load_q).
template <int kD, bool kAfterStaged = false>
__device__ __forceinline__ void load_q_tma(const AttnParams& p, const Work& w, uint8_t* smem, int phase = 0) {
  using S = Smem<64, kD>;
  constexpr int kThreads = consumer_threads(64);
  if constexpr (kAfterStaged) named_bar_sync(kBarStagedOut, kThreads);
  if (p.q_tma) {
    if (threadIdx.x == 0) issue_q_tma<kD>(p, w, smem);
    mbar_wait(reinterpret_cast<uint64_t*>(smem + S::q_bar), phase & 1);
    return;
  }
  load_q<64, kD, false, true, false, true>(p, w, smem);
}

// load_q_tma's mbarrier, one arrival (thread 0's expect_tx) a unit; before the CTA's first sync.
template <int kD>
__device__ __forceinline__ void init_q_bar(uint8_t* smem) {
  if (threadIdx.x == 0) {
    mbar_init(reinterpret_cast<uint64_t*>(smem + Smem<64, kD>::q_bar), 1);
    fence_mbarrier_init();
  }
}

// config.h kQPrefetch, kQPrefetchStart: unit w's bf16 Q rows into L2, 128-byte lines spread
// over `threads` threads from thread `t`.
template <int kD>
__device__ __forceinline__ void prefetch_q_rows(const AttnParams& p, const Work& w, int t, int threads) {
  constexpr int kLines = kD * 2 / 128;
  const uint16_t* q = unit_q(p, w);
#pragma unroll 1
  for (int i = t; i < w.heads * kLines; i += threads) prefetch_l2_line(q + (i / kLines) * p.q_sh + (i % kLines) * 64);
}

// The K tiles' mbarriers. full: one arrive per producer thread (kTma: one, with the TMA boxes'
// bytes); empty: one per consumer warp (of both CTAs of a pair, whose producers both fill each
// tile). kTma: also the aux barrier of partial blocks (producer_dense_tma.cuh).
// kRaw (kNarrowBulk): also the raw slots' barriers, one arrive per copying producer thread.
// kAlt (consumer_alt.cuh): full and empty serve the A halves; the B halves' barriers and aux
// follow, and a half's "empty" counts the warps of the warpgroups that read it.
// kProducers: the producer threads that arrive on "full" (kernel_producer_threads).
// kHalves (config.h kEmptyHalves): "empty" counts WG0's warps, empty_b (Smem::alt_bars +
// kStages) WG1's.
template <int kRows, int kD, int kRaw = 0, bool kTma = false, bool kAlt = false,
          int kProducers = producer_threads(kRows), bool kHalves = false>
__device__ __forceinline__ void init_stage_barriers(uint8_t* smem, bool pair) {
  if (threadIdx.x == 0) {
    using S = Smem<kRows, kD, kRaw>;
    uint64_t* bars = reinterpret_cast<uint64_t*>(smem + S::bars);
    for (int s = 0; s < kStages; ++s) {
      mbar_init(bars + s, kTma ? 1 : kProducers);
      mbar_init(bars + kStages + s, kAlt ? (kSeesaw<kD> ? seesaw_empty_count(s, 0) : alt_empty_count(s, 0)) : (consumer_threads(kRows) / 32) * (pair ? kPairCtas : 1) / (kHalves ? 2 : 1));
      if constexpr (kHalves) mbar_init(Stage<kRows, kD, kRaw>(smem, s).empty_b, consumer_threads(kRows) / 64);
    }
    if constexpr (kAlt) {
      uint64_t* bars_b = reinterpret_cast<uint64_t*>(smem + S::alt_bars);
      for (int s = 0; s < kStages; ++s) {
        mbar_init(bars_b + s, 1);
        mbar_init(bars_b + kStages + s, kSeesaw<kD> ? seesaw_empty_count(s, 1) : alt_empty_count(s, 1));
      }
      mbar_init(bars_b + 2 * kStages, 1);
    }
    if constexpr (kTma) {
      mbar_init(reinterpret_cast<uint64_t*>(smem + S::aux), 1);
      fence_mbarrier_init();  // the TMA boxes complete on full and aux
    }
    if constexpr (kRaw > 0) {
      for (int s = 0; s < S::kSlots; ++s) mbar_init(reinterpret_cast<uint64_t*>(smem + S::raw_bars) + s, kKeys);
      fence_mbarrier_init();  // the bulk copies complete on them
    }
  }
}

// Whether a kernel instance loads Q by the TMA unit (config.h kQTma, kPersistQTma); kMaxLogits as
// in sparse_decode_kernel. The launch builds q's tensor map for these alone (instantiate.cuh).
template <int kRows, int kD, int kFmt, bool kPair, bool kPersist, bool kMaxLogits, bool kLogits = kMaxLogits>
inline constexpr bool kLoadsQByTma =
    kPersist ? kPersistQTma<kFmt, kPair, kMaxLogits, kPersistStaged<kD, kFmt>> || kPersistEnds<kFmt>
             : kRows == 64 && kQTma<kFmt, kLogits>;

// Persistent 64-row CTAs (config.h, has_persistent): the CTA (for pairs, its
// cluster: blockIdx.x, with blockIdx.y its rank) walks units blockIdx.x, + gridDim.x, ... of
// the unit grid p.unit_g{x,y,z}. Every role walks the same units in the same order; n0 counts
// the K blocks of earlier units, so the K tiles' stages and phases continue across units.
// Between units the consumer warpgroups reload Q: WG1 only after WG0's final factors (WG0 has
// finished its QK^T then), and both meet at the Q barrier before the next QK^T.
template <int kRows, int kD, int kFmt, bool kPair, bool kMaxLogits>
__device__ void persistent_units(const AttnParams& p, uint8_t* smem) {
  constexpr bool kTwo = kTwoProducers<kRows, kFmt, kPair, true>;
  constexpr bool kStaged = kPersistStaged<kD, kFmt>;
  constexpr int kRow63 = kStaged ? kStagedRow63<kD> : 0;
  using S = Smem<kRows, kD>;
  static_assert(kRow63 == 0 || (63 * kStageRowBytes <= S::kQBytes && kRow63 + 2 * kDv <= S::scale - S::q),
                "staged rows 0-62 fit the Q tile and row 63 the P tile");
  constexpr bool kTmaQ = kLoadsQByTma<kRows, kD, kFmt, kPair, true, kMaxLogits>;  // the units' Q by the TMA unit
  constexpr bool kEnds = kPersistEnds<kFmt>;  // config.h kBf16PersistEnds
  constexpr bool kHalves = kBf16EmptyHalves<kRows, kFmt, kPair>;  // config.h: WG1 frees its part on empty_b
  init_stage_barriers<kRows, kD, 0, false, false, kernel_producer_threads<kRows, kFmt, kPair, true>(), kHalves>(smem, kPair);
  if constexpr (kTmaQ) init_q_bar<kD>(smem);
  if constexpr (kEnds)
    if (threadIdx.x == 0) mbar_init(reinterpret_cast<uint64_t*>(smem + S::q_free), 4);  // one arrival a warp of WG0
  __syncthreads();
  if constexpr (kPair) cluster_sync();
  const int rank = kPair ? static_cast<int>(cluster_ctarank()) : 0;
  const int gy = kPair ? p.unit_gy / kPairCtas : p.unit_gy;
  // kSplitTail (config.h kTailSplit): the units past the grid's last whole round are walked as
  // `parts` parts each: kTailSplit of them in the timing-only build, p.tail_parts (0: none) with
  // kTailMerge, whose parts write split partials (work_of) for the combine.
  constexpr bool kSplitTail = (kTailSplit > 1 || kTailMerge) && kEnds;
  const int parts = !kSplitTail ? 1 : kTailMerge ? max(p.tail_parts, 1) : kTailSplit;
  const int grid_units = p.unit_gx * gy * p.unit_gz;
  const bool split = kSplitTail && parts > 1;
  const int whole = split ? meta::tail_walk_whole(grid_units, static_cast<int>(gridDim.x)) : grid_units;
  const int units = split ? meta::tail_walk_steps(grid_units, static_cast<int>(gridDim.x), parts) : grid_units;
  // Each role walks the units itself, inside the branch that set its register budget (ptxas
  // holds a role's code to its setmaxnreg only there).
  int unit_k = 0;  // kUnitTimeline: the CTA's count of units started (timeline.cuh unit_mark)
  // Unit u's Work (inactive: the same in every role, and in both CTAs of a pair).
  auto work_of = [&](int u) {
    int part = -1, slot = 0;  // kSplitTail: the part of a tail unit, and its split slot
    if (kSplitTail) {
      const meta::TailStep<int> ts = meta::tail_step(u, whole, parts);
      u = ts.unit, part = ts.part, slot = ts.slot;
    }
    const int bx = u % p.unit_gx, rest = u / p.unit_gx, yy = rest % gy, bz = rest / gy;
    const UnitAt at{static_cast<unsigned>(bx), static_cast<unsigned>(kPair ? yy * kPairCtas + rank : yy), static_cast<unsigned>(bz)};
    Work w = make_work<serves_dense(kFmt), UnitAt, true>(p, at);
    if constexpr (kPair) {
      w.pair = true;
      w.rank = rank;
    }
    if (kSplitTail && part >= 0) {  // the part's share of the unit's blocks
      const int begin = w.kb_begin, n = w.kb_end - w.kb_begin, chunk = static_cast<int>(meta::split_chunk(n, parts));
      w.kb_begin = begin + static_cast<int>(meta::split_begin(part, chunk, n));
      w.kb_end = begin + static_cast<int>(meta::split_end(part, chunk, n));
      if constexpr (kTailMerge) {
        w.n_splits = parts;
        w.split_slot = slot;  // partial rows (slot, head): tail unit slot / parts, part slot % parts
      }
    }
    return w;
  };
  auto each_unit = [&](auto&& role) {
    int n0 = 0;
    if constexpr (kUnitTimeline) unit_k = 0;
    for (int u = blockIdx.x; u < units; u += gridDim.x) {
      const Work w = work_of(u);
      if (!w.active) continue;
      role(w, n0);
      n0 += w.kb_end - w.kb_begin;
      if constexpr (kUnitTimeline) ++unit_k;
    }
  };
  // kBf16NextWorkEarly (the consumers of kEnds CTAs): as each_unit, but the role's `next` hook
  // makes the next unit's Work while the role waits anyway (consume_wg0 / consume_wg1).
  auto each_unit_ahead = [&](auto&& role) {
    int n0 = 0;
    if constexpr (kUnitTimeline) unit_k = 0;
    int u = blockIdx.x;
    if (u >= units) return;
    Work w = work_of(u);
    for (;;) {
      const int un = u + static_cast<int>(gridDim.x);
      Work nw;
      auto next = [&]() -> const Work& {  // (a unit past the last: Work{}, no blocks)
        if (un < units) nw = work_of(un);
        return nw;
      };
      if (w.active) {
        role(w, n0, next);
        n0 += w.kb_end - w.kb_begin;
        if constexpr (kUnitTimeline) ++unit_k;
      } else {
        next();
      }
      if (un >= units) break;
      u = un;
      w = nw;
    }
  };
  // kEnds roles take a `next` hook: each_unit_ahead's, or one that does nothing.
  auto walk = [&](auto&& role) {
    if constexpr (kBf16NextWorkEarly) each_unit_ahead(role);
    else each_unit([&](const Work& w, int n0) { role(w, n0, NoHook{}); });
  };
  const int wg = threadIdx.x / 128;
  constexpr int kEntry = launch_regs(kernel_threads<kRows, kFmt, kPair, true>());
  if constexpr (kEnds) {
    // The producer issues each unit's Q (the first at once, the next once WG0's last QK^T of
    // the unit before is done); the consumers wait for it. Without q's map both consumer
    // warpgroups load it by cp.async at the unit's start, as load_q_tma does.
    uint64_t* q_bar = reinterpret_cast<uint64_t*>(smem + S::q_bar);
    if (wg == 0) {
      setmaxnreg_to<kRegsWg0, kEntry>();
      int qn = 0;
      if (kUnitTimeline && threadIdx.x == 0) unit_mark(10, 0);
      auto role = [&](const Work& w, int n0, auto&& next) {
        if (kUnitTimeline && threadIdx.x == 0) unit_mark(0, unit_k);
        if (p.q_tma) mbar_wait(q_bar, qn++ & 1);
        else load_q_tma<kD>(p, w, smem);
        if (kUnitTimeline && threadIdx.x == 0) unit_mark(1, unit_k);
        consume_wg0<kD, false, true, kMaxLogits, false, 0, true, kCopiesArrive<kRows, kFmt>, true>(p, w, smem, n0, next);
        if (kUnitTimeline && threadIdx.x == 0) {  // consume_wg0's marks: first full, last QK^T, loop end, epilogue and its steps
          const uint64_t* t = timeline_slots();
          unit_mark(2, unit_k, t[4]), unit_mark(3, unit_k, t[3]), unit_mark(4, unit_k, t[5]), unit_mark(5, unit_k, t[6]);
          unit_mark(11, unit_k, t[10]), unit_mark(12, unit_k, t[11]), unit_mark(13, unit_k, t[12]);
        }
      };
      walk(role);
    } else if (wg == 1) {
      setmaxnreg_to<kRegsWg1, kEntry>();
      auto role = [&](const Work& w, int n0, auto&& next) {
        if (!p.q_tma) load_q_tma<kD>(p, w, smem);
        consume_wg1<kD, false, true, false, 0, kCopiesArrive<kRows, kFmt>, true, std::remove_reference_t<decltype(next)>, kHalves>(
            p, w, smem, n0, next);
        if (kUnitTimeline && threadIdx.x == 128) unit_mark(6, unit_k);
      };
      walk(role);
    } else {
      setmaxnreg_to<producer_regs_wide<kRows, kFmt, kPair, true>(), kEntry>();
      int k = 0;  // units this CTA started
      auto role = [&](const Work& w, int n0, auto&& next) {
        // After the unit's first block is issued: its Q (once WG0's last QK^T of the unit before
        // is done) and, with kBf16NextWorkEarly, the next unit's Work.
        auto after_first = [&] {
          if (p.q_tma && threadIdx.x == kConsumerThreads) {
            if (k > 0) mbar_wait(reinterpret_cast<uint64_t*>(smem + S::q_free), (k - 1) & 1);
            issue_q_tma<kD>(p, w, smem);
            if constexpr (kUnitTimeline) unit_mark(8, unit_k);
          }
          if constexpr (kBf16NextWorkEarly) next();
        };
        if (kUnitTimeline && threadIdx.x == kConsumerThreads) unit_mark(7, unit_k);
        produce_bf16<kRows, kD, kTwo, kHalves>(p, w, smem, n0, after_first);
        if (kUnitTimeline && threadIdx.x == kConsumerThreads) {  // and produce_bf16_rounds' block-0 marks
          unit_mark(9, unit_k);
          if (w.kb_end > w.kb_begin) {
            const uint64_t* t = timeline_slots();
            unit_mark(14, unit_k, t[9]), unit_mark(15, unit_k, t[13]), unit_mark(16, unit_k, t[7]), unit_mark(17, unit_k, t[8]);
          }
        }
        ++k;
      };
      walk(role);
    }
    return;
  }
  if (wg == 0) {
    setmaxnreg_to<kRegsWg0, kEntry>();
    int qn = 0;  // kTmaQ: units whose Q this CTA loaded (Q's mbarrier phase)
    each_unit([&](const Work& w, int n0) {
      if constexpr (kTmaQ) load_q_tma<kD, kStaged>(p, w, smem, qn++);
      else load_q<kRows, kD, kFmt == static_cast<int>(CacheFormat::fp8_e4m3), false, kStaged>(p, w, smem);
      consume_wg0<kD, kPair, kSwizzled<kFmt>, kMaxLogits, kStaged, kRow63, kTmaQ, kCopiesArrive<kRows, kFmt>>(p, w, smem, n0);
    });
  } else if (wg == 1) {
    setmaxnreg_to<kRegsWg1, kEntry>();
    int qn = 0;
    each_unit([&](const Work& w, int n0) {
      if constexpr (kTmaQ) load_q_tma<kD, kStaged>(p, w, smem, qn++);
      else load_q<kRows, kD, kFmt == static_cast<int>(CacheFormat::fp8_e4m3), false, kStaged>(p, w, smem);
      consume_wg1<kD, kPair, kSwizzled<kFmt>, kStaged, kRow63, kCopiesArrive<kRows, kFmt>>(p, w, smem, n0);
    });
  } else {
    setmaxnreg_to<producer_regs_wide<kRows, kFmt, kPair, true>(), kEntry>();
    each_unit([&](const Work& w, int n0) {
      if constexpr (kQPrefetch<kFmt>)
        if (n0 > 0)
          prefetch_q_rows<kD>(p, w, static_cast<int>(threadIdx.x) - kConsumerThreads, static_cast<int>(blockDim.x) - kConsumerThreads);
      if constexpr (bf16_rows(kFmt)) produce_bf16<kRows, kD>(p, w, smem, n0);
      else
        produce_packed<kRows, kFmt, kTwo, kBf16Route<kRows, kFmt, kPair, true>, false,
                       kConvertEarlyWide<kRows, kFmt, true, kMaxLogits>>(p, w, smem, n0);
    });
  }
  if constexpr (kPair) cluster_sync();  // no CTA leaves while its peer may still write or arrive in its shared memory
}

// The FP8 tiles' roles (kDenseE4m3Fp8, consumer_fp8.cuh): two consumer warpgroups, the producer
// warpgroup (TMA pages and the V transpose).
template <int kRows, int kFmt>
__device__ void fp8_tile_roles(const AttnParams& p, const Work& w, uint8_t* smem) {
  init_fp8_barriers(smem);
  __syncthreads();
  const int wg = threadIdx.x / 128;
  constexpr int kEntry = launch_regs(kernel_threads<kRows, kFmt>());
  if (wg == 0) {
    setmaxnreg_to<kRegsFp8Wg0, kEntry>();
    load_q_e4m3(p, w, smem);
    consume_fp8_wg0(p, w, smem);
  } else if (wg == 1) {
    setmaxnreg_to<kRegsFp8Wg1, kEntry>();
    load_q_e4m3(p, w, smem);
    consume_fp8_wg1(p, w, smem);
  } else {
    setmaxnreg_to<kRegsFp8Producer, kEntry>();
    produce_e4m3_fp8(p, w, smem);
  }
}

// kPair: launched as two-CTA clusters along grid.y (config.h, kPairCtas). A separate
// instantiation, so that kernels which never pair carry none of its code. kPersist: the CTA
// walks the unit grid p.unit_g{x,y,z} (persistent_units). kLogits: the consumers also keep each
// head's exact largest logit for p.max_logits (sparse prefill from a packed cache; the bf16
// kernels, which sparse prefill also runs, always do). kDs32Roles: the 32-row fp8_ds_mla decode
// kernel in roles (config.h kRawRoles), which launch.cu takes at run time.
template <int kRows, int kD, int kFmt, bool kPair, bool kPersist, bool kLogits = false, bool kDs32Roles = false>
__global__ void __launch_bounds__(kernel_threads<kRows, kFmt, kPair, kPersist>(), 1) sparse_decode_kernel(const __grid_constant__ AttnParams p) {
  extern __shared__ __align__(1024) uint8_t smem[];  // 128-byte-swizzled tiles (kSw) need 1024
  constexpr bool kBf16 = bf16_rows(kFmt);
  constexpr bool kSw = kSwizzled<kFmt>;
  constexpr bool kTma = kFmt == kDenseTma;  // the TMA producer and its barriers
  constexpr bool kMaxLogits = kLogits || kFmt == static_cast<int>(CacheFormat::bf16);  // sparse prefill runs here
  constexpr bool kCpAsyncQ = kQCpAsync && kStagedEnds<kFmt, kLogits>;      // one-unit 64-row CTAs' Q load
  constexpr bool kStaged = kStagedEpilogue && kStagedEnds<kFmt, kLogits>;  // and their O rows
  constexpr bool kTmaQ = kLoadsQByTma<kRows, kD, kFmt, kPair, false, kMaxLogits, kLogits>;  // Q by the TMA unit
  if (kTimeline && threadIdx.x == 0) timeline_mark(0);
  if (kRoleMarks<kDs32Roles> && threadIdx.x == 0) role_mark(9, 0);
  pdl_wait();                // the split schedule, and q / the cache / indices of earlier work
  if (kRoleMarks<kDs32Roles> && threadIdx.x == 0) role_mark(12, 0);
  if (kTimeline && threadIdx.x == 0) timeline_mark(1);
  pdl_launch_dependents();   // the combine may launch once every CTA of this grid has started
  if constexpr (kPersist) {
    static_assert(has_persistent(kRows, kFmt), "no persistent kernel for this tile");
    persistent_units<kRows, kD, kFmt, kPair, kMaxLogits>(p, smem);
    return;
  }
  Work w = make_work<serves_dense(kFmt)>(p);
  if (!w.active) return;  // uniform across the CTA (and across a pair: both own the same keys)
  if constexpr (kQPrefetchStart && kRawConsumer<kRows, kFmt>)  // config.h
    prefetch_q_rows<kD>(p, w, static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x));
  if constexpr (kFmt == kDenseE4m3Fp8) {
    fp8_tile_roles<kRows, kFmt>(p, w, smem);
  } else {
    if constexpr (kPair) {
      w.pair = true;
      w.rank = static_cast<int>(cluster_ctarank());
    }

    constexpr int kRaw = raw_slots<kRows, kFmt>();
    if constexpr (kRawConsumer<kRows, kFmt>) {
      if (threadIdx.x == 0) {
        using RS = RingSmem<kRows, kFmt, kDs32Roles>;
        uint64_t* bars = reinterpret_cast<uint64_t*>(smem + RS::bars);
        for (int s = 0; s < RS::kRing; ++s) {
          mbar_init(bars + s, kRawFullArrivals<kRows, kFmt>);     // full: one arrive per copying lane (or thread)
          mbar_init(bars + RS::kRing + s, 4 * RS::kSlotReaders);  // empty: one per warp that reads the slot
        }
        if constexpr (RS::kKt) {
          mbar_init(bars + 2 * RS::kRing, kDsKtThreads);  // kt_full: every converting thread
          mbar_init(bars + 2 * RS::kRing + 1, 4);         // kt_empty: WG0's four warps
        }
        fence_mbarrier_init();  // the bulk copies complete on "full"
      }
    } else {
      constexpr int kProducers = kernel_producer_threads<kRows, kFmt, kPair, kPersist>();
      init_stage_barriers<kRows, kD, kRaw, kTma, kAlt<kRows, kFmt>, kProducers, kEmptyHalves<kRows, kFmt, kPair>>(smem, w.pair);
      if constexpr (kTmaQ) init_q_bar<kD>(smem);
    }
    __syncthreads();
    if constexpr (kPair) cluster_sync();  // the peer's barriers are initialized before anyone writes or arrives there
    if (kTimeline && threadIdx.x == 0) timeline_mark(2);
    if (kRoleMarks<kDs32Roles> && threadIdx.x == 0) role_mark(13, 0);

    const int wg = threadIdx.x / 128;
    constexpr int kEntry = launch_regs(kernel_threads<kRows, kFmt, kPair, kPersist>());
    if constexpr (kAlt<kRows, kFmt>) {
      if (wg == 0) {
        setmaxnreg_to<kRegsAlt, kEntry>();
        load_q<kRows, kD>(p, w, smem);
        if constexpr (kSeesaw<kD>) consume_seesaw<kD, 0>(p, w, smem);
        else consume_alt<kD, kSw, kMaxLogits, 0>(p, w, smem);
      } else if (wg == 1) {
        setmaxnreg_to<kRegsAlt, kEntry>();
        load_q<kRows, kD>(p, w, smem);
        if constexpr (kSeesaw<kD>) consume_seesaw<kD, 1>(p, w, smem);
        else consume_alt<kD, kSw, kMaxLogits, 1>(p, w, smem);
      } else {
        setmaxnreg_to<kRegsProducerAlt, kEntry>();
        produce_dense_tma<kRows, kD, true>(p, w, smem);
      }
    } else if constexpr (kRows == 64) {
      // bf16 pairs (measurement build kBf16Pairs) at d512: staged row 63 would spill past the Q
      // tile into K stage 0, whose rows this CTA's producer may still be copying to the peer; it
      // goes to the P tile (free after WG1's last P V) as in persistent CTAs. Elsewhere in sequence.
      constexpr int kPairRow63 = kPair && kBf16 && kStaged ? kStagedRow63<kD> : 0;
      static_assert(kPairRow63 == 0 || (63 * kStageRowBytes <= Smem<kRows, kD>::kQBytes &&
                                        kPairRow63 + 2 * kDv <= Smem<kRows, kD>::scale - Smem<kRows, kD>::q),
                    "staged rows 0-62 fit the Q tile and row 63 the P tile");
      if (wg == 0) {
        setmaxnreg_to<kRegsWg0, kEntry>();
        if constexpr (kTmaQ) load_q_tma<kD>(p, w, smem);
        else load_q<kRows, kD, kFmt == static_cast<int>(CacheFormat::fp8_e4m3), kCpAsyncQ>(p, w, smem);
        if (kTimeline && threadIdx.x == 0) timeline_mark(3);
        consume_wg0<kD, kPair, kSw, kMaxLogits, kStaged, kPairRow63, kTmaQ, kCopiesArrive<kRows, kFmt>>(p, w, smem);
      } else if (wg == 1) {
        setmaxnreg_to<kRegsWg1, kEntry>();
        if constexpr (kTmaQ) load_q_tma<kD>(p, w, smem);
        else load_q<kRows, kD, kFmt == static_cast<int>(CacheFormat::fp8_e4m3), kCpAsyncQ>(p, w, smem);
        consume_wg1<kD, kPair, kSw, kStaged, kPairRow63, kCopiesArrive<kRows, kFmt>, false, NoHook, kEmptyHalves<kRows, kFmt, kPair>>(p, w, smem);
      } else {
        constexpr bool kTwo = kTwoProducers<kRows, kFmt, kPair, kPersist>;
        setmaxnreg_to<producer_regs_wide<kRows, kFmt, kPair, kPersist>(), kEntry>();
        if constexpr (kTma) produce_dense_tma<kRows, kD, false, kDenseEmptyHalves<kRows, kFmt>>(p, w, smem);
        else if constexpr (kBf16) produce_bf16<kRows, kD, kTwo, kBf16EmptyHalves<kRows, kFmt, kPair>>(p, w, smem);
        else
          produce_packed<kRows, kFmt, kTwo, kBf16Route<kRows, kFmt, kPair, false>, kFirstAlone<kRows, kFmt, kPair, kLogits>,
                         kConvertEarlyWide<kRows, kFmt, false, kLogits>, kPackedEmptyHalves<kRows, kFmt, kPair>>(p, w, smem);
      }
    } else if constexpr (kRawRoles<kRows, kFmt, kDs32Roles> || kRolesOnSplitPlan<kRows, kFmt, kMaxLogits>) {
      constexpr bool kEarlyV = kRolesEarlyVOf<kRows, kFmt, kDs32Roles>;
      if constexpr (kRolesSharedQ) {
        if (wg < 2) load_q_f16<kRows, kFmt, kDs32Roles>(p, w, smem);  // one copy of its code (config.h)
      }
      if (wg == 0) {  // each role at its own register budget
        setmaxnreg_to<kRegsRolesWg0<kEarlyV>, kEntry>();
        if (kRoleMarks<kDs32Roles> && threadIdx.x == 0) role_mark(14, 0);
        if constexpr (!kRolesSharedQ) load_q_f16<kRows, kFmt, kDs32Roles>(p, w, smem);
        consume_ds32_roles<kRows, kMaxLogits, 0, kDs32Roles>(p, w, smem);
      } else if (wg == 1) {
        setmaxnreg_to<kRegsRolesWg1<kEarlyV>, kEntry>();
        if constexpr (!kRolesSharedQ) load_q_f16<kRows, kFmt, kDs32Roles>(p, w, smem);
        consume_ds32_roles<kRows, kMaxLogits, 1, kDs32Roles>(p, w, smem);
      } else {
        setmaxnreg_to<kRegsRawProducer<kRows, kFmt>, kEntry>();
        produce_raw_ring<kRows, kFmt, !kMaxLogits, kDs32Roles>(p, w, smem);
      }
    } else if constexpr (kRawConsumer<kRows, kFmt>) {
      if (wg < kRawWgs<kRows, kFmt>) {
        setmaxnreg_to<kRegsRawConsumer<kRows, kFmt>, kEntry>();
        load_q_f16<kRows, kFmt>(p, w, smem);
        if (kTimeline && threadIdx.x == 0) timeline_mark(3);
        if constexpr (kRawSplitDv<kRows, kFmt>) consume_narrow_raw_ds32<kRows, kMaxLogits>(p, w, smem);
        else if constexpr (kFmt == static_cast<int>(CacheFormat::fp8_ds_mla)) consume_narrow_raw_ds<kRows, kMaxLogits>(p, w, smem);
        else consume_narrow_raw<kRows>(p, w, smem);
      } else {
        setmaxnreg_to<kRegsRawProducer<kRows, kFmt>, kEntry>();
        produce_raw_ring<kRows, kFmt, !kMaxLogits>(p, w, smem);
      }
    } else {
      if (wg < consumer_threads(kRows) / 128) {
        setmaxnreg_to<kRegsConsumerNarrowOf<kRows, kFmt>, kEntry>();
        load_q<kRows, kD>(p, w, smem);
        if (kTimeline && threadIdx.x == 0) timeline_mark(3);
        consume_narrow_wgmma<kRows, kD, kRaw, kSw, kMaxLogits>(p, w, smem);
      } else {
        setmaxnreg_to<kRegsProducerNarrowOf<kRows, kFmt>, kEntry>();
        if constexpr (kTma) produce_dense_tma<kRows, kD>(p, w, smem);
        else if constexpr (kBf16) produce_bf16<kRows, kD>(p, w, smem);
        else if constexpr (kRaw > 0) produce_narrow_bulk<kRows, kFmt, !kMaxLogits>(p, w, smem);
        else produce_packed<kRows, kFmt, false, kBf16Route<kRows, kFmt, false, false>>(p, w, smem);
      }
    }
    if constexpr (kTimeline) {
      __syncthreads();
      if (threadIdx.x == 0) {
        timeline_mark(9);
        timeline_print(w.kb_end - w.kb_begin);
      }
    }
    if constexpr (kPair) cluster_sync();  // no CTA leaves while its peer may still write or arrive in its shared memory
  }
}

}  // namespace smla::cuda::sparse_decode_family
