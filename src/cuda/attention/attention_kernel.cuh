// Gather attention on tensor cores: one CTA owns up to 64 query rows (heads x tokens that share
// one key list) and walks its share of the key list in blocks of 64 keys. Each block is staged
// with cp.async while the previous one computes, dequantized to 16-bit in shared memory, then
//   S = Q K^T  (the two warps of a 16-row group split the keys and share P through shared
//               memory; fp16 and 48-row element-format CTAs have both compute the scores),
//   online softmax in registers,
//   O += P V   (the two warps of a group each own half of the 512 value columns),
// so a thread keeps 16 x 256 / 32 = 128 accumulators. 64-row bf16 CTAs run both products on
// warpgroup MMAs (wgmma; warpgroup = value-column half), the others on mma.sync m16n8k16. With
// 16 or 32 rows, key groups split each block and merge at the end. Rows padded past the real
// heads hold zeros and are never written, so they cannot leak NaN into real heads.
// docs/design/attention_sm90.md has the numbers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "cuda/attention/attention_params.h"
#include "cuda/attention/split_lookup.cuh"
#include "cuda/common/kv_load.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/common/online_softmax.cuh"
#include "cuda/common/wgmma.cuh"
#include "smla/formats.h"

namespace smla::cuda {

inline constexpr int kBlockN = 64;       // keys per block
inline constexpr int kSmemStride = 584;  // 576 + 8 halves: 1168-byte rows, ldmatrix conflict-free
inline constexpr int kDvHalf = 256;

// A CTA is RG 16-row groups x KG key groups x 2 warps (value-column halves). With few rows
// (h_q <= 32) the key groups split every key block (KG = 4: 16 keys each) so that eight warps
// still share the work, and their partial results are merged once at the end.
constexpr int key_groups(int ng) { return ng == 1 ? 4 : (ng == 2 ? 2 : 1); }
constexpr int attention_threads(int ng) { return ng * key_groups(ng) * 64; }

inline constexpr int kPStride = kBlockN + 8;  // P tile row: 144 bytes, ldmatrix conflict-free

// The two warps of a row group share P (each computes the scores of half the keys) in every
// CTA without key groups, except fp16 ones: 64-row fp16 tiles in padded rows leave no room for
// the P tiles next to 1152-byte staged rows, and 48-row tiles cost more than the recomputation.
constexpr bool shares_p(int ng, bool f16, int fmt) { return key_groups(ng) == 1 && (fmt >= 0 || (ng == 4 && !f16)); }
// 64-row bf16 CTAs that share P run both products on warpgroup MMAs (wgmma): warpgroup `half`
// computes S for its 32 keys of all 64 rows, then O for its 256 value columns. Their Q and K
// tiles are stored as wgmma core matrices (no padding) and their P tiles are XOR-swizzled.
constexpr bool uses_wgmma(int ng, bool f16, int fmt) { return shares_p(ng, f16, fmt) && ng == 4 && !f16; }

// Shared memory: Q tile, dequantized K block, the raw bytes of the next key block (filled by
// cp.async while the current block is computed), two sets of per-key slot data, with shared P
// per 16-row group the 16 x 64 P tile and the row maxima / sums the group's two warps exchange,
// and with key groups their merge data. A 64-row wgmma CTA with 1152-byte bf16 rows takes
// exactly the 227 KB limit.
constexpr size_t attention_smem_bytes(int ng, int d_qk, bool f16, int fmt, int raw_stride) {
  const bool wg = uses_wgmma(ng, f16, fmt);
  const size_t tiles = wg ? static_cast<size_t>(2 * kBlockN) * d_qk * 2 : static_cast<size_t>(ng * 16 + kBlockN) * kSmemStride * 2;
  const size_t p_tiles = shares_p(ng, f16, fmt) ? static_cast<size_t>(ng) * (16 * (wg ? kBlockN : kPStride) * 2 + 2 * 2 * 16 * 4) : 0;
  const size_t merge = key_groups(ng) > 1 ? 2 * 4 * 64 * 4 : 0;
  return tiles + static_cast<size_t>(kBlockN) * raw_stride + 2 * kBlockN * (8 + 4 + 4) + p_tiles + merge;
}

// O *= alpha of its row (fragment rows g and g + 8). Skipped when no row of the warp raised its
// running maximum (every alpha is exactly 1), the common case once the maxima settle.
__device__ __forceinline__ void rescale_rows(float (&o)[32][4], const float (&alpha)[2]) {
  if (!__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) return;
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    o[i][0] *= alpha[0];
    o[i][1] *= alpha[0];
    o[i][2] *= alpha[1];
    o[i][3] *= alpha[1];
  }
}

