// Host side of the warp-specialized sparse-decode kernel family: which configurations it takes,
// its head tiling, and the launch of one instantiation.
#pragma once

#include <cuda_runtime.h>

#include "cuda/attention/attention_params.h"

namespace smla::cuda::sparse_decode_family {

// Rows of a CTA's head tile: 16 or 32 (mma.sync, h_q <= 32) or 64 (wgmma).
int tile_rows(int h_q);
// Whether the family takes key sets of these formats at this d_qk (both sets one format).
bool takes(int format, int extra_format, bool has_extra, int d_qk);
// Whether the family takes a dense decode (keys from the block table; work.cuh): bf16 q and
// out, one KV head whose rows hold exactly d_qk values, every slot of the cache numbered by an
// int32, and a bf16 cache (d_qk 576 or 512) or an fp8_e4m3 one (d_qk 576, h_q <= 32: the
// 16/32-row tiles whose rows the TMA unit copies, so a 16-byte aligned base and page stride).
bool takes_dense(int q_kind, bool out_f16, int format, int h_kv, int row_elems, int d_qk, int64_t num_blocks,
                 int page_size, int h_q, const void* base, int64_t page_stride);
// Whether the family takes a sparse prefill (bf16 kv rows of d_qk 576 or 512 read by 16-byte
// cp.async: a 16-byte aligned base and row stride).
bool takes_prefill(const uint8_t* kv, int64_t row_stride_bytes, int d_qk);
// Launches the kernel for (rows, format, d_qk) on `grid` (x: requests or split slots,
// y: head tiles, z: query tokens); a dense decode whose pages the TMA unit can load goes to the
// kDenseTma kernels (config.h), SMLA_DENSE_DECODE_KERNEL=gather keeps it on cp.async gathers.
void launch(const AttnParams& p, int rows, dim3 grid, cudaStream_t stream);
// Fills p.q_map with q for the TMA unit's Q load where the unit can read it (launch.cu); false
// where it cannot (the kernel then loads Q by cp.async).
bool q_tma_map(AttnParams& p);
// The same for out's bf16 rows (config.h kBf16PersistEnds: O stored by the TMA unit).
bool o_tma_map(AttnParams& p);
// Opt-out for A/B measurements: SMLA_SPARSE_DECODE_KERNEL=generic routes sparse_decode to the
// generic gather-attention kernel (read once per process).
bool disabled_by_env();
// SMLA_DENSE_DECODE_KERNEL=generic does the same for dense_decode, and
// SMLA_SPARSE_PREFILL_KERNEL=generic for sparse_prefill.
bool dense_disabled_by_env();
bool prefill_disabled_by_env();
// SMLA_SPARSE_DECODE_KERNEL=unpaired: every CTA gathers all its keys (no two-CTA clusters).
bool unpaired_by_env();
// When 64-row packed tiles run as persistent CTAs: beyond one wave of units (the default),
// SMLA_SPARSE_DECODE_KERNEL=persistent always, =one_unit never (tests and A/B measurements).
enum class PersistentChoice { beyond_one_wave, always, never };
PersistentChoice persistent_by_env();
// The 32-row fp8_ds_mla decode tiles' consumer warpgroups: by the device and the launch (the
// default, launch.cu ds32_decode_roles); SMLA_SD_DS32_DECODE=roles always in roles, =halves
// always in halves (tests and A/Bs).
enum class Ds32Choice { halves, roles, by_device };
Ds32Choice ds32_by_env();
// Sparse prefill's tail split (config.h kTailMerge; p.heads_tile as the plan's): where the
// persistent walk of `grid`'s units (one CTA per SM) leaves its last round part-empty, the
// parts (>= 2) each of those `units` tail units runs as, the tail's first token and its head
// tile's first head. parts 0: no split (the switch off, not the persistent bf16-row kernel, a
// whole last round, a tail across head tiles, units of one key block).
struct TailSplit {
  int parts = 0, units = 0, first_token = 0, head0 = 0;
};
TailSplit prefill_tail_split(const AttnParams& p, int rows, dim3 grid);

}  // namespace smla::cuda::sparse_decode_family
