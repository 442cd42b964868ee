// The producer warpgroups: gather the key rows of each 64-key block from the paged cache and
// write them, as bf16, into a K tile (wgmma core-matrix layout) for the consumers.
//
// Lane mapping (as in every packed format): producer warpgroup r takes round r (keys 32r ..
// 32r + 31) of every block; its warp w, lane l takes key 8w + l % 8 of the round and the 16-byte
// quarter q = l / 8 of each 64-byte chunk of the row, so the four lanes of a key read 64
// contiguous bytes per load and their 16-byte stores fill four distinct 128-byte lines of the
// tile (no bank conflicts).
//
// Latency: the rows of block kb + 2 are prefetched into L2 (128-byte lines, two per lane: no
// registers, no shared memory), the indices of block kb + 4 are loaded, and two warpgroups (two
// warps per scheduler) keep loads in flight while the other converts.
#pragma once

#include <cstdint>

#include "cuda/common/barriers.cuh"
#include "cuda/common/fp8.cuh"
#include "cuda/common/gather.cuh"
#include "cuda/common/wgmma.cuh"
#include "cuda/sparse_decode/config.h"
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
  // Lane q of the key's four: two 128-byte lines of the row (together every line it spans; one
  // bulk prefetch per row measured slower: its uniform operands serialize the lanes).
  __device__ static void prefetch_lines(const KeyAddr& a, int q) {
    const uint8_t* r = row(a);
    prefetch_l2_line(r + q * 128);
    prefetch_l2_line(r + min((q + 4) * 128, L::bytes_per_token - 1));
  }
};

template <>
struct PackedRow<static_cast<int>(CacheFormat::fp8_model1)> {
  using L = Model1Layout;
  static constexpr int kD = L::d_qk;
  static constexpr int kLatentChunks = L::d_latent / 64;
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
  __device__ static void prefetch_lines(const KeyAddr& a, int q) {
    const uint8_t* r = row(a);
    prefetch_l2_line(r + q * 128);
    prefetch_l2_line(r + min((q + 4) * 128, L::data_bytes - 1));
    if (q == 0) prefetch_l2_line(a.page + L::scales_offset(a.page_size, a.off));
  }
};

// The lane's key index in blocks kb .. kb + 3, rotated one block per step so that every index is
// loaded three blocks before its row is.
struct IndexQueue {
  int32_t v[4];
};

// Lane roles inside the producer warpgroups.
struct ProducerLane {
  int lane, warp, q, round, key;  // key: the lane's key within its 32-key round
  __device__ ProducerLane() {
    const int pt = static_cast<int>(threadIdx.x) - kConsumerThreads;
    round = pt >> 7;
    lane = pt & 31;
    warp = (pt >> 5) & 3;
    q = lane >> 3;
    key = warp * 8 + (lane & 7);
  }
  __device__ int row_in_block() const { return round * 32 + key; }
  __device__ int pos(int kb) const { return kb * kKeys + row_in_block(); }
};

// The round's valid keys as one byte per warp: bit i = key 8 * warp + i of the round.
__device__ __forceinline__ void publish_valid(uint8_t* valid_stage, const ProducerLane& pl, int round, bool ok) {
  const unsigned bal = __ballot_sync(0xffffffffu, ok);
  if (pl.lane == 0) valid_stage[round * 4 + pl.warp] = static_cast<uint8_t>(bal & 0xffu);
}

template <int kFmt>
struct PackedRound {
  using F = PackedRow<kFmt>;
  uint4 lat[F::kLatentChunks];
  uint4 rope[2];
  typename F::Scales sc;
  bool ok;

  __device__ void load(const AttnParams& p, const Work& w, const ProducerLane& pl, int v, int32_t idx) {
    const KeyAddr a = key_addr(p, w, v, idx);
    ok = a.page != nullptr;
    if constexpr (kVariant == 4) {  // experiment: no gathers (converts zeros)
#pragma unroll
      for (int i = 0; i < F::kLatentChunks; ++i) lat[i] = make_uint4(0, 0, 0, 0);
      rope[0] = rope[1] = make_uint4(0, 0, 0, 0);
      sc = typename F::Scales{};
      return;
    }
    if (ok) {
      const uint8_t* r = F::row(a);
#pragma unroll
      for (int i = 0; i < F::kLatentChunks; ++i) lat[i] = ldg_nc_v4_l2_256(r + i * 64 + pl.q * 16);
      rope[0] = ldg_nc_v4(F::rope(r) + pl.q * 32);
      rope[1] = ldg_nc_v4(F::rope(r) + pl.q * 32 + 16);
      sc = F::load_scales(a, r);
    }
  }

  // Dequantized into row j of the K tile; a skipped key is written as zeros (its logit is
  // masked, and zero V keeps NaN bytes of unused slots out of P V).
  __device__ void store(uint8_t* tile, const ProducerLane& pl, int j) const {
    constexpr int kRowGroup = 16 * F::kD;
    uint8_t* dst = tile + (j >> 3) * kRowGroup + (j & 7) * 16;
    const uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int i = 0; i < F::kLatentChunks; ++i) {
      uint4 lo = zero, hi = zero;
      if constexpr (kVariant == 3) {  // experiment: no conversion (raw bytes stored)
        lo = hi = ok ? lat[i] : zero;
      } else if (ok) {
        e4m3x16_to_bf16(lat[i], F::scale(sc, i), lo, hi);
      }
      const int c = 8 * i + 2 * pl.q;
      *reinterpret_cast<uint4*>(dst + c * 128) = lo;
      *reinterpret_cast<uint4*>(dst + (c + 1) * 128) = hi;
    }
    const int c = F::kLatentChunks * 8 + 2 * pl.q;
    *reinterpret_cast<uint4*>(dst + c * 128) = ok ? rope[0] : zero;
    *reinterpret_cast<uint4*>(dst + (c + 1) * 128) = ok ? rope[1] : zero;
  }
};

