// The consumer warpgroups of the FP8 tiles (kDenseE4m3Fp8: dense decode of an fp8_e4m3 cache
// with fp8 q, 64 rows, d_qk 576), in the shipped 64-row schedule (consumer_wide.cuh):
//   WG0: S = Q K^T as 18 e4m3 wgmmas m64n64k32 (Q and the K tile as they are, both K-major),
//        mask, online softmax, P x 256 into e4m3 hi + lo tiles with the row rescale factors,
//        then O[:, 0:256] += P_hi V + P_lo V (8 x m64n128k32, P and V^T from shared memory);
//   WG1: waits for P, rescales O[:, 256:512], adds P_hi V + P_lo V for its half.
// P x 256 <= 256 fits e4m3 (max 448), and the two parts keep ~8 significant bits of P down to
// 2^-17 (bench/micro/fp8_pv_transpose.cu checked the V^T layout and the product); O comes out
// 256 times too large, which the final factor takes back. The row sums use P in float32.
// Q (e4m3, q_scale in the logits' scale) is loaded once into nine boxes of the K tiles' layout.
// SMLA_SD_E4M3_FP8_PROMOTE=1: QK^T in three sums of 192 values added in float32 (the tensor
// cores' own sum of e4m3 products keeps fewer bits), for when lse needs it.
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

#include "cuda/common/online_softmax.cuh"
#include "cuda/common/wgmma_fp8.cuh"
#include "cuda/sparse_decode/consumer_wide.cuh"
#include "cuda/sparse_decode/epilogue.cuh"
#include "cuda/sparse_decode/fp8_tiles.cuh"
#include "cuda/sparse_decode/producer.cuh"
#include "cuda/sparse_decode/q_e4m3.cuh"

namespace smla::cuda::sparse_decode_family {

inline constexpr float kFp8PScale = 256.f;

// Q rows r < heads (e4m3 bytes, 8 at a time; rows not 8-byte aligned a byte at a time) into
// nine boxes of 64 rows x 64 bytes with the 64-byte swizzle; padded rows are zeros.
__device__ __forceinline__ void load_q_e4m3(const AttnParams& p, const Work& w, uint8_t* smem) {
  constexpr int kChunks = 576 / 8, kTotal = 64 * kChunks, kPer = kTotal / kConsumerThreads;
  static_assert(kTotal % kConsumerThreads == 0, "whole rounds");
  uint2 b[kPer];
  load_q_e4m3_chunks<64, 576, kConsumerThreads>(p, w, b);
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int i = static_cast<int>(threadIdx.x) + k * kConsumerThreads;
    const int r = i / kChunks, ch = i % kChunks;
    *reinterpret_cast<uint2*>(smem + Fp8Smem::q + (ch >> 3) * Fp8Smem::kBox + sw64_offset(r, (ch & 7) >> 1) + (ch & 1) * 8) = b[k];
  }
  fence_proxy_async();  // Q is read by wgmma
  named_bar_sync(kBarQReady, kConsumerThreads);
}

// x0, x1 (keys k, k + 1 of row r, k even) into the hi and lo P tiles.
__device__ __forceinline__ void store_p_fp8(const Fp8Tiles& t, int r, int k, float x0, float x1) {
  const __nv_fp8x2_storage_t hi = __nv_cvt_float2_to_fp8x2(make_float2(x0, x1), __NV_SATFINITE, __NV_E4M3);
  const float2 back = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(hi, __NV_E4M3)));
  const __nv_fp8x2_storage_t lo = __nv_cvt_float2_to_fp8x2(make_float2(x0 - back.x, x1 - back.y), __NV_SATFINITE, __NV_E4M3);
  const uint32_t off = sw64_offset(r, k >> 4) + (k & 15);
  *reinterpret_cast<__nv_fp8x2_storage_t*>(t.p_tile(0) + off) = hi;
  *reinterpret_cast<__nv_fp8x2_storage_t*>(t.p_tile(1) + off) = lo;
}

