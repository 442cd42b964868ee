// A consumer warpgroup of a kRawConsumer tile (config.h: 16/32 rows, an fp8_e4m3 cache; two of them
// take alternate blocks, RawWg): the products of consumer_narrow_wgmma.cuh with the keys in M, but
// K and V enter the tensor cores from registers, converted from the raw e4m3 rows of the ring (e4m3
// -> f16 is exact: one cvt per two values), so no bf16 K tile is written or read and a block's slot
// is refilled as soon as its P V completed. Q and P^T are f16: each head's Q is scaled by a power
// of two that puts its largest value in [2^14, 2^15) (exact; the logits take the inverse),
// and P <= 1.
//
// Both products reorder their reduction index freely and consistently with the shared operand,
// so that every lane reads whole 16-byte pieces of a row without bank conflicts (rows 608 bytes
// apart in a slot):
//   S^T = K Q^T: the A fragment of key row k holds, over four k-steps, 16 values that are one
//     16-byte piece of the row: lane quad t reads bytes 64 G + 16 t .. + 15 of d-group G, and
//     byte 16 t + 4 s + i is logical column 16 s + {2t, 2t+1, 2t+8, 2t+9}[i] of k-step 4 G + s;
//     load_q_f16 writes Q in that logical order. Fragment row g of warp w is key 16 w +
//     swap(g % 4) + 8 (g / 4) (bits 0 and 1 exchanged), row g + 8 the key four after it: the two
//     rows of a quarter warp lie two keys apart, and a thread's two keys are adjacent in P^T.
//   O^T = V^T P^T: lane (w, g) owns value columns 16 (8 w + g) .. + 15 (one 16-byte piece of a
//     row); its byte j is row 64 (j / 2) + 16 w + g + 8 (j % 2) of O^T, which the epilogue
//     undoes. Keys: fragment column c of k-step kk is key 16 kk + 4 r + t with t = c % 8 / 2,
//     r = c % 2 + 2 (c / 8), so the four lanes of a quad read four consecutive rows; P^T is
//     written in that order.
#pragma once

#include <cstdint>

#include "cuda/common/barriers.cuh"
#include "cuda/common/fp8.cuh"
#include "cuda/common/wgmma.cuh"
#include "cuda/sparse_decode/epilogue.cuh"
#include "cuda/sparse_decode/narrow_softmax.cuh"
#include "cuda/sparse_decode/producer.cuh"