// The two warps of a 16-row group meet here (barrier 0 is __syncthreads).
__device__ __forceinline__ void pair_barrier(int group) {
  asm volatile("bar.sync %0, 64;\n" ::"r"(1 + group) : "memory");
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void cp_async8(uint32_t dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// kD: d_qk (576 or 512). kFmt: the cache format of every key set, or -1 to read it at run time
// (element formats, or key sets of different formats).
template <int NG, bool kF16, int kD, int kFmt>
__global__ void __launch_bounds__(attention_threads(NG), 1) attention_kernel(const AttnParams p) {
  constexpr int KG = key_groups(NG);
  constexpr int kRows = NG * 16;
  constexpr int kThreads = attention_threads(NG);
  constexpr int kKeys = kBlockN / KG;  // keys of each block this warp's key group handles
  constexpr int kNT = kKeys / 8;
  constexpr bool kShareP = shares_p(NG, kF16, kFmt);
  constexpr bool kWG = uses_wgmma(NG, kF16, kFmt);
  constexpr int kRowGroupBytes = kD * 16;  // 8 rows of a core-matrix tile
  constexpr int kTileHalves = kWG ? kBlockN * kD : kBlockN * kSmemStride;  // one Q or K tile
  constexpr int kPS = kWG ? kBlockN : kPStride;  // P tile row (halves)
  constexpr int kPhases = kThreads / kBlockN;  // threads per key when staging and dequantizing
  extern __shared__ __align__(16) uint8_t smem[];
  uint16_t* sQ = reinterpret_cast<uint16_t*>(smem);
  uint16_t* sK = sQ + (kWG ? kTileHalves : kRows * kSmemStride);
  uint8_t* sRaw = reinterpret_cast<uint8_t*>(sK + kTileHalves);                  // raw key rows, raw_stride each
  int64_t* s_addr = reinterpret_cast<int64_t*>(sRaw + kBlockN * p.raw_stride);  // [2][64] page byte offset
  int32_t* s_pos = reinterpret_cast<int32_t*>(s_addr + 2 * kBlockN);            // [2][64] key position, -1 masked
  int32_t* s_off = s_pos + 2 * kBlockN;                                          // [2][64] token offset in its page
  uint16_t* sP = reinterpret_cast<uint16_t*>(s_off + 2 * kBlockN);              // [NG][16][kPS]
  float* s_red = reinterpret_cast<float*>(sP + NG * 16 * kPS);                  // [NG][2][16] row maxima
  float* s_sum = s_red + NG * 2 * 16;                                            // [NG][2][16] row sums
  float* s_mm = reinterpret_cast<float*>(smem + attention_smem_bytes(NG, kD, kF16, kFmt, p.raw_stride)) - 2 * 4 * 64;
  float* s_ll = s_mm + 4 * 64;                                                   // [KG][kRows] merge data (KG > 1)
  // Half index of P element (row r, key column col); wgmma CTAs XOR the 16-byte chunk with the
  // row so that unpadded rows stay conflict-free for ldmatrix and the score stores.
  auto p_index = [](int r, int col) -> int {
    return kWG ? r * kBlockN + (((col >> 3) ^ (r & 7)) << 3) + (col & 7) : r * kPStride + col;
  };

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int group = kWG ? (warp & 3) : (warp >> 1), half = kWG ? (warp >> 2) : (warp & 1);
  const int rg = group % NG, kg = group / NG;  // row group, key group
  const int key0 = kg * kKeys;

  // ---- which request, split and rows this CTA owns
  int req, split_id, n_splits;
  if (is_split_launch(p)) {
    const SplitSlot s = split_slot(p, static_cast<int>(blockIdx.x));
    if (!s.active) return;
    req = s.req;
    split_id = s.split_id;
    n_splits = s.n_splits;
  } else {
    req = blockIdx.x;
    split_id = 0;
    n_splits = 1;
  }
  const int kvh = blockIdx.y / p.tiles_per_kv;
  const int hpk = p.h_q / p.h_kv;
  const int head_in_kv0 = (blockIdx.y % p.tiles_per_kv) * p.heads_tile;
  const int t0 = blockIdx.z * p.tokens_per_cta;

  // Keys of this request: sparse = main list then extra list; dense = positions [0, seqlen).
  int len_main, len_total;
  if (p.dense) {
    int64_t cap = static_cast<int64_t>(p.max_blocks) * p.main.page_size;
    int64_t s = __ldg(p.seqlens + req * p.seqlens_st);
    s = s < 0 ? 0 : (s > cap ? cap : s);
    len_main = len_total = static_cast<int>(s);
  } else {
    len_main = sparse_len(p.main, req);
    len_total = len_main + (p.has_extra ? sparse_len(p.extra, req) : 0);
  }
  const int n_blocks = (len_total + kBlockN - 1) / kBlockN;
  const int chunk = (n_blocks + n_splits - 1) / max(n_splits, 1);
  const int kb_begin = min(split_id * chunk, n_blocks);
  const int kb_end = min(kb_begin + chunk, n_blocks);

  // Byte offset of 16-byte chunk c of row r in the Q and K tiles.
  auto tile_off = [](int r, int c) -> int {
    return kWG ? (r >> 3) * kRowGroupBytes + c * 128 + (r & 7) * 16 : (r * kSmemStride + 8 * c) * 2;
  };

  // ---- Q tile: row r = (token t0 + r / heads_tile, head head_in_kv0 + r % heads_tile)
  constexpr int d_chunks = kD / 8;
  for (int i = tid; i < kRows * d_chunks; i += kThreads) {
    const int r = i / d_chunks, c = i % d_chunks;
    const int tl = r / p.heads_tile, hl = r % p.heads_tile;
    const int t = t0 + tl, hk = head_in_kv0 + hl;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (tl < p.tokens_per_cta && t < p.s_q && hk < hpk && r < kRows) {
      const int h = kvh * hpk + hk;
      const int64_t off = req * p.q_sb + t * p.q_st + h * p.q_sh;
      if (p.q_kind == 2) {
        const uint8_t* q8 = static_cast<const uint8_t*>(p.q) + off;
        v = dequant8_e4m3(__ldg(reinterpret_cast<const uint2*>(q8) + c), p.q_scale, kF16);
      } else {
        v = __ldg(reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p.q) + off) + c);
      }
    }
    *reinterpret_cast<uint4*>(reinterpret_cast<uint8_t*>(sQ) + tile_off(r, c)) = v;
  }
  if constexpr (kWG) fence_proxy_async();

  // Per-thread rows (fragment rows g and g+8 of this warp's group) and their key limits.
  const int row0 = rg * 16 + (lane >> 2);
  int limit[2];
  bool row_real[2];
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const int r = row0 + 8 * k;
    const int tl = r / p.heads_tile, hl = r % p.heads_tile;
    row_real[k] = tl < p.tokens_per_cta && t0 + tl < p.s_q && head_in_kv0 + hl < hpk;
    limit[k] = (p.dense && p.causal) ? len_total - p.s_q + (t0 + tl) : 0x7fffffff;
  }

  float o[32][4];