// O[:, col0 .. col0 + 255] += P_hi V + P_lo V, V^T of stage sv (issued and committed).
__device__ __forceinline__ void pv_fp8(float (&o)[32][4], const Fp8Tiles& t, int sv, int col0) {
  const uint64_t dv0 = t.vt_desc(sv, col0), dv1 = t.vt_desc(sv, col0 + 128);
  wgmma_fence();
#pragma unroll
  for (int part = 0; part < 2; ++part) {
    const uint64_t dp = gmma_desc_sw64(smem_addr(t.p_tile(part)));
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
      wgmma_m64n128k32_ss_e4m3(o_lo(o), desc_add(dp, 2 * kk), desc_add(dv0, 2 * kk), 1);
      wgmma_m64n128k32_ss_e4m3(o_hi(o), desc_add(dp, 2 * kk), desc_add(dv1, 2 * kk), 1);
    }
  }
  wgmma_commit();
}

inline __device__ void consume_fp8_wg0(const AttnParams& p, const Work& w, uint8_t* smem) {
  const Fp8Tiles t{smem};
  const int lane = threadIdx.x & 31, wq = (threadIdx.x >> 5) & 3;
  const int g = lane >> 2, c = lane & 3;
  const int r0 = 16 * wq + g, r1 = r0 + 8;
  float* s_scale = reinterpret_cast<float*>(smem + Fp8Smem::scale);
  float* s_factor = reinterpret_cast<float*>(smem + Fp8Smem::factor);
  float o[32][4];
#pragma unroll
  for (int i = 0; i < 32; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  RowState st0, st1;
  const uint64_t dq = gmma_desc_sw64(smem_addr(smem + Fp8Smem::q));

  for (int kb = w.kb_begin; kb < w.kb_end; ++kb) {
    const int i = kb - w.kb_begin, sk = i % Fp8Smem::kKStages, sv = i & 1;
    mbar_wait(t.k_full(sk), (i / Fp8Smem::kKStages) & 1);
    // ---- S = Q K^T: 64 heads x 64 keys (the valid-key words read first: config.h kMaskEarly)
    const uint64_t valid_early = kMaskEarly ? block_valid_mask(t.valid(sk)) : 0;
    float sc[8][4];
    const uint64_t dk = gmma_desc_sw64(smem_addr(t.k_tile(sk)));
    // kFp8Promote: three sums of 192 values (into `part`), added in float32; else one of 576
    constexpr int kChunks = kFp8Promote ? 3 : 1, kSteps = 576 / 32 / kChunks;
    float part[8][4];
    float (&acc)[8][4] = kFp8Promote ? part : sc;
#pragma unroll
    for (int chunk = 0; chunk < kChunks; ++chunk) {
      wgmma_fence();
#pragma unroll
      for (int ks = kSteps * chunk; ks < kSteps * (chunk + 1); ++ks)
        wgmma_m64n64k32_ss_e4m3(acc, desc_add(dq, Fp8Tiles::qk_step(ks)), desc_add(dk, Fp8Tiles::qk_step(ks)), ks > kSteps * chunk);
      wgmma_commit();
      wgmma_wait<0>();
      reg_fence(acc);
      if constexpr (kFp8Promote) {
#pragma unroll
        for (int nt = 0; nt < 8; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) sc[nt][e] = chunk == 0 ? part[nt][e] : sc[nt][e] + part[nt][e];
      }
    }
    const uint64_t valid = kMaskEarly ? valid_early : block_valid_mask(t.valid(sk));
    __syncwarp();
    if (lane == 0) mbar_arrive(t.k_empty(sk));  // QK^T is done with the tile (the transpose arrives too)

    // ---- mask, online softmax (log2 domain; exact maxima: P <= 1)
    float mx0, mx1;
    mask_rowmax(sc, valid, c, mx0, mx1);
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)  // scaled in place: the exponents' FFMA form spills the promoted build
#pragma unroll
      for (int e = 0; e < 4; ++e) sc[nt][e] *= p.scale_log2;
    float m0, m1;
    const float a0 = update_max(st0, quad_max(mx0) * p.scale_log2, m0), a1 = update_max(st1, quad_max(mx1) * p.scale_log2, m1);
    if (i > 0) named_bar_sync(kBarPFree, kConsumerThreads);  // WG1 has read the last P
    float rs0 = 0.f, rs1 = 0.f;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      const float e0 = exp2f(sc[nt][0] - m0), e1 = exp2f(sc[nt][1] - m0);
      const float e2 = exp2f(sc[nt][2] - m1), e3 = exp2f(sc[nt][3] - m1);
      rs0 += e0 + e1;
      rs1 += e2 + e3;
      store_p_fp8(t, r0, 8 * nt + 2 * c, e0 * kFp8PScale, e1 * kFp8PScale);
      store_p_fp8(t, r1, 8 * nt + 2 * c, e2 * kFp8PScale, e3 * kFp8PScale);
    }
    st0.l = st0.l * a0 + rs0;
    st1.l = st1.l * a1 + rs1;
    if (c == 0) {
      s_scale[r0] = a0;
      s_scale[r1] = a1;
    }
    fence_proxy_async();  // WG1 and this warpgroup read P with wgmma
    named_bar_arrive(kBarPReady, kConsumerThreads);
    named_bar_sync(kBarFp8POwn, 128);  // every warp's P is in before this warpgroup's wgmmas read it

    // ---- O[:, 0:256] += P V
    rescale_o(o, a0, a1);
    mbar_wait(t.v_full(sv), (i >> 1) & 1);
    pv_fp8(o, t, sv, 0);
    wgmma_wait<0>();
    reg_fence(o);
    __syncwarp();
    if (lane == 0) mbar_arrive(t.v_empty(sv));
  }

  // ---- epilogue: full row sums, final factors for WG1, this half of O
  if (w.kb_end > w.kb_begin) named_bar_sync(kBarPFree, kConsumerThreads);  // WG1 is past its last P
  st0.l = quad_sum(st0.l);
  st1.l = quad_sum(st1.l);
  const RowResult res0 = finish_row_as<kWideFastEnd>(p, w, w.head0 + r0, st0.m, st0.l, r0 < w.heads);
  const RowResult res1 = finish_row_as<kWideFastEnd>(p, w, w.head0 + r1, st1.m, st1.l, r1 < w.heads);
  const float f0 = res0.factor / kFp8PScale, f1 = res1.factor / kFp8PScale;  // O is 256 times P V
  if (c == 0) {
    s_factor[r0] = f0;
    s_factor[r1] = f1;
  }
  named_bar_arrive(kBarFinal, kConsumerThreads);
  if (r0 < w.heads) {
    store_o_row(p, w, w.head0 + r0, 0, o, 0, f0);
    if (c == 0) store_lse(p, w, w.head0 + r0, res0.lse);
  }
  if (r1 < w.heads) {
    store_o_row(p, w, w.head0 + r1, 0, o, 1, f1);
    if (c == 0) store_lse(p, w, w.head0 + r1, res1.lse);
  }
}