namespace smla::cuda::sparse_decode_family {

// Logical position (P^T's key order) of physical key k of a block.
__device__ __forceinline__ int raw_key_logical(int k) {
  return (k & ~15) + 2 * (k & 3) + ((k >> 2) & 1) + 8 * ((k >> 3) & 1);
}

// A consumer thread's share of a kRawConsumer tile: with kRawWgs n > 1, warpgroup cw takes blocks
// cw, cw + n, ... with its own P^T tiles, maxima buffer and named barriers (wg_bar_sync). The
// thread holds S^T rows ka (fragment row g) and kb = ka + 4, logical keys l and l + 1 with l
// even, and writes both P^T entries of a head as one 4-byte word at p_ab (P^T: N x 64 keys,
// K-major core matrices, (head n, logical key k) at (n / 8) * 1024 + (k / 8) * 128 + (n % 8) *
// 16 + (k % 8) * 2). The warpgroup index comes through a shuffle so that the compiler knows it
// is warp-uniform: the P^T descriptors built from it stay in uniform registers (ncu, 16-row
// fp8_ds_mla kernel: 59 R2UR moves per block and warp in P V without it). Both together, against
// two 2-byte stores per head and the plain index (same-call A/B, 2026-12-01): dense fp8 b128
// h32 L8k 227.0 -> 218.3 µs, s_q2 h16 334.3 -> 329.8; sparse V3.2 s_q2 h16 122.3 -> 120.8, h16
// and dense h16 level.
// kDs32Roles: on the run-time roles kernel's plan (RingSmem).
template <int kRows, int kFmt, bool kDs32Roles = false>
struct RawWg {
  using S = RingSmem<kRows, kFmt, kDs32Roles>;
  static constexpr int kWgs = kRawWgs<kRows, kFmt>;
  static constexpr int kBar3 = kWgs == 3 ? 1 : 0;  // wg_bar_sync's third ids are used
  int cw, wq;          // the warpgroup, the warp within it
  int lane, g, c;      // the lane, its fragment row and column pair
  int ka, kb;          // this thread's keys (physical rows of a slot)
  uint8_t* p;          // the warpgroup's P^T tiles
  uint32_t* p_ab;      // P^T's entries of keys ka (low half) and kb for head 0 (tile 0)
  float* max_buf;      // its float[2][4][32] head maxima
  uint64_t *full, *empty;  // the ring's barriers
  const uint8_t* ok;       // uint8[kRing][64]: the row is real
  const uint8_t* ring;
  const float* qinv;       // float[32]: each head's Q factor undone (load_q_f16)
  uint64_t dq, dp;         // wgmma descriptors: Q's f16 columns, the warpgroup's P^T tiles
  __device__ explicit RawWg(uint8_t* smem)
      : cw(kWgs > 1 ? __shfl_sync(~0u, static_cast<int>(threadIdx.x >> 7), 0) : 0),
        wq(kWgs > 1 ? static_cast<int>((threadIdx.x >> 5) & 3) : static_cast<int>(threadIdx.x >> 5)),
        lane(threadIdx.x & 31),
        g(lane >> 2),
        c(lane & 3),
        ka(16 * wq + (((g & 4) << 1) | ((g & 1) << 1) | ((g >> 1) & 1))),
        kb(ka + 4),
        p(smem + S::p + cw * S::kPTiles * S::kPBytes),
        p_ab(reinterpret_cast<uint32_t*>(key_entry(p, raw_key_logical(ka)))),
        max_buf(reinterpret_cast<float*>(smem + S::merge) + cw * 256),
        full(reinterpret_cast<uint64_t*>(smem + S::bars)),
        empty(full + S::kRing),
        ok(smem + S::ok),
        ring(smem + S::ring),
        qinv(reinterpret_cast<const float*>(smem + S::qinv)),
        dq(gmma_desc(smem_addr(smem + S::q), 128, 16 * S::kQCols)),
        dp(gmma_desc(smem_addr(p), 128, 8 * 128)) {}
  __device__ static uint16_t* key_entry(uint8_t* pt, int l) {
    return reinterpret_cast<uint16_t*>(pt + (l >> 3) * 128) + (l & 7);
  }
  // The word offset of head (j, c, e)'s entries in P^T tile t (kPBytes apart).
  __device__ static constexpr int p_word(int t, int j, int c, int e) {
    return t * static_cast<int>(S::kPBytes / 4) + j * 256 + (2 * c + e) * 4;
  }
};

// The end of a block's P V: the wgmmas drained, the slot released to the producer. (Releasing
// it first, once every lane's reads have returned, measured level: dense fp8 h16 191.0 -> 191.1
// µs, sparse V3.2 h16 69.6 -> 69.2, 2026-12-01. Releasing it before the softmax, the block's 64
// value words per thread loaded into registers, measured level to slower in these 16-row tiles:
// sparse h16 68.8 -> 68.3, s_q2 h16 118.5 -> 119.5, dense fp8 h16 178.3 -> 180.9, s_q2 h16
// 324.1 -> 332.4; it pays in the 32-row fp8_ds_mla tiles' three slots, consumer_narrow_raw_ds32.cuh.)
__device__ __forceinline__ void raw_slot_release(uint64_t* empty, int lane) {
  __syncwarp();  // every lane's reads of the slot are ordered before lane 0's arrive
  if (lane == 0) mbar_arrive(empty);
}

// kRelease false: the slot went back earlier (raw_slot_release, kRawEarlyV).
template <int kMT, int kNJ, bool kRelease = true>
__device__ __forceinline__ void raw_block_end(float (&o)[kMT][kNJ][4], uint32_t (&a)[2][4][4], uint64_t* empty, int lane) {
  wgmma_wait<0>();
#pragma unroll
  for (int mi = 0; mi < kMT; ++mi) reg_fence(o[mi]);
  reg_fence(a[0]);
  reg_fence(a[1]);
  if constexpr (kRelease) raw_slot_release(empty, lane);
}

// f16 values (fp8_ds_mla tiles, kDsF16V / kDs32F16V): each scale tile's running exponent after a
// block whose largest |scale| bits per tile over the warpgroup are mx. Where one grew, its O^T
// tiles (tf[2 t], tf[2 t + 1]) take 2^(e_run - eb) (0 before the first block), else 1; returns
// whether one grew.
template <int kTiles, int kMT>
__device__ __forceinline__ bool grow_tile_exponents(const uint32_t (&mx)[kTiles], int (&e_run)[kTiles], float (&tf)[kMT]) {
  static_assert(kMT == 2 * kTiles, "two O^T tiles per scale tile");
  bool grew = false;
#pragma unroll
  for (int t = 0; t < kTiles; ++t) {
    const int eb = max(static_cast<int>(mx[t] >> 23), 7);
    const float rt = eb > e_run[t] ? __int_as_float(max(127 + e_run[t] - eb, 0) << 23) : 1.f;
    grew |= eb > e_run[t];
    e_run[t] = max(e_run[t], eb);
    tf[2 * t] = tf[2 * t + 1] = rt;
  }
  return grew;
}

// f16 values: lane c < kTiles's result is scale tile c's largest |scale| over the warp's keys (sa,
// sb: this thread's two keys' scales), as bits (positive floats order as their bits); 0 elsewhere.
template <int kTiles>
__device__ __forceinline__ uint32_t warp_tile_scale_max(const float (&sa)[kTiles], const float (&sb)[kTiles], int c) {
  uint32_t tmax = 0;
#pragma unroll
  for (int t = 0; t < kTiles; ++t) {
    const uint32_t m = __reduce_max_sync(0xffffffffu, max(__float_as_uint(sa[t]), __float_as_uint(sb[t])) & 0x7fffffffu);
    tmax = c == t ? m : tmax;
  }
  return tmax;
}

// One P^T word of the fp8_ds_mla tiles: a head's P of this thread's two keys (p0, p1) times their
// scale-tile factors (s0, s1); kF16: in f16 times 2^(133 - e_tile), e_tile the tile's running
// exponent (P . scale . 2^(133 - e) < 2^8 . 2^7), else in bf16 (times kDsIntV's 2^60 when set).
template <bool kF16>
__device__ __forceinline__ uint32_t ds_p_word(float p0, float p1, float s0, float s1, int e_tile) {
  if constexpr (kF16) {
    const float f = __int_as_float((260 - e_tile) << 23);
    const __half2 pv = __floats2half2_rn(p0 * (s0 * f), p1 * (s1 * f));
    return *reinterpret_cast<const uint32_t*>(&pv);
  } else {
    const __nv_bfloat162 pv =
        __floats2bfloat162_rn(p0 * (kDsIntV ? s0 * kDsIntVFactor : s0), p1 * (kDsIntV ? s1 * kDsIntVFactor : s1));
    return *reinterpret_cast<const uint32_t*>(&pv);
  }
}

// The A fragments of four S^T k-steps from one 16-byte piece of each of the thread's two keys
// (wa: row ka, wb: row kb), e4m3 -> f16 exact: k-step s takes words wa[s], wb[s], their lower
// value pairs first (the column order load_q_f16 writes Q in).
__device__ __forceinline__ void key_words_to_frags(const uint32_t* wa, const uint32_t* wb, uint32_t (&a)[4][4]) {
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    a[s][0] = e4m3x2_to_f16x2(wa[s]);
    a[s][1] = e4m3x2_to_f16x2(wb[s]);
    a[s][2] = e4m3x2_hi_to_f16x2(wa[s]);
    a[s][3] = e4m3x2_hi_to_f16x2(wb[s]);
  }
}