#pragma unroll
  for (int i = 0; i < 32; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};

  const uint32_t sQ_base = smem_addr(sQ), sK_base = smem_addr(sK);
  // wgmma descriptors of k-step 0. Later steps only move the start address (low 32 bits, no
  // carry out of its field), so the high word stays loop-invariant.
  const uint64_t desc_q = gmma_desc(sQ_base, 128, kRowGroupBytes);
  const uint64_t desc_k = gmma_desc(sK_base + half * 4 * kRowGroupBytes, 128, kRowGroupBytes);
  const uint64_t desc_v = gmma_desc(sK_base + half * 32 * 128, kRowGroupBytes, 128);
  auto desc_step = [](uint64_t d, uint32_t add) {
    return (d & 0xffffffff00000000ull) | static_cast<uint32_t>(static_cast<uint32_t>(d) + add);
  };
  const int t_sparse = t0;  // sparse CTAs own exactly one token

  // Slot data of block kb into buffer kb & 1; invalid keys are masked and never dereferenced.
  auto resolve = [&](int kb) {
    if (tid >= kBlockN) return;
    const int buf = (kb & 1) * kBlockN;
    const int v = kb * kBlockN + tid;
    int pos = -1;
    int64_t page = 0, off = 0;
    if (v < len_total) {
      const KeySetParams& ks = (p.dense || v < len_main) ? p.main : p.extra;
      int64_t blk = -1;
      if (p.dense) {
        blk = __ldg(p.block_table + req * p.bt_sb + v / ks.page_size);
        off = v % ks.page_size;
        if (blk >= ks.num_blocks) blk = -1;
      } else {
        const int j = v < len_main ? v : v - len_main;
        const int64_t idx = __ldg(ks.indices + req * ks.idx_sb + t_sparse * ks.idx_st + j);
        if (idx >= 0 && idx < ks.num_blocks * ks.page_size) {
          blk = idx / ks.page_size;
          off = idx % ks.page_size;
        }
      }
      if (blk >= 0) {
        pos = v;
        page = blk * ks.page_stride;
      }
    }
    s_pos[buf + tid] = pos;
    s_addr[buf + tid] = page;
    s_off[buf + tid] = static_cast<int32_t>(off);
  };
  // Raw bytes of block kb's valid keys into sRaw, asynchronously (no registers held).
  // Raw bytes of block kb's valid keys into sRaw, asynchronously (no registers held): kPhases
  // threads per key, each copying every kPhases-th 16-byte chunk, so the slot data is read once
  // per key and the chunk loop is plain address arithmetic.
  auto fetch = [&](int kb) {
    const int buf = (kb & 1) * kBlockN;
    const int j = tid % kBlockN, q = tid / kBlockN;
    if (s_pos[buf + j] >= 0) {
      const KeySetParams& ks = (p.dense || kb * kBlockN + j < len_main) ? p.main : p.extra;
      const uint8_t* page = ks.base + s_addr[buf + j];
      const int off = s_off[buf + j];
      const uint32_t dst = smem_addr(sRaw) + j * p.raw_stride;
      const int fmt = kFmt >= 0 ? kFmt : ks.format;
      if (fmt == static_cast<int>(CacheFormat::fp8_model1)) {
        // 576 data bytes, then the 8 scale bytes of the token's second region.
        const uint8_t* src = page + Model1Layout::data_offset(off);
        for (int c = q; c < Model1Layout::data_bytes / 16; c += kPhases) cp_async16(dst + 16 * c, src + 16 * c);
        if (q == kPhases - 1) cp_async8(dst + Model1Layout::data_bytes, page + Model1Layout::scales_offset(ks.page_size, off));
      } else {
        const int row = fmt == static_cast<int>(CacheFormat::fp8_ds_mla) ? DsMlaLayout::bytes_per_token : key_row_bytes(ks);
        const uint8_t* src = page + token_offset(ks, off, kvh);
        for (int c = q; 16 * c < row; c += kPhases) cp_async16(dst + 16 * c, src + 16 * c);
      }
    }
    cp_async_commit();
  };

  if (kb_begin < kb_end) {
    resolve(kb_begin);
    __syncthreads();
    fetch(kb_begin);
  }
  for (int kb = kb_begin; kb < kb_end; ++kb) {
    const int buf = (kb & 1) * kBlockN;
    cp_async_wait_all();
    __syncthreads();  // raw(kb) landed; the previous block's K is no longer read
    if (kb + 1 < kb_end) resolve(kb + 1);
    // Dequantize 64 keys x d_qk values from sRaw into sK. Each thread keeps one key and every
    // kPhases-th chunk of it; 8 consecutive threads take 8 consecutive keys, so each 8-thread
    // store covers distinct banks in both tile layouts.
    {
      const int j = ((tid >> 3) % 8) * 8 + (tid & 7), cq = (tid >> 6) % kPhases;
      const bool ok = s_pos[buf + j] >= 0;
      const KeySetParams& ks = (p.dense || kb * kBlockN + j < len_main) ? p.main : p.extra;
      const int fmt = kFmt >= 0 ? kFmt : ks.format;
      const float k_scale = kFmt >= 0 ? 1.0f : ks.k_scale;
      const uint8_t* raw = sRaw + j * p.raw_stride;
      uint8_t* dst = reinterpret_cast<uint8_t*>(sK) + tile_off(j, 0);
      constexpr int kChunkBytes = kWG ? 128 : 16;  // distance between chunks c and c + 1
      constexpr int kSteps = (d_chunks + kPhases - 1) / kPhases;
      auto chunk = [&](int k) {
        const int c = cq + kPhases * k;
        if (c < d_chunks) {
          const uint4 v = ok ? dequant_chunk(fmt, raw, raw + Model1Layout::data_bytes, c, k_scale, kF16)
                             : make_uint4(0, 0, 0, 0);
          *reinterpret_cast<uint4*>(dst + c * kChunkBytes) = v;
        }
      };
      if constexpr (kFmt >= 0) {
  #pragma unroll
        for (int k = 0; k < kSteps; ++k) chunk(k);
      } else {  // the run-time format switch stays in the loop: unrolling it all costs registers
  #pragma unroll 2
        for (int k = 0; k < kSteps; ++k) chunk(k);
      }
    }
    if constexpr (kWG) fence_proxy_async();
    __syncthreads();  // sK ready, sRaw free, slot data of kb + 1 visible
    if (kb + 1 < kb_end) fetch(kb + 1);

    if constexpr (kShareP) {
      // ---- S = Q K^T: this warp's 16 rows x its half of the 64 keys (32 keys)
      float s[4][4];
  #pragma unroll
      for (int i = 0; i < 4; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
      if constexpr (kWG) {
        // All 64 rows x this warpgroup's 32 keys; both operands K-major core-matrix tiles.
        wgmma_fence();
  #pragma unroll
        for (int ks = 0; ks < kD / 16; ++ks)
          wgmma_m64n32k16_ss(s, desc_step(desc_q, ks * 16), desc_step(desc_k, ks * 16));
        wgmma_commit();
        wgmma_wait_all();
        reg_fence(s);
      } else {
        const uint32_t a_addr = sQ_base + ((group * 16 + (lane & 15)) * kSmemStride + (lane >> 4) * 8) * 2;
        const uint32_t b_addr =
            sK_base + ((half * 32 + (lane >> 4) * 8 + (lane & 7)) * kSmemStride + ((lane >> 3) & 1) * 8) * 2;
  #pragma unroll 4
        for (int ks = 0; ks < kD / 16; ++ks) {
          uint32_t a[4];
          ldmatrix_x4(a, a_addr + ks * 32);
  #pragma unroll
          for (int np = 0; np < 2; ++np) {
            uint32_t b[4];
            ldmatrix_x4(b, b_addr + (np * 16 * kSmemStride) * 2 + ks * 32);
            mma_16816<kF16>(s[2 * np], a, b[0], b[1]);
            mma_16816<kF16>(s[2 * np + 1], a, b[2], b[3]);
          }
        }
      }

      // ---- mask, online softmax (log2 domain); row maxima exchanged with the partner warp
      float mx[2] = {-INFINITY, -INFINITY};
  #pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
  #pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = half * 32 + nt * 8 + 2 * (lane & 3) + (e & 1);
          const int k = e >> 1;
          const int pos = s_pos[buf + key];
          const bool ok = pos >= 0 && pos <= limit[k];
          s[nt][e] = ok ? s[nt][e] * p.scale_log2 : -INFINITY;
          mx[k] = fmaxf(mx[k], s[nt][e]);
        }
      }
      float* red = s_red + group * 32;
  #pragma unroll
      for (int k = 0; k < 2; ++k) {
        mx[k] = fmaxf(mx[k], __shfl_xor_sync(0xffffffffu, mx[k], 1));
        mx[k] = fmaxf(mx[k], __shfl_xor_sync(0xffffffffu, mx[k], 2));
        if ((lane & 3) == 0) red[half * 16 + (lane >> 2) + 8 * k] = mx[k];
      }
      pair_barrier(group);
      float alpha[2], m_use[2];
  #pragma unroll
      for (int k = 0; k < 2; ++k) {
        mx[k] = fmaxf(mx[k], red[(half ^ 1) * 16 + (lane >> 2) + 8 * k]);
        const float m_new = fmaxf(m_run[k], mx[k]);
        m_use[k] = m_new == -INFINITY ? 0.f : m_new;
        alpha[k] = exp2f(m_run[k] - m_use[k]);
        m_run[k] = m_new;
      }
      // P of this warp's keys into the group's P tile; row sums stay per warp (same alpha in both).
      uint16_t* prow = sP + group * 16 * kPS;
      float rs[2] = {0.f, 0.f};
  #pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
  #pragma unroll
        for (int k = 0; k < 2; ++k) {
          const float p0 = exp2f(s[nt][2 * k] - m_use[k]), p1 = exp2f(s[nt][2 * k + 1] - m_use[k]);
          rs[k] += p0 + p1;
          *reinterpret_cast<uint32_t*>(prow + p_index((lane >> 2) + 8 * k, half * 32 + nt * 8 + 2 * (lane & 3))) =
              pack2<kF16>(p0, p1);
        }
      }
  #pragma unroll
      for (int k = 0; k < 2; ++k) l_run[k] = l_run[k] * alpha[k] + rs[k];
      rescale_rows(o, alpha);
      pair_barrier(group);  // the group's full 16 x 64 P tile is written

      // ---- O += P V over this warp's 256 value columns
      if constexpr (kWG) {
        // P (this warp's 16 rows) from registers; V = the K tile read MN-major: 16 keys x 256 columns.
        uint32_t a[4][4];
  #pragma unroll
        for (int kk = 0; kk < 4; ++kk)
          ldmatrix_x4(a[kk], smem_addr(prow + p_index(lane & 15, kk * 16 + (lane >> 4) * 8)));
        wgmma_fence();
  #pragma unroll
        for (int kk = 0; kk < 4; ++kk)
          wgmma_m64n256k16_rs(o, a[kk], desc_step(desc_v, kk * (2 * kRowGroupBytes / 16)));
        wgmma_commit();
        wgmma_wait_all();
        reg_fence(o);
        reg_fence(a);
      } else {
        const uint32_t p_addr = smem_addr(prow) + ((lane & 15) * kPStride + (lane >> 4) * 8) * 2;
        const uint32_t v_addr = sK_base + ((((lane >> 3) & 1) * 8 + (lane & 7)) * kSmemStride +
                                           half * kDvHalf + (lane >> 4) * 8) * 2;
  #pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
          uint32_t a[4];
          ldmatrix_x4(a, p_addr + kk * 32);
  #pragma unroll
          for (int dn = 0; dn < 16; ++dn) {
            uint32_t b[4];
            ldmatrix_x4_trans(b, v_addr + (kk * 16 * kSmemStride + dn * 16) * 2);
            mma_16816<kF16>(o[2 * dn], a, b[0], b[1]);
            mma_16816<kF16>(o[2 * dn + 1], a, b[2], b[3]);
          }
        }
      }
    } else {
      // Both warps of the group compute all scores of the key group's keys (no shared P tile:
      // used with key groups, and where the staged rows leave no room for it).
      // ---- S = Q K^T for this warp's 16 rows x kKeys keys
      float s[kNT][4];
  #pragma unroll
      for (int i = 0; i < kNT; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
      const uint32_t a_addr = sQ_base + ((rg * 16 + (lane & 15)) * kSmemStride + (lane >> 4) * 8) * 2;
      const uint32_t b_addr =
          sK_base + ((key0 + (lane >> 4) * 8 + (lane & 7)) * kSmemStride + ((lane >> 3) & 1) * 8) * 2;
      for (int ks = 0; ks < kD / 16; ++ks) {
        uint32_t a[4];
        ldmatrix_x4(a, a_addr + ks * 32);
  #pragma unroll
        for (int np = 0; np < kNT / 2; ++np) {
          uint32_t b[4];
          ldmatrix_x4(b, b_addr + (np * 16 * kSmemStride) * 2 + ks * 32);
          mma_16816<kF16>(s[2 * np], a, b[0], b[1]);
          mma_16816<kF16>(s[2 * np + 1], a, b[2], b[3]);
        }
      }

      // ---- mask, online softmax (log2 domain)
      float mx[2] = {-INFINITY, -INFINITY};
  #pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
  #pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = key0 + nt * 8 + 2 * (lane & 3) + (e & 1);
          const int k = e >> 1;
          const int pos = s_pos[buf + key];
          const bool ok = pos >= 0 && pos <= limit[k];
          s[nt][e] = ok ? s[nt][e] * p.scale_log2 : -INFINITY;
          mx[k] = fmaxf(mx[k], s[nt][e]);
        }
      }
      float alpha[2], m_use[2];
  #pragma unroll
      for (int k = 0; k < 2; ++k) {
        mx[k] = fmaxf(mx[k], __shfl_xor_sync(0xffffffffu, mx[k], 1));
        mx[k] = fmaxf(mx[k], __shfl_xor_sync(0xffffffffu, mx[k], 2));
        const float m_new = fmaxf(m_run[k], mx[k]);
        m_use[k] = m_new == -INFINITY ? 0.f : m_new;
        alpha[k] = exp2f(m_run[k] - m_use[k]);
        m_run[k] = m_new;
      }
      float rs[2] = {0.f, 0.f};
  #pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
  #pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int k = e >> 1;
          s[nt][e] = exp2f(s[nt][e] - m_use[k]);
          rs[k] += s[nt][e];
        }
      }
  #pragma unroll
      for (int k = 0; k < 2; ++k) l_run[k] = l_run[k] * alpha[k] + rs[k];
      rescale_rows(o, alpha);

      // ---- O += P V over this warp's 256 value columns
      const uint32_t v_addr = sK_base + ((key0 + ((lane >> 3) & 1) * 8 + (lane & 7)) * kSmemStride +
                                         half * kDvHalf + (lane >> 4) * 8) * 2;
  #pragma unroll
      for (int kk = 0; kk < kKeys / 16; ++kk) {
        uint32_t a[4];
        a[0] = pack2<kF16>(s[2 * kk][0], s[2 * kk][1]);
        a[1] = pack2<kF16>(s[2 * kk][2], s[2 * kk][3]);
        a[2] = pack2<kF16>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
        a[3] = pack2<kF16>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
  #pragma unroll
        for (int dn = 0; dn < 16; ++dn) {
          uint32_t b[4];
          ldmatrix_x4_trans(b, v_addr + (kk * 16 * kSmemStride + dn * 16) * 2);
          mma_16816<kF16>(o[2 * dn], a, b[0], b[1]);
          mma_16816<kF16>(o[2 * dn + 1], a, b[2], b[3]);
        }
      }
    }
  }

  // ---- epilogue: row sums of both warps of the group
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    l_run[k] += __shfl_xor_sync(0xffffffffu, l_run[k], 1);
    l_run[k] += __shfl_xor_sync(0xffffffffu, l_run[k], 2);
  }
  if constexpr (kShareP) {  // each warp summed only its own keys
    float* sum = s_sum + group * 32;
#pragma unroll
    for (int k = 0; k < 2; ++k)
      if ((lane & 3) == 0) sum[half * 16 + (lane >> 2) + 8 * k] = l_run[k];
    pair_barrier(group);
#pragma unroll
    for (int k = 0; k < 2; ++k) l_run[k] += sum[(half ^ 1) * 16 + (lane >> 2) + 8 * k];
  }
  if constexpr (KG > 1) {
    // Merge the key groups' (m, l, O): O summed in shared memory (the K tile is free now).
    if (half == 0 && (lane & 3) == 0) {
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        s_mm[kg * kRows + row0 + 8 * k] = m_run[k];
        s_ll[kg * kRows + row0 + 8 * k] = l_run[k];
      }
    }
    __syncthreads();
    float scale[2];
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      float m_all = -INFINITY;
#pragma unroll
      for (int g = 0; g < KG; ++g) m_all = fmaxf(m_all, s_mm[g * kRows + row0 + 8 * k]);
      const float m_use = m_all == -INFINITY ? 0.f : m_all;
      float l_all = 0.f;
