// What one sparse-decode CTA owns: its request and query token, its head tile, its split of
// the request's key list (main keys first, then the extra key set), and where key v of that
// list lives. Every value read from device memory is untrusted: lengths are clamped and an
// index names a key only when 0 <= index < num_blocks * page_size.
// Dense decode (p.dense; kDenseToo in the kernels of config.h serves_dense) runs on the same
// kernels: key v is the request's position v, its slot comes from the block table, and a causal
// token t sees the positions up to seqlen - s_q + t.
#pragma once

#include <cstdint>
#include <type_traits>

#include "cuda/attention/attention_params.h"
#include "cuda/attention/split_lookup.cuh"
#include "cuda/common/kv_load.cuh"
#include "cuda/sparse_decode/config.h"

namespace smla::cuda::sparse_decode_family {

// Token t of request req's index row in key set ks (its first index).
__device__ __forceinline__ const int32_t* index_row(const KeySetParams& ks, int req, int t) {
  return ks.indices + req * ks.idx_sb + t * ks.idx_st;
}

// config.h kIndexRows: the token's index rows (sparse only; extra: nullptr without the set).
// Members only in builds that use them, so that the build without them keeps its Work.
// (IndexRowsOff::load is never called; load_key_index names it in a branch compiled only with
// kIndexRowsIn.) Kernels that do not read them leave them unused, and ptxas drops them.
struct IndexRowsOff {
  __device__ void set(const AttnParams&, int, int) {}
  __device__ int32_t load(int, int) const { return -1; }
};
struct IndexRowsOn {
#if SMLA_SD_WORK_NO_INIT
  const int32_t* idx_main;
  const int32_t* idx_extra;
#else  // the initializers keep the pair kernels at their measured speed (config.h SMLA_SD_WORK_NO_INIT)
  const int32_t* idx_main = nullptr;
  const int32_t* idx_extra = nullptr;
#endif
  __device__ void set(const AttnParams& p, int req, int t) {
    idx_main = index_row(p.main, req, t);
    idx_extra = p.has_extra ? index_row(p.extra, req, t) : nullptr;
  }
  // Key v's index (v below the list's total length: then v >= len_main means the extra set).
  __device__ int32_t load(int v, int len_main) const {
    return v < len_main ? __ldg(idx_main + v) : __ldg(idx_extra + (v - len_main));
  }
};

struct Work : std::conditional_t<kIndexRows, IndexRowsOn, IndexRowsOff> {
  int req = 0, t = 0;             // request, query token
  int split_slot = 0;             // row block of the split-KV partials (the unit's grid x)
  int n_splits = 1;
  int head0 = 0, heads = 0;       // first head of the tile, real heads in it
  int len_main = 0, len_total = 0;
  int last = 0x7fffffff;          // dense: the last position this token sees (causal), else no limit
  int kb_begin = 0, kb_end = 0;   // key blocks of this split
  bool active = true;             // false: a CTA past the schedule's splits (writes nothing)
  bool pair = false;              // one of two CTAs sharing each block's gathers (set by pair kernels only)
  int rank = 0;                   // this CTA's rank in its pair
};

// A hook that does nothing: the default of the roles' optional callbacks (produce_bf16's
// after_first, the consumers' next, DensePageWalk::load's second wait).
struct NoHook {
  __device__ void operator()() const {}
};

// The unit's first bf16 Q value (its token, the head tile's first head); its rows are p.q_sh
// values apart.
__device__ __forceinline__ const uint16_t* unit_q(const AttnParams& p, const Work& w) {
  return static_cast<const uint16_t*>(p.q) + w.req * p.q_sb + w.t * p.q_st + w.head0 * p.q_sh;
}

// A work unit's grid position: the CTA's own (blockIdx), or one a persistent CTA walks to.
struct OwnBlock {
  __device__ unsigned x() const { return blockIdx.x; }
  __device__ unsigned y() const { return blockIdx.y; }
  __device__ unsigned z() const { return blockIdx.z; }
};
struct UnitAt {
  unsigned bx, by, bz;
  __device__ unsigned x() const { return bx; }
  __device__ unsigned y() const { return by; }
  __device__ unsigned z() const { return bz; }
};

// The request's key count: its index lists' lengths, or (dense) its clamped seqlen.
template <bool kDenseToo>
__device__ __forceinline__ void set_lengths(const AttnParams& p, Work& w) {
  if (kDenseToo && p.dense) {
    const int64_t cap = static_cast<int64_t>(p.max_blocks) * p.main.page_size;
    const int64_t s = __ldg(p.seqlens + w.req * p.seqlens_st);
    w.len_main = w.len_total = static_cast<int>(s < 0 ? 0 : (s > cap ? cap : s));
    if (p.causal) w.last = w.len_total - p.s_q + w.t;
    return;
  }
  w.len_main = sparse_len(p.main, w.req);
  w.len_total = w.len_main + (p.has_extra ? sparse_len(p.extra, w.req) : 0);
  if constexpr (kIndexRowsIn<kDenseToo>) w.set(p, w.req, w.t);
}

// Dense decode, one CTA per grid position (OwnBlock), grids of two waves or more
// (p.dense_cta_order): the CTAs that read the same keys (the head tiles and query tokens of one
// split) get consecutive launch positions, so they run at the same time and all but the first
// read each key block from L2. Launched in grid order (x fastest) they ran a wave apart and each
// read the whole context from DRAM (ncu at b128 h128 L8k: DRAM 83% busy, L2 hit rate 25%).
// Same-seed A/B (2026-12-01): h128 L8k 611.8 -> 517.0 µs, s_q2 h128 1212.0 -> 987.2, h64 and
// h16 unchanged. SMLA_SD_DENSE_CTA_ORDER=0 (a measurement build): grid order always.
#ifndef SMLA_SD_DENSE_CTA_ORDER
#define SMLA_SD_DENSE_CTA_ORDER 1
#endif
__device__ __forceinline__ UnitAt dense_cta_position() {
  const unsigned gy = gridDim.y, gz = gridDim.z;
  const unsigned lin = blockIdx.x + gridDim.x * (blockIdx.y + gy * blockIdx.z);
  return UnitAt{lin / (gy * gz), lin % gy, (lin / gy) % gz};
}

// kPersistent: a persistent CTA's unit, whose launch has split_offsets filled (split_slot).
template <bool kDenseToo = false, class Pos = OwnBlock, bool kPersistent = false>
__device__ __forceinline__ Work make_work(const AttnParams& p, Pos pos = {}) {
  if constexpr (kDenseToo && SMLA_SD_DENSE_CTA_ORDER != 0 && std::is_same_v<Pos, OwnBlock>) {
    if (p.dense_cta_order) return make_work<kDenseToo, UnitAt>(p, dense_cta_position());
  }
  Work w;
  int split_id = 0;
  if (is_split_launch(p)) {
    const SplitSlot s = split_slot<!kPersistent>(p, static_cast<int>(pos.x()));
    if (!s.active) {
      w.active = false;
      return w;
    }
    w.req = s.req;
    split_id = s.split_id;
    w.n_splits = s.n_splits;
  } else {
    w.req = pos.x();
  }
  w.split_slot = pos.x();
  w.t = pos.z();
  w.head0 = pos.y() * p.heads_tile;
  w.heads = min(p.heads_tile, p.h_q - w.head0);
  set_lengths<kDenseToo>(p, w);
  const int n_blocks = (w.len_total + kKeys - 1) / kKeys;
  const int chunk = (n_blocks + w.n_splits - 1) / max(w.n_splits, 1);
  w.kb_begin = min(split_id * chunk, n_blocks);
  w.kb_end = min(w.kb_begin + chunk, n_blocks);
  return w;
}

// Dense: the slot of position v from the block table, or -1 when the position is past the
// token's causal limit or its table entry names no page (negative, or past num_blocks). The
// launch takes dense calls only when num_blocks * page_size fits an int32 slot.
__device__ __forceinline__ int32_t dense_slot(const AttnParams& p, const Work& w, int v) {
  if (v > w.last) return -1;
  const uint32_t u = static_cast<uint32_t>(v), ups = static_cast<uint32_t>(p.main.page_size);
  const uint32_t j = (ups & (ups - 1)) == 0 ? u >> (__ffs(p.main.page_size) - 1) : u / ups;
  const int32_t blk = __ldg(p.block_table + w.req * p.bt_sb + j);
  if (blk < 0 || blk >= p.main.num_blocks) return -1;
  return static_cast<int32_t>(static_cast<uint32_t>(blk) * ups + (u - j * ups));
}

// Index of key v of this CTA's list, or -1 past its end (the value itself is still untrusted).
template <bool kDenseToo = false>
__device__ __forceinline__ int32_t load_key_index(const AttnParams& p, const Work& w, int v) {
  if (v >= w.len_total) return -1;
  if constexpr (kNoIndexLoads) return v;  // experiment (config.h): no index loads
  if (kDenseToo && p.dense) return dense_slot(p, w, v);
  if constexpr (kIndexRowsIn<kDenseToo>) return w.load(v, w.len_main);
  if (v < w.len_main) return __ldg(index_row(p.main, w.req, w.t) + v);
  return __ldg(index_row(p.extra, w.req, w.t) + (v - w.len_main));
}

// Where key v's bytes are: its page and the token's offset in it, or page == nullptr when the
// index names no slot of its cache. Fields are selected one by one (no reference into the
// kernel parameters, which would copy them to local memory).
struct KeyAddr {
  const uint8_t* page = nullptr;
  int off = 0;
  int page_size = 1;
};

__device__ __forceinline__ KeyAddr key_addr(const AttnParams& p, const Work& w, int v, int32_t idx) {
  const bool main = v < w.len_main;
  const uint8_t* base = main ? p.main.base : p.extra.base;
  const int64_t stride = main ? p.main.page_stride : p.extra.page_stride;
  const int ps = main ? p.main.page_size : p.extra.page_size;
  const int64_t nb = main ? p.main.num_blocks : p.extra.num_blocks;
  KeyAddr a;
  a.page_size = ps;
  if (v < w.len_total && idx >= 0 && static_cast<int64_t>(idx) < nb * ps) {
    // Power-of-two pages (the usual 64): a shift instead of a division per key.
    const uint32_t u = static_cast<uint32_t>(idx), ups = static_cast<uint32_t>(ps);
    const uint32_t blk = (ups & (ups - 1)) == 0 ? u >> (__ffs(ps) - 1) : u / ups;
    a.off = static_cast<int>(u - blk * ups);
    a.page = base + static_cast<int64_t>(blk) * stride;
  }
  return a;
}

}  // namespace smla::cuda::sparse_decode_family