// The A fragments of kSteps RoPE k-steps: bf16 pairs as stored, no conversion; k-step s takes
// words 2 s and 2 s + 1 of each of the thread's two keys (wa: row ka, wb: row kb).
template <int kSteps>
__device__ __forceinline__ void rope_words_to_frags(const uint32_t* wa, const uint32_t* wb, uint32_t (&a)[4][4]) {
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    a[s][0] = wa[2 * s];
    a[s][1] = wb[2 * s];
    a[s][2] = wa[2 * s + 1];
    a[s][3] = wb[2 * s + 1];
  }
}

// How the raw-ring consumers take e4m3 values into P V's register operands.
enum class ValueConversion { f16, bf16_int, bf16_float };
// Four keys' words of the same four value columns (x0..x3: keys 4 r + c of a k-step, r = 0..3)
// as the A fragments of two O^T tiles: bytes 0/1 into lo, bytes 2/3 into hi (each a fragment's
// four registers: value pairs of keys (x0, x1) and (x2, x3)). f16: the bytes of two keys paired
// (prmt) and converted exactly (cvt); bf16_int: exact on the integer pipes, times 2^-120;
// bf16_float: e4m3 -> f16 -> f32 -> bf16, exact.
template <ValueConversion kConv>
__device__ __forceinline__ void value_words_to_frags(uint32_t x0, uint32_t x1, uint32_t x2, uint32_t x3, uint32_t (&lo)[4],
                                                     uint32_t (&hi)[4]) {
  if constexpr (kConv == ValueConversion::bf16_int) {
    lo[0] = e4m3_pair_to_bf16x2_2m120<0>(x0, x1);
    lo[1] = e4m3_pair_to_bf16x2_2m120<1>(x0, x1);
    lo[2] = e4m3_pair_to_bf16x2_2m120<0>(x2, x3);
    lo[3] = e4m3_pair_to_bf16x2_2m120<1>(x2, x3);
    hi[0] = e4m3_pair_to_bf16x2_2m120<2>(x0, x1);
    hi[1] = e4m3_pair_to_bf16x2_2m120<3>(x0, x1);
    hi[2] = e4m3_pair_to_bf16x2_2m120<2>(x2, x3);
    hi[3] = e4m3_pair_to_bf16x2_2m120<3>(x2, x3);
    return;
  }
  const uint32_t lo01 = __byte_perm(x0, x1, 0x5140), hi01 = __byte_perm(x0, x1, 0x7362);
  const uint32_t lo23 = __byte_perm(x2, x3, 0x5140), hi23 = __byte_perm(x2, x3, 0x7362);
  if constexpr (kConv == ValueConversion::f16) {
    lo[0] = e4m3x2_to_f16x2(lo01);
    lo[1] = e4m3x2_hi_to_f16x2(lo01);
    lo[2] = e4m3x2_to_f16x2(lo23);
    lo[3] = e4m3x2_hi_to_f16x2(lo23);
    hi[0] = e4m3x2_to_f16x2(hi01);
    hi[1] = e4m3x2_hi_to_f16x2(hi01);
    hi[2] = e4m3x2_to_f16x2(hi23);
    hi[3] = e4m3x2_hi_to_f16x2(hi23);
  } else {
    lo[0] = e4m3x2_to_bf16x2(lo01, 1.f);
    lo[1] = e4m3x2_to_bf16x2(lo01 >> 16, 1.f);
    lo[2] = e4m3x2_to_bf16x2(lo23, 1.f);
    lo[3] = e4m3x2_to_bf16x2(lo23 >> 16, 1.f);
    hi[0] = e4m3x2_to_bf16x2(hi01, 1.f);
    hi[1] = e4m3x2_to_bf16x2(hi01 >> 16, 1.f);
    hi[2] = e4m3x2_to_bf16x2(hi23, 1.f);
    hi[3] = e4m3x2_to_bf16x2(hi23 >> 16, 1.f);
  }
}