#pragma unroll
      for (int g = 0; g < KG; ++g) l_all += s_ll[g * kRows + row0 + 8 * k] * exp2f(s_mm[g * kRows + row0 + 8 * k] - m_use);
      scale[k] = exp2f(m_run[k] - m_use);
      m_run[k] = m_all;
      l_run[k] = l_all;
    }
    float* merged = reinterpret_cast<float*>(sK);  // [kRows][512] float, fits in the K tile
#pragma unroll 1
    for (int g = 0; g < KG; ++g) {
      if (kg == g) {
#pragma unroll
        for (int nt = 0; nt < 32; ++nt) {
#pragma unroll
          for (int k = 0; k < 2; ++k) {
            float2* dst = reinterpret_cast<float2*>(merged + (row0 + 8 * k) * kDv + half * kDvHalf + nt * 8 + 2 * (lane & 3));
            float2 v = make_float2(o[nt][2 * k] * scale[k], o[nt][2 * k + 1] * scale[k]);
            if (g > 0) {
              const float2 prev = *dst;
              v.x += prev.x;
              v.y += prev.y;
            }
            *dst = v;
          }
        }
      }
      __syncthreads();
    }
    if (kg != 0) return;
#pragma unroll
    for (int nt = 0; nt < 32; ++nt) {
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        const float2 v = *reinterpret_cast<const float2*>(merged + (row0 + 8 * k) * kDv + half * kDvHalf + nt * 8 + 2 * (lane & 3));
        o[nt][2 * k] = v.x;
        o[nt][2 * k + 1] = v.y;
      }
    }
  }
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    if (!row_real[k]) continue;
    const int r = row0 + 8 * k;
    const int t = t0 + r / p.heads_tile;
    const int h = kvh * hpk + head_in_kv0 + r % p.heads_tile;
    const bool empty = !(l_run[k] > 0.f);
    const float lse = empty ? -INFINITY : (m_run[k] + log2f(l_run[k])) * kLn2;
    float factor = empty ? 0.f : p.out_scale / l_run[k];
    const bool direct = n_splits == 1;
    if (direct && p.sink && !empty) {
      const float sk = __ldg(p.sink + h * p.sink_st);
      factor *= (sk == INFINITY) ? 0.f : (sk == -INFINITY ? 1.f : 1.f / (1.f + expf(sk - lse)));
    }
    if (direct) {
      uint16_t* orow = static_cast<uint16_t*>(p.out) + req * p.o_sb + t * p.o_st + h * p.o_sh + half * kDvHalf;
#pragma unroll
      for (int nt = 0; nt < 32; ++nt) {
        const uint32_t v = to16x2(o[nt][2 * k] * factor, o[nt][2 * k + 1] * factor, p.out_f16);
        *reinterpret_cast<uint32_t*>(orow + nt * 8 + 2 * (lane & 3)) = v;
      }
      if (half == 0 && (lane & 3) == 0) {
        p.lse[req * p.l_sb + t * p.l_st + h * p.l_sh] = lse;
        if (p.max_logits)
          p.max_logits[req * p.m_sb + t * p.m_st + h * p.m_sh] = empty ? -INFINITY : m_run[k] * kLn2;
      }
    } else {
      const int64_t prow = (static_cast<int64_t>(blockIdx.x) * p.s_q + t) * p.h_q + h;
      float* orow = p.part_o + prow * kDv + half * kDvHalf;
#pragma unroll
      for (int nt = 0; nt < 32; ++nt)
        *reinterpret_cast<float2*>(orow + nt * 8 + 2 * (lane & 3)) =
            make_float2(o[nt][2 * k] * factor, o[nt][2 * k + 1] * factor);
      if (half == 0 && (lane & 3) == 0) p.part_lse[prow] = lse;
    }
  }
}

}  // namespace smla::cuda
