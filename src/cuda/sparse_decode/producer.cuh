// The producer warpgroups: gather the key rows of each 64-key block from the paged cache and
// write them, as bf16, into a K tile for the consumers (packed formats: wgmma core matrices;
// bf16 rows: the 128-byte swizzle, copy_rows_sw128).
//
// Lane mapping (every key's index, and the packed formats' loads): a block is two 32-key rounds; warp w, lane l of a
// producer warpgroup takes key 8w + l % 8 of a round and the 16-byte quarter q = l / 8 of each
// 64-byte chunk of the row, so the four lanes of a key read 64 contiguous bytes per load and
// their 16-byte stores fill four distinct 128-byte lines of the tile (no bank conflicts).
// Rounds: a 16/32-row CTA's two producer warpgroups take one each; a 64-row CTA's one warpgroup
// takes both; in a pair each CTA's warpgroup takes one (its rank) for both CTAs. A thread that
// takes one round issues the loads of the next block before it stores the current one.
//
// Latency: rows two blocks ahead of the loads are prefetched into L2 (128-byte lines, two per
// lane: no registers, no shared memory) and indices are loaded three blocks ahead of their rows
// (in pairs five, config.h kPairIndexQueue).
#pragma once

#include <cstdint>
#include <type_traits>

#include "cuda/common/barriers.cuh"
#include "cuda/common/cluster.cuh"
#include "cuda/common/fp8.cuh"
#include "cuda/common/gather.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/common/wgmma.cuh"
#include "cuda/sparse_decode/config.h"
#include "cuda/sparse_decode/timeline.cuh"
#include "cuda/sparse_decode/work.cuh"
#include "smla/formats.h"