// The largest magnitude of eight bf16 values.
__device__ __forceinline__ float absmax8_bf16(const uint4& v) {
  const uint32_t wds[4] = {v.x, v.y, v.z, v.w};
  float mx = 0.f;
#pragma unroll
  for (int k = 0; k < 4; ++k)
    mx = fmaxf(mx, fmaxf(fabsf(__uint_as_float(wds[k] << 16)), fabsf(__uint_as_float(wds[k] & 0xffff0000u))));
  return mx;
}

// Q's 16-byte chunk ch (bf16 columns 8 ch .. 8 ch + 7) of row r into its tile, times f (f16),
// or into the RoPE tile as it is (fp8_ds_mla's columns past the latent ones).
template <int kRows, int kFmt, bool kDs32Roles = false>
__device__ __forceinline__ void store_q_chunk(uint8_t* smem, int r, int ch, const uint4& v, float f) {
  using S = RingSmem<kRows, kFmt, kDs32Roles>;
  constexpr int kQChunks = S::kQCols / 8;
  const uint32_t wds[4] = {v.x, v.y, v.z, v.w};
  // Physical columns 8 ch .. 8 ch + 7: d-group ch / 8, quad lane t = ch % 8 / 2, k-steps
  // s0 = 2 (ch % 2) and s0 + 1; value pairs (0,1), (2,3) of a k-step go to logical columns
  // 2t, 2t+1 and 2t+8, 2t+9.
  const int grp = ch >> 3, t = (ch & 7) >> 1, s0 = 2 * (ch & 1);
  const bool rope = S::kDs && ch >= kQChunks;  // fp8_ds_mla's RoPE columns: bf16 as they are
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int col = 64 * grp + 16 * (s0 + (k >> 1)) + 2 * t + 8 * (k & 1);
    if (rope) {
      const int rc = col - S::kQCols;
      *reinterpret_cast<uint32_t*>(smem + S::q_rope + tile_offset<64>(r, rc >> 3) + (rc & 7) * 2) = wds[k];
      continue;
    }
    const __half2 h = __floats2half2_rn(__uint_as_float(wds[k] << 16) * f, __uint_as_float(wds[k] & 0xffff0000u) * f);
    *reinterpret_cast<__half2*>(smem + S::q + tile_offset<S::kQCols>(r, col >> 3) + (col & 7) * 2) = h;
  }
}