template <int kRows, int kD>
struct Stage {
  uint8_t* tile;
  uint8_t* valid;
  uint64_t* full;
  uint64_t* empty;
  __device__ Stage(uint8_t* smem, int s) {
    using S = Smem<kRows, kD>;
    tile = smem + S::k + s * S::kKBytes;
    valid = smem + S::valid + 16 * s;
    full = reinterpret_cast<uint64_t*>(smem + S::bars) + s;
    empty = reinterpret_cast<uint64_t*>(smem + S::bars) + kStages + s;
  }
};

__device__ __forceinline__ void init_queue(IndexQueue& iq, const AttnParams& p, const Work& w, const ProducerLane& pl) {
#pragma unroll
  for (int d = 0; d < 4; ++d) iq.v[d] = w.kb_begin + d < w.kb_end ? load_key_index(p, w, pl.pos(w.kb_begin + d)) : -1;
}

// Drops block kb, loads block kb + 4.
__device__ __forceinline__ void rotate_queue(IndexQueue& iq, const AttnParams& p, const Work& w, const ProducerLane& pl,
                                             int kb) {
  iq.v[0] = iq.v[1];
  iq.v[1] = iq.v[2];
  iq.v[2] = iq.v[3];
  iq.v[3] = kb + 4 < w.kb_end ? load_key_index(p, w, pl.pos(kb + 4)) : -1;
}

template <int kFmt>
__device__ __forceinline__ void prefetch_key(const AttnParams& p, const Work& w, const ProducerLane& pl, int kb,
                                             int32_t idx) {
  if (kb >= w.kb_end) return;
  const KeyAddr a = key_addr(p, w, pl.pos(kb), idx);
  if (a.page) PackedRow<kFmt>::prefetch_lines(a, pl.q);
}

// fp8_ds_mla / fp8_model1: global -> registers -> dequantize -> K tile.
template <int kRows, int kFmt>
__device__ void produce_packed(const AttnParams& p, const Work& w, uint8_t* smem) {
  constexpr int kD = PackedRow<kFmt>::kD;
  const ProducerLane pl;
  if (w.kb_begin >= w.kb_end) return;
  IndexQueue iq;
  init_queue(iq, p, w, pl);
  prefetch_key<kFmt>(p, w, pl, w.kb_begin, iq.v[0]);
  prefetch_key<kFmt>(p, w, pl, w.kb_begin + 1, iq.v[1]);
  PackedRound<kFmt> rd;
  for (int kb = w.kb_begin; kb < w.kb_end; ++kb) {
    const int i = kb - w.kb_begin;
    const Stage<kRows, kD> st(smem, i & 1);
    rd.load(p, w, pl, pl.pos(kb), iq.v[0]);
    prefetch_key<kFmt>(p, w, pl, kb + 2, iq.v[2]);
    rotate_queue(iq, p, w, pl, kb);
    if (i >= kStages) mbar_wait(st.empty, ((i / kStages) - 1) & 1);
    publish_valid(st.valid, pl, pl.round, rd.ok);
    rd.store(st.tile, pl, pl.row_in_block());
    fence_proxy_async();  // generic-proxy stores, read next by wgmma (async proxy)
    mbar_arrive(st.full);
  }
}

// bf16 rows need no conversion: cp.async straight into the K tile (zero-fill for skipped
// keys), one block in flight while the previous one is handed over.
template <int kRows, int kD>
__device__ void produce_bf16(const AttnParams& p, const Work& w, uint8_t* smem) {
  constexpr int kRowBytes = kD * 2;
  constexpr int kRowGroup = 16 * kD;
  const ProducerLane pl;
  if (w.kb_begin >= w.kb_end) return;
  IndexQueue iq;
  init_queue(iq, p, w, pl);
  for (int kb = w.kb_begin; kb < w.kb_end; ++kb) {
    const int i = kb - w.kb_begin;
    const Stage<kRows, kD> st(smem, i & 1);
    if (i >= kStages) mbar_wait(st.empty, ((i / kStages) - 1) & 1);
    const uint32_t tile = static_cast<uint32_t>(__cvta_generic_to_shared(st.tile));
    const int j = pl.row_in_block();
    const KeyAddr a = key_addr(p, w, pl.pos(kb), iq.v[0]);
    const bool ok = a.page != nullptr;
    const uint8_t* src = ok ? a.page + static_cast<int64_t>(a.off) * kRowBytes : p.main.base;
    const uint32_t dst = tile + (j >> 3) * kRowGroup + (j & 7) * 16;
#pragma unroll
    for (int ch = 0; ch < kRowBytes / 64; ++ch)
      cp_async_16_zfill(dst + (4 * ch + pl.q) * 128, src + ch * 64 + pl.q * 16, ok ? 16 : 0);
    publish_valid(st.valid, pl, pl.round, ok);
    cp_async_commit_group();
    rotate_queue(iq, p, w, pl, kb);
    if (i >= 1) {
      cp_async_wait_group<1>();
      fence_proxy_async();
      mbar_arrive(Stage<kRows, kD>(smem, (i - 1) & 1).full);
    }
  }
  cp_async_wait_group<0>();
  fence_proxy_async();
  mbar_arrive(Stage<kRows, kD>(smem, (w.kb_end - w.kb_begin - 1) & 1).full);
}

}  // namespace smla::cuda::sparse_decode_family