namespace smla::cuda::sparse_decode_family {

// Byte layout of the packed FP8 formats as the producer reads them (smla/formats.h).
template <int kFmt>
struct PackedRow;

template <>
struct PackedRow<static_cast<int>(CacheFormat::fp8_ds_mla)> {
  using L = DsMlaLayout;
  static constexpr int kD = L::d_qk;
  static constexpr int kLatentChunks = L::d_latent / 64;  // 64-byte chunks of e4m3
  static constexpr bool kRope = true;                    // 64 bf16 RoPE values after them
  using Scales = float4;
  __device__ static const uint8_t* row(const KeyAddr& a) {
    return a.page + static_cast<int64_t>(a.off) * L::bytes_per_token;
  }
  __device__ static const uint8_t* rope(const uint8_t* row) { return row + L::rope_offset; }
  __device__ static Scales load_scales(const KeyAddr&, const uint8_t* row) {
    const uint4 v = ldg_nc_v4(row + L::scale_offset);
    return make_float4(__uint_as_float(v.x), __uint_as_float(v.y), __uint_as_float(v.z), __uint_as_float(v.w));
  }
  // Chunk i covers latent values 64i .. 64i + 63: tile i / 2 of 128.
  __device__ static float scale(const Scales& s, int i) {
    const int t = i * 64 / L::tile;
    return t == 0 ? s.x : t == 1 ? s.y : t == 2 ? s.z : s.w;
  }
  // The row's scales all take the bf16 route (fp8.cuh), and chunk i's multiplier there.
  __device__ static bool bf16_route(const Scales& s) {
    return bf16_route_scale(s.x) && bf16_route_scale(s.y) && bf16_route_scale(s.z) && bf16_route_scale(s.w);
  }
  __device__ static uint32_t multiplier(const Scales& s, int i) { return bf16_route_multiplier(scale(s, i)); }
  // Lane q of the key's four: two 128-byte lines of the row (together every line it spans; one
  // bulk prefetch per row measured slower: its uniform operands serialize the lanes).
  template <bool kPaired>
  __device__ static void prefetch_lines(const KeyAddr& a, int q) {
    const uint8_t* r = row(a);
    // Paired: in a 16-byte aligned cache a 656-byte row starts a multiple of 16 bytes into a
    // line, so lanes 0 and 1's second lines (r + 512, r + 640) hold bytes 512 .. 655 (a cache
    // aligned less only misses a line: a prefetch is a hint, and each address is in the row).
    static_assert(L::bytes_per_token == 656, "the paired prefetch's lines");
    if constexpr (kPaired) prefetch_l2_line_and_512(r, static_cast<uint32_t>(q) * 128u, q < 2);
    else {
      prefetch_l2_line(r + q * 128);
      prefetch_l2_line(r + min((q + 4) * 128, L::bytes_per_token - 1));
    }
  }
};

template <>
struct PackedRow<static_cast<int>(CacheFormat::fp8_model1)> {
  using L = Model1Layout;
  static constexpr int kD = L::d_qk;
  static constexpr int kLatentChunks = L::d_latent / 64;
  static constexpr bool kRope = true;
  using Scales = uint2;  // 7 UE8M0 bytes and a pad byte
  __device__ static const uint8_t* row(const KeyAddr& a) { return a.page + L::data_offset(a.off); }
  __device__ static const uint8_t* rope(const uint8_t* row) { return row + L::rope_offset; }
  __device__ static Scales load_scales(const KeyAddr& a, const uint8_t*) {
    return ldg_nc_v2(a.page + L::scales_offset(a.page_size, a.off));
  }
  // Chunk i covers latent values 64i .. 64i + 63: exactly tile i.
  __device__ static float scale(const Scales& s, int i) {
    return ue8m0_to_float(((i < 4 ? s.x : s.y) >> (8 * (i & 3))) & 0xffu);
  }
  // 2^(b - 127) takes the bf16 route up to b = 134 (2^7); its multiplier 2^(b - 7) is the bf16
  // with exponent field b + 120 (the pad byte is 0).
  __device__ static bool bf16_route(const Scales& s) { return (__vcmpgtu4(s.x, 0x86868686u) | __vcmpgtu4(s.y, 0x86868686u)) == 0; }
  __device__ static uint32_t multiplier(const Scales& s, int i) {
    const uint32_t b = ((i < 4 ? s.x : s.y) >> (8 * (i & 3))) & 0xffu;
    return ((b + 120u) << 7) * 0x10001u;
  }
  template <bool kPaired>
  __device__ static void prefetch_lines(const KeyAddr& a, int q) {
    const uint8_t* r = row(a);
    // Paired: in a 64-byte aligned cache a 576-byte row starts 0 or 64 bytes into a line, so
    // lane 0's second line holds bytes 512 .. 575.
    static_assert(L::data_bytes == 576, "the paired prefetch's lines");
    if constexpr (kPaired) prefetch_l2_line_and_512(r + q * 128, q == 0);
    else {
      prefetch_l2_line(r + q * 128);
      prefetch_l2_line(r + min((q + 4) * 128, L::data_bytes - 1));
    }
    if (q == 0) prefetch_l2_line(a.page + L::scales_offset(a.page_size, a.off));
  }
};

// fp8_e4m3 (dense decode, kE4m3Wide): all 576 values e4m3 under one per-tensor scale that the
// launch folds into the logits' scale and O's, so every 64-byte chunk (the RoPE part the ninth)
// converts exactly with no multiply; no RoPE part of its own.
template <>
struct PackedRow<static_cast<int>(CacheFormat::fp8_e4m3)> {
  static constexpr int kD = 576;
  static constexpr int kLatentChunks = kD / 64;
  static constexpr bool kRope = false;
  struct Scales {};
  __device__ static const uint8_t* row(const KeyAddr& a) { return a.page + static_cast<int64_t>(a.off) * kD; }
  __device__ static const uint8_t* rope(const uint8_t* row) { return row + kD; }  // none
  __device__ static Scales load_scales(const KeyAddr&, const uint8_t*) { return {}; }
  __device__ static float scale(const Scales&, int) { return 1.0f; }
  __device__ static bool bf16_route(const Scales&) { return true; }
  __device__ static uint32_t multiplier(const Scales&, int) { return 0x7b807b80u; }  // 2^120
  template <bool>
  __device__ static void prefetch_lines(const KeyAddr& a, int q) {
    const uint8_t* r = row(a);
    prefetch_l2_line(r + q * 128);
    prefetch_l2_line(r + min((q + 4) * 128, kD - 1));
  }
};

// The lane's key index in blocks kb .. kb + kDepth - 1 (config.h: kIndexQueue, kPairIndexQueue,
// kWideIndexQueue), rotated one block per step: at step kb the index of block kb + d was loaded
// kDepth - d steps earlier, for the rows (d = 0, or 1 a block ahead) and the L2 prefetch (kPf).
template <int kDepth = kIndexQueue>
struct IndexQueue {
  static constexpr int kSize = kDepth;
  int32_t v[kDepth];
};

// Lane roles inside the producer warpgroups: this lane's key in every round it takes (rounds
// round .. round + kRounds - 1 of every block, kRounds from producer_rounds()).
struct ProducerLane {
  int lane, warp, q, round, key;  // key: the lane's key within a 32-key round
  int first_thread;               // the CTA's first producer thread
  // opaque (config.h kLaneOpaque): the thread index taken through a shuffle, which ptxas cannot
  // repeat, so the lane's fields stay in registers instead of being re-derived from S2R (a
  // short-scoreboard wait) inside the loop.
  __device__ ProducerLane(const Work& w, int consumer_threads, bool opaque = false) : first_thread(consumer_threads) {
    const int tid = static_cast<int>(threadIdx.x);
    const int pt = (opaque ? __shfl_sync(0xffffffffu, tid, tid & 31) : tid) - consumer_threads;
    lane = pt & 31;
    warp = (pt >> 5) & 3;
    q = lane >> 3;
    key = warp * 8 + (lane & 7);
    round = w.pair ? w.rank : pt >> 7;  // 64-row CTA alone: warpgroup 0 starts at round 0
  }
  __device__ int row_in_block(int r) const { return (round + r) * 32 + key; }
  __device__ int pos(int kb, int r) const { return kb * kKeys + row_in_block(r); }
  __device__ bool first() const { return static_cast<int>(threadIdx.x) == first_thread; }
};

// Whether block i of a unit's `blocks` copies its rows with an L2 evict_first policy: where
// kReadOnce (decode: each row read by one CTA; prefill's rows are read again by other queries'
// CTAs) and kRowsEvictFirst (kRowsEvictFirstHalf: the unit's first half; kRowsEvictFirstOneWave:
// a sparse gather's rows only where the grid is one wave, kDense: the dense walk's runs of rows).
template <bool kReadOnce, bool kDense>
__device__ __forceinline__ bool rows_evict_first(int i, int blocks) {
  return kReadOnce && kRowsEvictFirst && (!kRowsEvictFirstHalf || 2 * i < blocks) &&
         (kDense || !kRowsEvictFirstOneWave || grid_in_one_wave());
}
// One row's bulk copy into shared memory for block i, with that policy where rows_evict_first.
template <bool kReadOnce, bool kDense>
__device__ __forceinline__ void copy_row_g2s(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar, int i, int blocks) {
  if (rows_evict_first<kReadOnce, kDense>(i, blocks))
    bulk_copy_g2s(dst, src, bytes, bar, l2_evict_first_policy());
  else bulk_copy_g2s(dst, src, bytes, bar);
}

// The shared::cluster address of `p` (this CTA's shared memory) in the pair's other CTA.
__device__ __forceinline__ uint32_t in_peer(const Work& w, const void* p) {
  return map_to_cta(smem_addr(p), static_cast<uint32_t>(w.rank ^ 1));
}

// A block's 64 valid bits (bit k: key k is real) from its eight valid-key words (the low byte
// of each holds eight keys).
__device__ __forceinline__ uint64_t block_valid_mask(const uint32_t* valid) {
  const uint4 a = *reinterpret_cast<const uint4*>(valid);
  const uint4 b = *reinterpret_cast<const uint4*>(valid + 4);
  const uint32_t lo = __byte_perm(__byte_perm(a.x, a.y, 0x0040), __byte_perm(a.z, a.w, 0x0040), 0x5410);
  const uint32_t hi = __byte_perm(__byte_perm(b.x, b.y, 0x0040), __byte_perm(b.z, b.w, 0x0040), 0x5410);
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

template <int kRows, int kD, int kRaw = 0>
struct Stage {
  uint8_t* tile;
  uint32_t* valid;
  uint64_t* full;
  uint64_t* empty;
  uint64_t* empty_b;  // config.h kEmptyHalves: WG1's part of the tile, released apart (Smem::alt_bars)
  __device__ Stage(uint8_t* smem, int s) {
    using S = Smem<kRows, kD, kRaw>;
    tile = smem + S::k + (S::kOneTile ? 0 : s * S::kKBytes);
    valid = reinterpret_cast<uint32_t*>(smem + S::valid + kValidBytes * s);
    full = reinterpret_cast<uint64_t*>(smem + S::bars) + s;
    empty = reinterpret_cast<uint64_t*>(smem + S::bars) + kStages + s;
    empty_b = reinterpret_cast<uint64_t*>(smem + S::alt_bars) + kStages + s;
  }
  // Block i (the CTA's i-th block, in stage i % kStages): consumers wait until its rows are in;
  // producers wait until the consumers released the block kStages before it (none for the first).
  // fence: the consumer thread makes the producers' generic-proxy stores visible to its wgmmas
  // (config.h kPairConsumerFence: pairs, whose producers then do not fence).
  __device__ void wait_full(int i, bool fence = false) const {
    mbar_wait(full, (i / kStages) & 1);
    if (fence) fence_proxy_async();
  }
  __device__ void wait_empty(int i) const { wait_freed(empty, i); }
  // config.h kEmptyHalves: until WG1 released its part of block i - kStages.
  __device__ void wait_empty_b(int i) const { wait_freed(empty_b, i); }
  // Block i of this stage has been released by the consumers.
  __device__ void wait_released(int i) const { mbar_wait(empty, (i / kStages) & 1); }
  // Consumer warps: done with this tile (in both CTAs of a pair, whose producers both fill it).
  __device__ void release(const Work& w, int lane) const { arrive_freed(empty, w, lane); }
  // config.h kEmptyHalves: WG1's warps, done with their part of the tile.
  __device__ void release_b(const Work& w, int lane) const { arrive_freed(empty_b, w, lane); }
  // The block's 64 valid bits (bit k: key k is real).
  __device__ uint64_t valid_mask() const { return block_valid_mask(valid); }

 private:
  static __device__ void wait_freed(uint64_t* bar, int i) {
    if (i >= kStages) mbar_wait(bar, ((i / kStages) - 1) & 1);
  }
  static __device__ void arrive_freed(uint64_t* bar, const Work& w, int lane) {
    __syncwarp();
    if (lane == 0) {
      mbar_arrive(bar);
      if (w.pair) mbar_arrive_cluster(in_peer(w, bar));
    }
  }
};

// Where a pair's producer writes the peer's copy: the peer's tile and its "full" barrier.
struct PeerStage {
  uint32_t tile = 0, valid = 0, full = 0;
};

// The round's valid keys: the warp's ballot (low byte = keys 8 * warp .. 8 * warp + 7 of the
// round), in this CTA and, for a pair, in the peer.
// kWordFromRow: the word's index (round * 4 + warp) formed as lane 0's row in the block / 8, a
// value the producer keeps in a register for its loads, where ptxas spilled a word of its own
// at 80 registers (kWordFromRowIn); elsewhere the same value as before, the SASS unchanged.
template <bool kPeer, bool kWordFromRow = false>
__device__ __forceinline__ void publish_valid(uint32_t* valid_stage, const PeerStage& peer, const ProducerLane& pl, int round,
                                              bool ok) {
  const unsigned bal = __ballot_sync(0xffffffffu, ok);
  if (pl.lane == 0) {
    const int word = kWordFromRow ? (round * 32 + pl.key) >> 3 : round * 4 + pl.warp;
    valid_stage[word] = bal;
    if constexpr (kPeer) st_async_b32(peer.valid + 4 * word, bal, peer.full);
  }
}

// 16 bytes of a converted row into the pair's other K tile, completing on its "full" (config.h
// SMLA_SD_NO_PEER_STORES, measurement builds: =1 nothing sent, =2 a plain remote store).
__device__ __forceinline__ void store_to_peer(uint32_t dst, const uint4& v, uint32_t full) {
  if constexpr (SMLA_SD_NO_PEER_STORES == 0) st_async_v4(dst, v, full);
  else if constexpr (SMLA_SD_NO_PEER_STORES == 2) st_cluster_v4(dst, v);
}

// One lane's share of a key row: a quarter of every 64-byte latent chunk, of the RoPE part, and
// the row's scales.
template <int kFmt>
struct PackedRound {
  using F = PackedRow<kFmt>;
  uint4 lat[F::kLatentChunks];
  uint4 rope[2];
  typename F::Scales sc;
  bool ok;

  __device__ void load(const AttnParams& p, const Work& w, const ProducerLane& pl, int v, int32_t idx) {
    if constexpr (kProducerIdle) {  // experiment: nothing loaded, nothing stored
      ok = true;
      return;
    }
    const KeyAddr a = key_addr(p, w, v, idx);
    ok = a.page != nullptr;
    if constexpr (kNoGathers) {  // experiment: no gathers (converts stand-in values)
      // Values the compiler cannot see (z is 0 for any real page stride), so that it keeps the
      // conversion: with literal zeros it folded the conversion away (variants 4 and 9 before
      // commit 60b2034 did not convert). They convert to tiny values or NaN: the results are
      // wrong anyway.
      const uint32_t z = static_cast<uint32_t>(p.main.page_stride >> 62);
#pragma unroll
      for (int i = 0; i < F::kLatentChunks; ++i) lat[i] = make_uint4(z + 16 * i, z + 16 * i + 1, z + 16 * i + 2, z + 16 * i + 3);
      rope[0] = make_uint4(z, z, z, z);
      rope[1] = rope[0];
      if constexpr (std::is_same_v<typename F::Scales, float4>) {
        sc = make_float4(__uint_as_float(z + 1), __uint_as_float(z + 2), __uint_as_float(z + 3), __uint_as_float(z + 4));
      } else if constexpr (std::is_same_v<typename F::Scales, uint2>) {
        sc = make_uint2(z + 1, z + 2);
      }
      return;
    }
    if (ok) {
      const uint8_t* r = F::row(a);
#pragma unroll
      for (int i = 0; i < F::kLatentChunks; ++i) lat[i] = ldg_nc_v4_l2_256(r + i * 64 + pl.q * 16);
      if constexpr (F::kRope) {
        rope[0] = ldg_nc_v4(F::rope(r) + pl.q * 32);
        rope[1] = ldg_nc_v4(F::rope(r) + pl.q * 32 + 16);
      }
      sc = F::load_scales(a, r);
    } else {  // zeros convert to zeros: store() needs no branch per chunk
#pragma unroll
      for (int i = 0; i < F::kLatentChunks; ++i) lat[i] = make_uint4(0, 0, 0, 0);
      rope[0] = rope[1] = make_uint4(0, 0, 0, 0);
      sc = typename F::Scales{};
    }
  }

  // Whether the warp takes the bf16 route (kRoute and every lane's scales allow it).
  template <bool kRoute>
  __device__ bool route() const {
    if constexpr (kRoute && !std::is_empty_v<typename F::Scales>) return __all_sync(0xffffffffu, F::bf16_route(sc));
    return kRoute;
  }

  // Dequantized into row j of the K tile (and of the peer's, same offset); a skipped key was
  // loaded as zeros and is written as zeros (its logit is masked, and zero V keeps NaN bytes of
  // unused slots out of P V). The peer's copy goes 16 bytes at a time by st.async, overlapped
  // with the conversion: one bulk copy of the round after a named barrier measured slower
  // (2026-12-02, V3.2 b128 s_q2 h128 378.7 -> 428.5 µs, V4 s_q2 h128 223.7 -> 240.2), and so did
  // one bulk copy a warp after its proxy fence (2026-12-05, H100: V3.2 s_q2 h128 374.5 -> 406.6,
  // h128 194 -> 212, V4 s_q2 h128 206 -> 211, paged prefill h128 5598 -> 6005; dense fp8 q level;
  // with the next block's loads after the hand-over, that the fence need not wait for them, slower
  // still but fp8 q 1328 -> 1300). Without the peer's rows at all (config.h SMLA_SD_NO_PEER_STORES=1,
  // wrong results) the pairs run 10-18% faster on an H100 and an H200; with the rows sent by plain
  // remote stores nobody waits for (=2) they keep their time (fp8 q -6%): the sending costs, not
  // the wait. The link to the peer moves ~19 bytes a cycle an SM by any of these instructions
  // (bench/micro/peer_rows.cu; docs/PERF.md, fiftieth pass): only fewer bytes would send faster.
  // kPart (config.h kPackedEmptyHalves, in_fill_part): the boxes of the row it stores. Box i is
  // latent chunk i, the RoPE part box F::kLatentChunks.
  template <bool kPeer, bool kRoute, int kPart = 0>
  __device__ void store(uint8_t* tile, const PeerStage& peer, const ProducerLane& pl, int j) const {
    if constexpr (kProducerIdle) return;
    const int row_off = tile_offset<F::kD>(j, 0);
    uint8_t* dst = tile + row_off;
    auto put = [&](int c, const uint4& v) {
      if constexpr (kNoTileStores) {  // experiment: the values stay live, nothing is stored
        asm volatile("" ::"r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w));
        return;
      }
      *reinterpret_cast<uint4*>(dst + c * 128) = v;
      if constexpr (kPeer) store_to_peer(peer.tile + row_off + c * 128, v, peer.full);
    };
    // kRoute (config.h kBf16Route): the bf16 route (fp8.cuh) where every lane's row allows
    // it (warp-uniform: no divergence), else the float32 route; both give the same bits. (The
    // warp is converged: publish_valid's ballot came just before.)
    const bool route = this->template route<kRoute>();
    auto latent = [&](auto convert) {
#pragma unroll
      for (int i = 0; i < F::kLatentChunks; ++i) {
        if (!in_fill_part<kPart>(i)) continue;
        uint4 lo, hi;
        if constexpr (kNoConvert) {  // experiment: no conversion (raw bytes stored)
          lo = hi = lat[i];
        } else {
          convert(i, lo, hi);
        }
        const int c = 8 * i + 2 * pl.q;
        put(c, lo);
        put(c + 1, hi);
      }
    };
    if (route) latent([&](int i, uint4& lo, uint4& hi) { e4m3x16_to_bf16_route(lat[i], F::multiplier(sc, i), lo, hi); });
    else latent([&](int i, uint4& lo, uint4& hi) { e4m3x16_to_bf16(lat[i], F::scale(sc, i), lo, hi); });
    if constexpr (F::kRope) {
      if (in_fill_part<kPart>(F::kLatentChunks)) {
        const int c = F::kLatentChunks * 8 + 2 * pl.q;
        put(c, rope[0]);
        put(c + 1, rope[1]);
      }
    }
  }

  // config.h kPairConvertEarly / kConvertEarlyWide: store() in two parts, the first kE latent
  // chunks dequantized into registers before the stage's wait, the rest converted and everything
  // stored after it.
  // out[2 (i - kI0)] and [+1]: chunk i's 16-byte halves, stored at columns 8 i + 2 q (+1).
  template <int kI0, int kI1>
  __device__ void convert(uint4 (&out)[2 * (kI1 - kI0)], bool bf16_route) const {
    static_assert(kI0 >= 0 && !kProducerIdle && !kNoConvert && !kNoTileStores, "the experiments take store()");  // (dependent: checked where it is used)
    if (bf16_route) {
#pragma unroll
      for (int i = kI0; i < kI1; ++i)
        e4m3x16_to_bf16_route(lat[i], F::multiplier(sc, i), out[2 * (i - kI0)], out[2 * (i - kI0) + 1]);
    } else {
#pragma unroll
      for (int i = kI0; i < kI1; ++i) e4m3x16_to_bf16(lat[i], F::scale(sc, i), out[2 * (i - kI0)], out[2 * (i - kI0) + 1]);
    }
  }
  template <bool kPeer, int kI0, int kI1>
  __device__ static void store_chunks(const uint4 (&out)[2 * (kI1 - kI0)], uint8_t* tile, const PeerStage& peer,
                                      const ProducerLane& pl, int j) {
    const int row_off = tile_offset<F::kD>(j, 0);
#pragma unroll
    for (int k = 0; k < 2 * (kI1 - kI0); ++k) {
      const int c = 8 * (kI0 + k / 2) + 2 * pl.q + (k & 1);
      *reinterpret_cast<uint4*>(tile + row_off + c * 128) = out[k];
      if constexpr (kPeer) store_to_peer(peer.tile + row_off + c * 128, out[k], peer.full);
    }
  }
  // The rest of the row after the wait: chunks kE.. converted and stored, then the RoPE part.
  // kPart (in_fill_part): 1 chunks kE..3 (and fp8_e4m3's ninth), 2 chunks 4..7; the RoPE part
  // with its box.
  template <bool kPeer, int kE, int kPart = 0>
  __device__ void store_rest(bool bf16_route, uint8_t* tile, const PeerStage& peer, const ProducerLane& pl, int j) const {
    static_assert(kPart == 0 || kE <= 4, "the early chunks are all WG0's");
    constexpr int kL = F::kLatentChunks;
    constexpr int kI0 = kPart == 2 ? 4 : kE;
    constexpr int kI1 = kPart == 1 ? (kL < 4 ? kL : 4) : kPart == 2 && kL > 8 ? 8 : kL;
    if constexpr (kI0 < kI1) {
      uint4 out[2 * (kI1 - kI0)];
      convert<kI0, kI1>(out, bf16_route);
      store_chunks<kPeer, kI0, kI1>(out, tile, peer, pl, j);
    }
    if constexpr (kPart == 1 && kL > 8) {  // fp8_e4m3: chunk 8 (columns 512-575) is WG0's
      uint4 out[2];
      convert<8, 9>(out, bf16_route);
      store_chunks<kPeer, 8, 9>(out, tile, peer, pl, j);
    }
    if constexpr (F::kRope && in_fill_part<kPart>(F::kLatentChunks)) {
      const int row_off = tile_offset<F::kD>(j, 0), c = F::kLatentChunks * 8 + 2 * pl.q;
      *reinterpret_cast<uint4*>(tile + row_off + c * 128) = rope[0];
      *reinterpret_cast<uint4*>(tile + row_off + (c + 1) * 128) = rope[1];
      if constexpr (kPeer) {
        store_to_peer(peer.tile + row_off + c * 128, rope[0], peer.full);
        store_to_peer(peer.tile + row_off + (c + 1) * 128, rope[1], peer.full);
      }
    }
  }
};

// The packed producers that form publish_valid's word from the row (ptxas -v, nvcc 13.0: each
// spilled one word at 80 registers otherwise; scripts/check_spills.sh): the one-unit unpaired
// 64-row fp8_ds_mla CTAs and the 32-row fp8_model1 tiles.
template <int kRows, int kFmt, bool kAloneFirst>
inline constexpr bool kWordFromRowIn = (kAloneFirst && kFmt == static_cast<int>(CacheFormat::fp8_ds_mla)) ||
                                       (kRows == 32 && kFmt == static_cast<int>(CacheFormat::fp8_model1));

// Rounds of every block a producer thread takes (see the lane mapping above).
template <int kRows>
constexpr int producer_rounds(bool pair) { return kRows == 64 && !pair ? 2 : 1; }

template <bool kDenseToo = false, int kDepth>
__device__ __forceinline__ void init_queue(IndexQueue<kDepth>& iq, const AttnParams& p, const Work& w,
                                           const ProducerLane& pl, int r) {
#pragma unroll
  for (int d = 0; d < kDepth; ++d)
    iq.v[d] = w.kb_begin + d < w.kb_end ? load_key_index<kDenseToo>(p, w, pl.pos(w.kb_begin + d, r)) : -1;
}

// Drops block kb, loads block kb + kDepth.
template <bool kDenseToo = false, int kDepth>
__device__ __forceinline__ void rotate_queue(IndexQueue<kDepth>& iq, const AttnParams& p, const Work& w,
                                             const ProducerLane& pl, int r, int kb) {
#pragma unroll
  for (int d = 0; d + 1 < kDepth; ++d) iq.v[d] = iq.v[d + 1];
  iq.v[kDepth - 1] = kb + kDepth < w.kb_end ? load_key_index<kDenseToo>(p, w, pl.pos(kb + kDepth, r)) : -1;
}

template <int kRows, int kFmt, bool kPaired>
__device__ __forceinline__ void prefetch_key(const AttnParams& p, const Work& w, const ProducerLane& pl, int r, int kb,
                                             int32_t idx) {
  if (!kPrefetch<kRows> || kb >= w.kb_end) return;
  const KeyAddr a = key_addr(p, w, pl.pos(kb, r), idx);
  if (a.page) PackedRow<kFmt>::template prefetch_lines<kPaired>(a, pl.q);
}

// config.h kPairConvertEarly / kConvertEarlyWide: a producer thread's rows of one block with
// their first kE latent chunks dequantized into registers (convert, before the stage's wait),
// stored with the rest converted on the way (store, after it).
template <class Round, int kRounds, bool kPeer, int kEarly>
struct EarlyRows {
  static constexpr int kE = kEarly < Round::F::kLatentChunks ? kEarly : Round::F::kLatentChunks;
  bool route[kRounds];
  uint4 out[kRounds][kE > 0 ? 2 * kE : 1];  // (kE = 0: never converted nor stored)
  template <bool kRoute>
  __device__ void convert(const Round (&cur)[kRounds]) {
#pragma unroll
    for (int r = 0; r < kRounds; ++r) {
      route[r] = cur[r].template route<kRoute>();
      cur[r].template convert<0, kE>(out[r], route[r]);
    }
  }
  // kHalves (config.h kPackedEmptyHalves): WG0's boxes now (the stage's "empty" passed), WG1's
  // once empty_b passes for block n too.
  template <bool kHalves, bool kWordFromRow, int kRows, int kD>
  __device__ void store(const Round (&cur)[kRounds], const Stage<kRows, kD>& st, const PeerStage& peer,
                        const ProducerLane& pl, int n) const {
#pragma unroll
    for (int r = 0; r < kRounds; ++r) {
      publish_valid<kPeer, kWordFromRow>(st.valid, peer, pl, pl.round + r, cur[r].ok);
      Round::template store_chunks<kPeer, 0, kE>(out[r], st.tile, peer, pl, pl.row_in_block(r));
      cur[r].template store_rest<kPeer, kE, kHalves ? 1 : 0>(route[r], st.tile, peer, pl, pl.row_in_block(r));
    }
    if constexpr (kHalves) {
      st.wait_empty_b(n);
#pragma unroll
      for (int r = 0; r < kRounds; ++r) cur[r].template store_rest<kPeer, kE, 2>(route[r], st.tile, peer, pl, pl.row_in_block(r));
    }
  }
};

// Bytes a pair's peer writes into this CTA's K tile per block: its 32 rows and its 4 ballots.
template <int kD>
inline constexpr uint32_t kPeerTxBytes = (kProducerIdle || kNoPeerStores ? 0 : 32 * kD * 2) + 4 * 4;

// Block n's rows (cur[r]: round pl.round + r) into stage st once the consumers freed it (and,
// kPeer, into the peer's), then handed over (the CTA's first producer thread arms "full" for the
// peer's bytes).
// kHalves (config.h kPackedEmptyHalves): the rows' boxes 4-7 wait for WG1's part of the stage
// (empty_b), the rest only for WG0's ("empty").
template <int kRows, int kD, int kRounds, bool kPeer, bool kRoute, int kEarly, bool kHalves, bool kWordFromRow,
          typename Round>
__device__ __forceinline__ void store_and_hand_over(const Stage<kRows, kD>& st, const Work& w, const ProducerLane& pl,
                                                    const Round (&cur)[kRounds], int n) {
  static_assert(!(kHalves && kPeer), "pairs free their tiles at once");
  PeerStage peer;
  if constexpr (kPeer) {
    peer.tile = in_peer(w, st.tile);
    peer.valid = in_peer(w, st.valid);
    peer.full = in_peer(w, st.full);
  }
  if constexpr (kEarly != 0 && !kProducerIdle && !kNoConvert && !kNoTileStores) {  // (the experiments take store())
    EarlyRows<Round, kRounds, kPeer, kEarly> e;
    e.template convert<kRoute>(cur);
    st.wait_empty(n);
    e.template store<kHalves, kWordFromRow>(cur, st, peer, pl, n);
  } else {
    st.wait_empty(n);
#pragma unroll
    for (int r = 0; r < kRounds; ++r) {
      publish_valid<kPeer, kWordFromRow>(st.valid, peer, pl, pl.round + r, cur[r].ok);
      cur[r].template store<kPeer, kRoute, kHalves ? 1 : 0>(st.tile, peer, pl, pl.row_in_block(r));
    }
    if constexpr (kHalves && kPackedPart2Early && Round::F::kLatentChunks >= 8 && !kProducerIdle && !kNoConvert &&
                  !kNoTileStores) {
      // config.h kPackedPart2Early: boxes 4-7 converted before WG1's part is free, stored after.
      uint4 out[kRounds][8];
#pragma unroll
      for (int r = 0; r < kRounds; ++r) cur[r].template convert<4, 8>(out[r], cur[r].template route<kRoute>());
      st.wait_empty_b(n);
#pragma unroll
      for (int r = 0; r < kRounds; ++r) Round::template store_chunks<kPeer, 4, 8>(out[r], st.tile, peer, pl, pl.row_in_block(r));
    } else if constexpr (kHalves) {
      st.wait_empty_b(n);
#pragma unroll
      for (int r = 0; r < kRounds; ++r) cur[r].template store<kPeer, kRoute, 2>(st.tile, peer, pl, pl.row_in_block(r));
    }
  }
  // Generic-proxy stores, read next by wgmma (async proxy): the proxy fence orders them (with
  // config.h kPairConsumerFence, a pair's consumers fence after their wait instead).
  if constexpr (!(kPeer && kPairConsumerFence)) fence_proxy_async();
  if (kPeer && pl.first()) mbar_arrive_expect_tx(st.full, kPeerTxBytes<kD>);
  else mbar_arrive(st.full);
}

// fp8_ds_mla / fp8_model1: global -> registers -> dequantize -> K tile. A thread takes kRounds
// keys of every block; kAhead = 1 issues the loads of block kb + 1 before it stores block kb.
// Rows kPf blocks ahead of block kb are prefetched into L2 (config.h kPairPrefetch, kWidePrefetchOf).
// kEarly: latent chunks of each row converted before the stage's wait (EarlyRows).
// kHalves (config.h kPackedEmptyHalves): each row stored in two parts (store_and_hand_over).
template <int kRows, int kFmt, int kRounds, bool kPeer, int kAhead, bool kRoute, bool kAloneFirst = false, int kEarly = 0,
          bool kHalves = false>
__device__ void produce_packed_rounds(const AttnParams& p, const Work& w, uint8_t* smem, const ProducerLane& pl, int n0) {
  constexpr int kD = PackedRow<kFmt>::kD;
  constexpr bool kWide = !kPeer && kRows == 64;  // unpaired 64-row CTAs
  constexpr int kPf = kPeer ? kPairPrefetch : kWide ? kWidePrefetchOf<kFmt> : 2 + kAhead;
  constexpr bool kPaired = kPrefetchPaired<kFmt, kPeer>;
  using Round = PackedRound<kFmt>;
  using Queue = IndexQueue<kPeer ? kPairIndexQueue : kWide ? kWideIndexQueue : kIndexQueue>;
  static_assert(kPf < Queue::kSize, "the prefetch's index is in the queue");
  // kAloneFirst (config.h kFirstBlockAlone; one-unit unpaired CTAs, n0 = 0, no block ahead):
  // the CTA's first block is asked for alone and stored before anything else; the first step
  // then issues what the others issued before it.
  static_assert(!kAloneFirst || kAhead == 0, "the first block alone is built for producers without a block ahead");
  Queue iq[kRounds];
#pragma unroll
  for (int r = 0; r < kRounds; ++r) {
    init_queue<serves_dense(kFmt)>(iq[r], p, w, pl, r);
    if constexpr (!kAloneFirst)
      for (int d = 0; d < kPf; ++d) prefetch_key<kRows, kFmt, kPaired>(p, w, pl, r, w.kb_begin + d, iq[r].v[d]);
  }
  Round ra[kRounds], rb[kRounds];
  if constexpr (kAhead == 1) {
#pragma unroll
    for (int r = 0; r < kRounds; ++r) ra[r].load(p, w, pl, pl.pos(w.kb_begin, r), iq[r].v[0]);
  }
  // One block: `cur` holds (or receives) block kb's rows, `nxt` receives block kb + 1's.
  // first_c (std::true_type): the first block alone, stored before anything else is asked for.
  auto step = [&](Round (&cur)[kRounds], Round (&nxt)[kRounds], int kb, auto first_c) {
    constexpr bool kFirst = decltype(first_c)::value;
    const int i = kb - w.kb_begin, n = n0 + i;
    const Stage<kRows, kD> st(smem, n & 1);
    auto load_next = [&] {
#pragma unroll
      for (int r = 0; r < kRounds; ++r)
        if (kAhead == 1 && kb + 1 < w.kb_end) nxt[r].load(p, w, pl, pl.pos(kb + 1, r), iq[r].v[1]);
    };
    auto ahead = [&] {  // the L2 prefetch of block kb + kPf, the index of block kb + depth
#pragma unroll
      for (int r = 0; r < kRounds; ++r) {
        prefetch_key<kRows, kFmt, kPaired>(p, w, pl, r, kb + kPf, iq[r].v[kPf]);
        rotate_queue<serves_dense(kFmt)>(iq[r], p, w, pl, r, kb);
      }
    };
    if constexpr (kAhead == 0) {
#pragma unroll
      for (int r = 0; r < kRounds; ++r) cur[r].load(p, w, pl, pl.pos(kb, r), iq[r].v[0]);
    }
    if constexpr (!kFirst) {
      load_next();
      ahead();
    }
    store_and_hand_over<kRows, kD, kRounds, kPeer, kRoute, kEarly, kHalves, kWordFromRowIn<kRows, kFmt, kAloneFirst>>(
        st, w, pl, cur, n);
    if constexpr (kFirst) {
#pragma unroll
      for (int r = 0; r < kRounds; ++r)
        for (int d = 1; d < kPf; ++d) prefetch_key<kRows, kFmt, kPaired>(p, w, pl, r, kb + d, iq[r].v[d]);
      load_next();
      ahead();
    }
    if (kTimeline && i == 0 && pl.first()) timeline_mark(7);
  };
  int kb = w.kb_begin;
  if constexpr (kAloneFirst) step(ra, ra, kb++, std::true_type{});  // the caller returned on an empty unit
  if constexpr (kAhead == 0) {
    for (; kb < w.kb_end; ++kb) step(ra, ra, kb, std::false_type{});
  } else {
    for (; kb < w.kb_end; kb += 2) {
      step(ra, rb, kb, std::false_type{});
      if (kb + 1 < w.kb_end) step(rb, ra, kb + 1, std::false_type{});
    }
  }
}

// A row of the raw ring as the narrow bulk producer reads it: its bytes in the cache and in
// the slot, and one lane's share converted to bf16 (the 16-byte quarter q of every 64-byte
// chunk of the K row: 2 x 16 bytes of the tile per 64 columns).
template <int kFmt>
struct RawRow;

// fp8_ds_mla: 512 e4m3 values with four fp32 tile scales, then 64 bf16 RoPE values.
template <>
struct RawRow<static_cast<int>(CacheFormat::fp8_ds_mla)> {
  using F = PackedRow<static_cast<int>(CacheFormat::fp8_ds_mla)>;
  using L = DsMlaLayout;
  static constexpr int kD = L::d_qk;
  static constexpr int kBytes = L::bytes_per_token;
  static constexpr bool kDense = false;
  __device__ static const uint8_t* row(const KeyAddr& a) { return F::row(a); }
  __device__ static void convert(const uint8_t* r, bool ok, int q, uint4 (&out)[kD / 32]) {
    const uint4 zero = make_uint4(0, 0, 0, 0);
    const typename F::Scales sc = ok ? *reinterpret_cast<const float4*>(r + L::scale_offset) : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int c = 0; c < F::kLatentChunks; ++c) {
      const uint4 v = ok ? *reinterpret_cast<const uint4*>(r + c * 64 + q * 16) : zero;
      e4m3x16_to_bf16(v, F::scale(sc, c), out[2 * c], out[2 * c + 1]);
    }
    out[2 * F::kLatentChunks] = ok ? *reinterpret_cast<const uint4*>(r + L::rope_offset + q * 32) : zero;
    out[2 * F::kLatentChunks + 1] = ok ? *reinterpret_cast<const uint4*>(r + L::rope_offset + q * 32 + 16) : zero;
  }
};

// fp8_e4m3 (dense decode, one KV head, d_qk 576): every value e4m3 under one per-tensor scale,
// which the launch folds into the logits' scale and O's (AttnParams::out_scale), so the values
// convert exactly with no multiply.
template <>
struct RawRow<static_cast<int>(CacheFormat::fp8_e4m3)> {
  using F = PackedRow<static_cast<int>(CacheFormat::fp8_e4m3)>;
  static constexpr int kD = F::kD;
  static constexpr int kBytes = kD;
  static constexpr bool kDense = true;
  __device__ static const uint8_t* row(const KeyAddr& a) { return F::row(a); }
  __device__ static void convert(const uint8_t* r, bool ok, int q, uint4 (&out)[kD / 32]) {
#pragma unroll
    for (int c = 0; c < kD / 64; ++c) {
      const uint4 v = ok ? *reinterpret_cast<const uint4*>(r + c * 64 + q * 16) : make_uint4(0, 0, 0, 0);
      e4m3x16_to_bf16(v, 1.0f, out[2 * c], out[2 * c + 1]);
    }
  }
};

// kNarrowBulk (config.h): 16/32-row CTAs of fp8_ds_mla (sparse) and fp8_e4m3 (dense), with
// raw_slots() raw blocks. 64 producer threads (kBulkSpread: lanes
// 0..7 of every warp) each copy one row of block i with cp.async.bulk into raw slot i % kSlots
// and arm the slot's barrier for its bytes (0 for a skipped key: not copied, converted as
// zeros). Every producer thread converts its quarter of a row (the lane mapping above) from the
// slot into registers; a named barrier among the producers then frees the slot for block
// i + kSlots (kBulkEarlyFree: before the K tile is written), whose index each copying thread
// loaded one block earlier. The thread waits until the consumers released block i - 1 (one K
// tile; two K tiles: block i - 2), stores block i and hands it over.
template <int kRows, int kFmt, bool kReadOnce>
__device__ void produce_narrow_bulk(const AttnParams& p, const Work& w, uint8_t* smem) {
  using R = RawRow<kFmt>;
  constexpr int kD = R::kD;
  constexpr bool kDense = R::kDense;
  constexpr int kRaw = raw_slots<kRows, kFmt>();
  using S = Smem<kRows, kD, kRaw, R::kBytes>;
  using St = Stage<kRows, kD, kRaw>;
  constexpr int kSlots = S::kSlots;
  // One raw block (two K tiles): its copies for block i + 1 are issued once every producer has
  // converted block i, before the tile stores (free_slot below, always early).
  constexpr bool kEarlyFree = kSlots == 1 || kBulkEarlyFree<kRows>;
  const ProducerLane pl(w, consumer_threads(kRows));
  if (w.kb_begin >= w.kb_end) return;
  const int blocks = w.kb_end - w.kb_begin;
  if constexpr (kProducerIdle) {  // experiment (variant 8): each block handed over as soon as the tile is free
    for (int i = 0; i < blocks; ++i) {
      const St st(smem, i & 1);
      if (S::kOneTile && i >= 1) St(smem, (i - 1) & 1).wait_released(i - 1);
      if (!S::kOneTile) st.wait_empty(i);
      publish_valid<false>(st.valid, PeerStage{}, pl, pl.round, true);
      mbar_arrive(st.full);
    }
    return;
  }
  const int pt = static_cast<int>(threadIdx.x) - consumer_threads(kRows);
  // The row this thread copies (kBulkSpread: lanes 0..7 of each producer warp), or -1.
  const int row = kBulkSpread ? ((pt & 31) < 8 ? (pt >> 5) * 8 + (pt & 7) : -1) : (pt < kKeys ? pt : -1);
  uint64_t* raw_full = reinterpret_cast<uint64_t*>(smem + S::raw_bars);
  uint8_t* raw_ok = smem + S::raw_ok;
  uint8_t* raw = smem + S::raw;
  auto issue = [&](int i, int32_t idx) {  // row `row` of block i
    const int slot = i % kSlots;
    const KeyAddr a = key_addr(p, w, (w.kb_begin + i) * kKeys + row, idx);
    const bool ok = a.page != nullptr;
    raw_ok[slot * kKeys + row] = ok;
    mbar_arrive_expect_tx(raw_full + slot, ok ? R::kBytes : 0);
    if (ok)
      copy_row_g2s<kReadOnce, kDense>(smem_addr(raw + slot * S::kRawBlockBytes + row * R::kBytes), R::row(a), R::kBytes,
                              smem_addr(raw_full + slot), i, blocks);
  };
  int32_t next = -1;
  if (row >= 0) {
    for (int i = 0; i < kSlots && i < blocks; ++i) issue(i, load_key_index<kDense>(p, w, (w.kb_begin + i) * kKeys + row));
    if (kSlots < blocks) next = load_key_index<kDense>(p, w, (w.kb_begin + kSlots) * kKeys + row);
  }
  // Every producer has read slot i % kSlots: the copying threads reissue it for block i + kSlots.
  // (Loading the next index after the tile's fence instead measured slower: h32 97.9 -> 102.8 µs.)
  auto free_slot = [&](int i) {
    named_bar_sync(kBarRawFree, producer_threads(kRows));
    if (row >= 0 && i + kSlots < blocks) {
      issue(i + kSlots, next);
      const int ahead = i + kSlots + 1;
      next = ahead < blocks ? load_key_index<kDense>(p, w, (w.kb_begin + ahead) * kKeys + row) : -1;
    }
    if (kBlockTimeline && pl.first()) block_event(3, i);
  };
  const int j = pl.row_in_block(0);
  for (int i = 0; i < blocks; ++i) {
    const int slot = i % kSlots;
    mbar_wait(raw_full + slot, (i / kSlots) & 1);
    if (kBlockTimeline && pl.first()) block_event(0, i);
    const uint8_t* r = raw + slot * S::kRawBlockBytes + j * R::kBytes;
    const bool ok = raw_ok[slot * kKeys + j] != 0;
    uint4 out[kD / 32];
    R::convert(r, ok, pl.q, out);
    if constexpr (kEarlyFree) free_slot(i);
    const St st(smem, i & 1);
    if constexpr (S::kOneTile) {
      if (i >= 1) St(smem, (i - 1) & 1).wait_released(i - 1);  // the one K tile is free
    } else {
      st.wait_empty(i);  // block i - 2 left this tile
    }
    if (kBlockTimeline && pl.first()) block_event(1, i);
    publish_valid<false>(st.valid, PeerStage{}, pl, pl.round, ok);
    uint8_t* dst = st.tile + tile_offset<kD>(j, 0);
#pragma unroll
    for (int c = 0; c < kD / 64; ++c) {
      *reinterpret_cast<uint4*>(dst + (8 * c + 2 * pl.q) * 128) = out[2 * c];
      *reinterpret_cast<uint4*>(dst + (8 * c + 2 * pl.q + 1) * 128) = out[2 * c + 1];
    }
    if constexpr (!kNarrowConsumerFence) fence_proxy_async();  // generic stores, read next by wgmma
    mbar_arrive(st.full);
    if (kTimeline && i == 0 && pl.first()) timeline_mark(7);
    if (kBlockTimeline && pl.first()) block_event(2, i);
    if constexpr (!kEarlyFree) free_slot(i);
  }
  if (kTimeline && pl.first()) timeline_mark(8);
}

// n0: K blocks the CTA handled before this unit (persistent CTAs; stage and phase continue).
// kTwo (config.h kTwoProducers): an unpaired 64-row CTA's two producer warpgroups, one round
// each. kRoute: the bf16 dequantization route where the rows allow it (config.h).
// kAloneFirst: the unpaired CTA's first block alone (config.h kFirstBlockAlone). kEarlyWide: the
// unpaired CTA's chunks converted before the stage's wait (config.h kConvertEarlyWide). kHalves:
// the unpaired CTA's rows stored in two parts (config.h kPackedEmptyHalves).
template <int kRows, int kFmt, bool kTwo, bool kRoute, bool kAloneFirst = false, int kEarlyWide = 0, bool kHalves = false>
__device__ void produce_packed(const AttnParams& p, const Work& w, uint8_t* smem, int n0 = 0) {
  const ProducerLane pl(w, consumer_threads(kRows), kLaneOpaque<kFmt, kAloneFirst>);
  if (w.kb_begin >= w.kb_end) return;
  constexpr int kAlone = kTwo ? 1 : producer_rounds<kRows>(false);
  if constexpr (kRows == 64) {  // only 64-row tiles pair (launch.cu)
    if (w.pair) {
      produce_packed_rounds<kRows, kFmt, producer_rounds<kRows>(true), true, kPairAhead, kRoute, false, kPairConvertEarly>(
          p, w, smem, pl, n0);
      if (kTimeline && pl.first()) timeline_mark(8);
      return;
    }
  }
  produce_packed_rounds<kRows, kFmt, kAlone, false, (kRows == 64 ? 0 : kNarrowAhead), kRoute, kAloneFirst, kEarlyWide, kHalves>(
      p, w, smem, pl, n0);
  if (kTimeline && pl.first()) timeline_mark(8);
}

// A bf16 row's bytes in the cache (any readable address for a skipped key: its copies zero-fill).
template <int kD>
__device__ __forceinline__ const uint8_t* bf16_row(const AttnParams& p, const KeyAddr& a) {
  return a.page != nullptr ? a.page + static_cast<int64_t>(a.off) * kD * 2 : p.main.base;
}

// The swizzled K tile (config.h kBf16Sw128): the warp's eight keys of a round are copied four
// rows at a time, eight lanes per row, so every warp-wide copy reads four whole 128-byte lines.
// Lane l takes the 16-byte piece l % 8 of every 128-byte line of the rows of keys l / 8 and
// l / 8 + 4 (their addresses from the lanes that loaded those keys' indices). Row j of the block
// lands at box b (64 columns, 8 KB), line j, piece (l % 8) ^ (j % 8): the TMA unit's 128-byte
// swizzle, which also puts the eight lanes of a row on distinct banks.
// kPart (config.h kBf16EmptyHalves, in_fill_part): the boxes of the rows it copies.
template <int kD, int kPart = 0>
__device__ __forceinline__ void copy_rows_sw128(uint32_t tile, const uint8_t* src, bool ok, const ProducerLane& pl, int j) {
  const int kk = pl.lane >> 3, c = pl.lane & 7;
  const int j0 = j - (pl.lane & 7) + kk;  // row of key kk of the warp's eight (j holds this lane's own key)
  const uint8_t* s0 = reinterpret_cast<const uint8_t*>(__shfl_sync(0xffffffffu, reinterpret_cast<uintptr_t>(src), kk));
  const uint8_t* s1 = reinterpret_cast<const uint8_t*>(__shfl_sync(0xffffffffu, reinterpret_cast<uintptr_t>(src), kk + 4));
  const uint32_t n0 = __shfl_sync(0xffffffffu, ok ? 16u : 0u, kk), n1 = __shfl_sync(0xffffffffu, ok ? 16u : 0u, kk + 4);
  const uint32_t d0 = tile + j0 * 128 + ((c ^ (j0 & 7)) << 4), d1 = tile + (j0 + 4) * 128 + ((c ^ ((j0 + 4) & 7)) << 4);
#pragma unroll
  for (int b = 0; b < kD / 64; ++b) {
    if (!in_fill_part<kPart>(b)) continue;
    cp_async_16_zfill(d0 + b * kKeys * 128, s0 + b * 128 + c * 16, n0);
    cp_async_16_zfill(d1 + b * kKeys * 128, s1 + b * 128 + c * 16, n1);
  }
}

// bf16 rows need no conversion: cp.async straight into the K tile (zero-fill for skipped
// keys), one block in flight while the previous one is handed over. Also dense decode's
// producer off the TMA path: its keys' slots come from the block table (work.cuh).
// kPeer (config.h kBf16Pairs): the thread's round is its CTA's half of every block; once every
// producer's rows of a block are in, bulk copies send the round's rows into the peer's K tile
// (core matrices: its 8-row groups, contiguous in the tile; swizzled tiles: its lines of each
// box), completing on the peer's "full" barrier.
// n0: K blocks the CTA handled before this unit (persistent CTAs, kBf16Persistent).
// after_first: called once block 0's copies are issued (persistent_units' Q load, config.h
// kBf16PersistEnds).
// kHalves (config.h kBf16EmptyHalves): the rows' boxes 4-7 wait for WG1's part of the stage (empty_b).
template <int kRows, int kD, int kRounds, bool kPeer, bool kHalves = false, class AfterFirst = NoHook>
__device__ void produce_bf16_rounds(const AttnParams& p, const Work& w, uint8_t* smem, const ProducerLane& pl, int n0,
                                    AfterFirst after_first = {}) {
  constexpr int kRowBytes = kD * 2;
  constexpr int kRowGroup = 16 * kD;
  IndexQueue<> iq[kRounds];
#pragma unroll
  for (int r = 0; r < kRounds; ++r) init_queue<true>(iq[r], p, w, pl, r);
  // This thread's rows of block i of the unit have landed: make them visible, hand over.
  auto hand_over = [&](int i) {
    const Stage<kRows, kD> st(smem, (n0 + i) & 1);
    fence_proxy_async();  // cp.async writes, read next by wgmma (and by the bulk copy to the peer)
    if constexpr (kPeer) {
      named_bar_sync(kBarPairRows, producer_threads(kRows));  // every producer's rows are in
      if (pl.first()) {
        if constexpr (kSwizzled<static_cast<int>(CacheFormat::bf16)>) {
          // The round's 32 rows are lines 32 r .. 32 r + 31 of every 64-column box: 4 KB a box,
          // swizzled by their line as in the peer's tile (the same offsets).
#pragma unroll
          for (int b = 0; b < kD / 64; ++b) {
            const uint32_t off = static_cast<uint32_t>(b * kKeys * 128 + pl.round * 32 * 128);
            bulk_copy_s2peer(in_peer(w, st.tile) + off, smem_addr(st.tile) + off, 32 * 128, in_peer(w, st.full));
          }
        } else {
          const uint32_t off = static_cast<uint32_t>(pl.round) * 4 * kRowGroup;
          bulk_copy_s2peer(in_peer(w, st.tile) + off, smem_addr(st.tile) + off, 4 * kRowGroup, in_peer(w, st.full));
        }
        mbar_arrive_expect_tx(st.full, kPeerTxBytes<kD>);  // the peer's half and its ballots
      } else {
        mbar_arrive(st.full);
      }
    } else {
      mbar_arrive(st.full);
    }
    if (kUnitTimeline && i == 0 && pl.first()) timeline_mark(8);
  };
  constexpr bool kAsync = kBf16AsyncArrive<kRows> && !kPeer;  // (variant 8 then arrives as produce_bf16_async)
  if constexpr (kProducerIdle && !kPeer) {  // experiment (variant 8): each block handed over unloaded
    after_first();
    for (int i = 0; i < w.kb_end - w.kb_begin; ++i) {
      const Stage<kRows, kD> st(smem, (n0 + i) & 1);
      st.wait_empty(n0 + i);
#pragma unroll
      for (int r = 0; r < kRounds; ++r) publish_valid<false>(st.valid, PeerStage{}, pl, pl.round + r, true);
      mbar_arrive(st.full);
      if (kAsync && pl.lane == 0) mbar_arrive(st.full);
    }
    return;
  }
  // kBf16PersistHand0: in a later unit of a persistent CTA block 1's tile is the unit before's
  // last, so block 0 goes out before that tile's wait too.
  const bool hand0 = kBf16HandEarly && kBf16PersistHand0 && n0 > 0;
  for (int kb = w.kb_begin; kb < w.kb_end; ++kb) {
    const int i = kb - w.kb_begin;
    const Stage<kRows, kD> st(smem, (n0 + i) & 1);
    // kBf16HandEarly: from block 2 on, block i - 1 goes out before this tile's wait (block 1's
    // tile is free from the start, so its copies still go out beside block 0's).
    if (kBf16HandEarly && (i >= 2 || (i == 1 && hand0))) {
      cp_async_wait_group<0>();
      hand_over(i - 1);
    }
    if (kUnitTimeline && i == 0 && pl.first()) timeline_mark(9);  // (timeline.cuh unit marks 14-17)
    st.wait_empty(n0 + i);
    if (kUnitTimeline && i == 0 && pl.first()) timeline_mark(13);
    PeerStage peer;
    if constexpr (kPeer) {
      peer.valid = in_peer(w, st.valid);
      peer.full = in_peer(w, st.full);
    }
    const uint32_t tile = static_cast<uint32_t>(__cvta_generic_to_shared(st.tile));
#pragma unroll
    for (int r = 0; r < kRounds; ++r) {
      const int j = pl.row_in_block(r);
      const KeyAddr a = key_addr(p, w, pl.pos(kb, r), iq[r].v[0]);
      const bool ok = a.page != nullptr;
      const uint8_t* src = bf16_row<kD>(p, a);
      if constexpr (kSwizzled<static_cast<int>(CacheFormat::bf16)>) {
        // variant 4: zero-fill, no reads; SMLA_SD_NO_TILE_STORES: no copies (the loop and its waits kept)
        if constexpr (!kNoTileStores) copy_rows_sw128<kD, kHalves ? 1 : 0>(tile, src, ok && !kNoGathers, pl, j);
        if constexpr (kHalves) {
          static_assert(kRounds == 1, "one round a thread: its row's second part right after the first");
          st.wait_empty_b(n0 + i);
          copy_rows_sw128<kD, 2>(tile, src, ok && !kNoGathers, pl, j);
        }
      } else {
        // tile_offset<kD>(j, 0), spelled out: the helper changes this loop's SASS (the measured code).
        const uint32_t dst = tile + (j >> 3) * kRowGroup + (j & 7) * 16;
#pragma unroll
        for (int ch = 0; ch < kRowBytes / 64; ++ch)
          cp_async_16_zfill(dst + (4 * ch + pl.q) * 128, src + ch * 64 + pl.q * 16, ok ? 16 : 0);
      }
      publish_valid<kPeer>(st.valid, peer, pl, pl.round + r, ok);
      rotate_queue<true>(iq[r], p, w, pl, r, kb);
    }
    cp_async_commit_group();
    if (kUnitTimeline && i == 0 && pl.first()) timeline_mark(7);
    if (i == 0) after_first();
    if ((i == 1 && !hand0) || (!kBf16HandEarly && i >= 1)) {
      cp_async_wait_group<1>();
      hand_over(i - 1);
    }
  }
  cp_async_wait_group<0>();
  hand_over(w.kb_end - w.kb_begin - 1);
}

// config.h kBf16AsyncArrive: the bf16 rows' copies arrive on "full" by themselves (one arrival
// a thread, one more a warp for its valid words), so no producer thread waits for its loads.
template <int kRows, int kD, int kRounds>
__device__ void produce_bf16_async(const AttnParams& p, const Work& w, uint8_t* smem, const ProducerLane& pl, int n0) {
  static_assert(kBf16Sw128, "the copies' arrivals are built on the swizzled tiles");
  IndexQueue<> iq[kRounds];
#pragma unroll
  for (int r = 0; r < kRounds; ++r) init_queue<true>(iq[r], p, w, pl, r);
  for (int kb = w.kb_begin; kb < w.kb_end; ++kb) {
    const Stage<kRows, kD> st(smem, (n0 + kb - w.kb_begin) & 1);
    st.wait_empty(n0 + kb - w.kb_begin);
    const uint32_t tile = static_cast<uint32_t>(__cvta_generic_to_shared(st.tile));
#pragma unroll
    for (int r = 0; r < kRounds; ++r) {
      const KeyAddr a = key_addr(p, w, pl.pos(kb, r), iq[r].v[0]);
      const bool ok = a.page != nullptr;
      copy_rows_sw128<kD>(tile, bf16_row<kD>(p, a), ok, pl, pl.row_in_block(r));
      publish_valid<false>(st.valid, PeerStage{}, pl, pl.round + r, ok);
      rotate_queue<true>(iq[r], p, w, pl, r, kb);
    }
    mbar_arrive_on_cp_async(st.full);
    if (pl.lane == 0) mbar_arrive(st.full);  // the warp's valid words
  }
  cp_async_wait_all();
}

// kTwo (config.h kTwoProducers, SMLA_SD_BF16_TWO_PRODUCERS): two producer warpgroups, one round each.
// after_first: as produce_bf16_rounds (called at once for a unit without blocks).
template <int kRows, int kD, bool kTwo = false, bool kHalves = false, class AfterFirst = NoHook>
__device__ void produce_bf16(const AttnParams& p, const Work& w, uint8_t* smem, int n0 = 0, AfterFirst after_first = {}) {
  constexpr int kRounds = kTwo ? 1 : producer_rounds<kRows>(false);  // of an unpaired CTA's thread
  const ProducerLane pl(w, consumer_threads(kRows));
  if (w.kb_begin >= w.kb_end) {
    after_first();
    return;
  }
  if constexpr (kRows == 64 && kBf16Pairs) {
    if (w.pair) return produce_bf16_rounds<kRows, kD, producer_rounds<kRows>(true), true>(p, w, smem, pl, n0);
  }
  if constexpr (kBf16AsyncArrive<kRows> && !kProducerIdle) return produce_bf16_async<kRows, kD, kRounds>(p, w, smem, pl, n0);
  produce_bf16_rounds<kRows, kD, kRounds, false, kHalves>(p, w, smem, pl, n0, after_first);
}

}  // namespace smla::cuda::sparse_decode_family