// Q rows r < heads of this tile's token, as f16 scaled by 2^(15 - e_r) (e_r: the exponent
// bound of the row's largest magnitude), in S^T's logical column order; padded rows are zeros.
// qinv[r] = 2^(e_r - 15) undoes the scale on the logits. fp8_ds_mla: the 512 latent columns so,
// the 64 RoPE columns as bf16 unscaled into their own tile (same column order within each
// 64-column group). kQOnePass (config.h, the default): each warp loads whole rows once, keeps
// their chunks in registers for the row's maximum and converts them itself; otherwise two passes
// (the maxima, then every thread converts chunks loaded again from L2).
template <int kRows, int kFmt, bool kDs32Roles = false>
__device__ __forceinline__ void load_q_f16(const AttnParams& p, const Work& w, uint8_t* smem) {
  using S = RingSmem<kRows, kFmt, kDs32Roles>;
  constexpr int kD = S::kD, kChunks = kD / 8, kQChunks = S::kQCols / 8, kThreads = raw_consumer_threads<kRows, kFmt>();
  const uint16_t* q = unit_q(p, w);
  float* qinv = reinterpret_cast<float*>(smem + S::qinv);
  const int lane = threadIdx.x & 31, wq = threadIdx.x >> 5;
  auto row_factor = [&](int r, float mx) {  // the warp's maximum of row r -> Q's factor (qinv[r] its inverse)
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    int e = 0;
    if (mx > 0.f && isfinite(mx)) frexpf(mx, &e);
    if (lane == 0) qinv[r] = ldexpf(1.f, e - 15);
    return ldexpf(1.f, 15 - e);
  };
  if constexpr (kQOnePass) {
    constexpr int kWarps = kThreads / 32, kPerWarp = (kRows + kWarps - 1) / kWarps, kIt = (kChunks + 31) / 32;
    uint4 v[kPerWarp][kIt];  // every load of the warp's rows issued before the first use
#pragma unroll
    for (int k = 0; k < kPerWarp; ++k)
#pragma unroll
      for (int it = 0; it < kIt; ++it) {
        const int r = wq + k * kWarps, ch = lane + 32 * it;
        v[k][it] = make_uint4(0, 0, 0, 0);
        if (r < w.heads && ch < kChunks) v[k][it] = __ldg(reinterpret_cast<const uint4*>(q + r * p.q_sh) + ch);
      }
#pragma unroll
    for (int k = 0; k < kPerWarp; ++k) {
      const int r = wq + k * kWarps;
      if (kRows % kWarps != 0 && r >= kRows) break;  // warp-uniform
      float mx = 0.f;
#pragma unroll
      for (int it = 0; it < kIt; ++it)
        if (lane + 32 * it < kQChunks) mx = fmaxf(mx, absmax8_bf16(v[k][it]));
      const float f = row_factor(r, mx);
      if (kRoleMarks<kDs32Roles> && k == 0 && threadIdx.x == 0) role_mark(15, 0);
#pragma unroll
      for (int it = 0; it < kIt; ++it)
        if (lane + 32 * it < kChunks) store_q_chunk<kRows, kFmt, kDs32Roles>(smem, r, lane + 32 * it, v[k][it], f);
    }
  } else {
    for (int r = wq; r < kRows; r += kThreads / 32) {
      float mx = 0.f;
      if (r < w.heads)
        for (int ch = lane; ch < kQChunks; ch += 32)
          mx = fmaxf(mx, absmax8_bf16(__ldg(reinterpret_cast<const uint4*>(q + r * p.q_sh) + ch)));
      row_factor(r, mx);
    }
    named_bar_sync(kBarQReady, kThreads);
    for (int i = threadIdx.x; i < kRows * kChunks; i += kThreads) {
      const int r = i / kChunks, ch = i % kChunks;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (r < w.heads) v = __ldg(reinterpret_cast<const uint4*>(q + r * p.q_sh) + ch);
      store_q_chunk<kRows, kFmt, kDs32Roles>(smem, r, ch, v, 1.f / qinv[r]);
    }
  }
  fence_proxy_async();  // Q is read by wgmma
  if (kRoleMarks<kDs32Roles> && threadIdx.x == 0) role_mark(16, 0);
  named_bar_sync(kBarQReady, kThreads);
}