inline __device__ void consume_fp8_wg1(const AttnParams& p, const Work& w, uint8_t* smem) {
  const Fp8Tiles t{smem};
  const int lane = threadIdx.x & 31, wq = (threadIdx.x >> 5) & 3;
  const int r0 = 16 * wq + (lane >> 2), r1 = r0 + 8;
  const float* s_scale = reinterpret_cast<const float*>(smem + Fp8Smem::scale);
  const float* s_factor = reinterpret_cast<const float*>(smem + Fp8Smem::factor);
  float o[32][4];
#pragma unroll
  for (int i = 0; i < 32; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;

  for (int kb = w.kb_begin; kb < w.kb_end; ++kb) {
    const int i = kb - w.kb_begin, sv = i & 1;
    named_bar_sync(kBarPReady, kConsumerThreads);
    rescale_o(o, s_scale[r0], s_scale[r1]);
    mbar_wait(t.v_full(sv), (i >> 1) & 1);
    pv_fp8(o, t, sv, 256);
    wgmma_wait<0>();
    reg_fence(o);
    named_bar_arrive(kBarPFree, kConsumerThreads);
    __syncwarp();
    if (lane == 0) mbar_arrive(t.v_empty(sv));
  }

  named_bar_sync(kBarFinal, kConsumerThreads);
  if (r0 < w.heads) store_o_row(p, w, w.head0 + r0, 256, o, 0, s_factor[r0]);
  if (r1 < w.heads) store_o_row(p, w, w.head0 + r1, 256, o, 1, s_factor[r1]);
}

}  // namespace smla::cuda::sparse_decode_family