template <int kRows>
__device__ void consume_narrow_raw(const AttnParams& p, const Work& w, uint8_t* smem) {
  constexpr int kFmt = static_cast<int>(CacheFormat::fp8_e4m3);
  constexpr int kRawRingStride = sparse_decode_family::kRawRingStride<kFmt>;
  using S = RingSmem<kRows, kFmt>;
  constexpr int kD = S::kD;
  constexpr int N = kRows;        // heads: the wgmma N dimension
  constexpr int kNJ = N / 8;      // 8-head column tiles of S^T and O^T
  constexpr int kMT = kDv / 64;   // 64-row tiles of O^T
  constexpr int kThreads = 128;  // one consumer warpgroup's (kRawWgs 2: two, each over its own blocks)
  const RawWg<kRows, kFmt> wg(smem);
  const int lane = wg.lane, wq = wg.wq, g = wg.g, c = wg.c, ka = wg.ka, kb_ = wg.kb;
  auto head_of = [&](int j, int e) { return 8 * j + 2 * c + e; };
  float* s_max = wg.max_buf;
  const float* qinv = wg.qinv;
  uint8_t* s_p = wg.p;
  uint64_t *full = wg.full, *empty = wg.empty;
  const uint8_t *ok_bytes = wg.ok, *ring = wg.ring;
  uint32_t* p_ab = wg.p_ab;
  const uint64_t dq = wg.dq, dp = wg.dp;
  float qs[kNJ][2];  // logits' scale of this thread's heads: log2(e) / sqrt(d) (and k_scale) / Q's factor
#pragma unroll
  for (int j = 0; j < kNJ; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) qs[j][e] = p.scale_log2 * qinv[head_of(j, e)];

  float o[kMT][kNJ][4], m_run[kNJ][2], l_run[kNJ][2];
  narrow_state_init(o, m_run, l_run);

  for (int i = wg.cw; i < w.kb_end - w.kb_begin; i += wg.kWgs) {
    const int slot = i % S::kRing;
    mbar_wait(full + slot, (i / S::kRing) & 1);
    const uint8_t* blk = ring + slot * S::kSlotBytes;

    // ---- S^T = K Q^T, one 64-column d-group (four k-steps) at a time; the next group's
    // fragments are converted while the previous group's wgmmas run.
    float s[kNJ][4];
    uint32_t a[2][4][4];
    const uint8_t* row_a = blk + ka * kRawRingStride + 16 * c;
    const uint8_t* row_b = blk + kb_ * kRawRingStride + 16 * c;
#pragma unroll
    for (int grp = 0; grp < kD / 64; ++grp) {
      const uint4 va = *reinterpret_cast<const uint4*>(row_a + 64 * grp);
      const uint4 vb = *reinterpret_cast<const uint4*>(row_b + 64 * grp);
      const uint32_t wa[4] = {va.x, va.y, va.z, va.w}, wb[4] = {vb.x, vb.y, vb.z, vb.w};
      if (grp >= 2) {
        wgmma_wait<1>();  // group grp - 2 has read a[grp % 2]
        reg_fence(a[grp & 1]);
      }
      key_words_to_frags(wa, wb, a[grp & 1]);
      wgmma_fence();
#pragma unroll
      for (int st = 0; st < 4; ++st)
        wgmma_m64nNk16_rs<N, false>(s, a[grp & 1][st], desc_add(dq, (4 * grp + st) * 16), grp > 0 || st > 0);
      wgmma_commit();
    }
    wgmma_wait<0>();
    reg_fence(s);
    reg_fence(a[0]);
    reg_fence(a[1]);

    // ---- mask, scale; each head's maximum over this thread's keys, the 8 lanes g, the 4 warps
    const bool ok0 = ok_bytes[slot * kKeys + ka] != 0, ok1 = ok_bytes[slot * kKeys + kb_] != 0;
    narrow_block_softmax<kNJ, kMT, kThreads, wg.kWgs, kRawLazy<false>>(s, ok0, ok1, [&](int j, int e) { return qs[j][e]; },
                                             s_max + ((i / wg.kWgs) & 1) * 128, wq, g, c, m_run, l_run, o, wg.cw);

    // ---- P^T (f16) into shared memory at the keys' logical positions (the previous block's
    // P V completed in every warp before that warp reached this block's barrier above)
#pragma unroll
    for (int j = 0; j < kNJ; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {  // (head 8j + 2c + e): 1024 B per 8 heads
        const __half2 pv = __floats2half2_rn(s[j][e], s[j][2 + e]);
        p_ab[RawWg<kRows, kFmt>::p_word(0, j, c, e)] = *reinterpret_cast<const uint32_t*>(&pv);
      }
    fence_proxy_async();  // read next by wgmma
    wg_bar_sync<kBarPReady, kBarPReady2, wg.kBar3 ? kBarPReady3 : -1>(wg.cw, kThreads);

    // ---- O^T += V^T P^T: per k-step kk (16 keys) this lane reads its 16-byte piece of four
    // rows (keys 16 kk + 4 r + c), pairs their bytes (PRMT) and converts; two halves of the
    // eight 64-row tiles, the next half converted while the previous one's wgmmas run.
    const uint8_t* vcol = blk + 16 * (8 * wq + g) + c * kRawRingStride;
    uint4 raw[4];
#pragma unroll
    for (int h = 0; h < 8; ++h) {
      const int kk = h >> 1, half = h & 1;
      if (half == 0) {
#pragma unroll
        for (int r = 0; r < 4; ++r)
          raw[r] = *reinterpret_cast<const uint4*>(vcol + (16 * kk + 4 * r) * kRawRingStride);
      }
      if (h >= 2) {
        wgmma_wait<1>();
        reg_fence(a[h & 1]);
      }
#pragma unroll
      for (int wd = 0; wd < 2; ++wd) {  // words 2 half + wd: tiles mt = 4 half + 2 wd, + 1
        const int word = 2 * half + wd;
        // tile 2 wd (of this half): bytes 0/1 of the word; tile 2 wd + 1: bytes 2/3
        value_words_to_frags<ValueConversion::f16>((&raw[0].x)[word], (&raw[1].x)[word], (&raw[2].x)[word], (&raw[3].x)[word],
                                                   a[h & 1][2 * wd], a[h & 1][2 * wd + 1]);
      }
      wgmma_fence();
#pragma unroll
      for (int m4 = 0; m4 < 4; ++m4) wgmma_m64nNk16_rs<N, false>(o[4 * half + m4], a[h & 1][m4], desc_add(dp, kk * 16), 1);
      wgmma_commit();
    }
    raw_block_end(o, a, empty + slot, lane);
  }

  // ---- row sums, lse, O^T out through shared memory (s_l over P^T, O^T over the ring: every
  // copy has landed and been read). Tile mi's rows g and g + 8 of warp wq are value columns
  // 16 (8 wq + g) + 2 mi and + 1.
  const int col0 = 16 * (8 * wq + g);
  auto col = [&](int mi, int half) { return col0 + 2 * mi + half; };
  narrow_epilogue<kNJ, kMT, kThreads, false, decltype(col), wg.kWgs>(
      p, w, reinterpret_cast<float*>(s_p), reinterpret_cast<float*>(smem + S::ring), o, m_run, l_run, wq, g, c, col, wg.cw,
      reinterpret_cast<float*>(smem + S::heads));
}

}  // namespace smla::cuda::sparse_decode_family
