// Host side of the gather-attention kernel: tiling, split-KV workspace, launches.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/attention/attention_params.h"
#include "smla/ops.h"

namespace smla::cuda {

struct AttentionPlan {
  int ng = 4;              // 16-row groups per CTA (1..4)
  bool f16 = false;        // fp16 tensor-core inputs instead of bf16
  int tokens_per_cta = 1;
  int token_groups = 1;
  int heads_tile = 64;
  int tiles_per_kv = 1;
  bool split = false;      // split-KV with the device schedule
  int num_units = 1;       // schedule target: CTAs that fill the GPU once
  int64_t max_splits = 0;  // workspace bound: b + num_units
  int min_split_blocks = 1;  // key blocks a split at least (the schedule's per-unit floor)
  int raw_stride = 656;    // staged bytes per key row (widest format of the key sets)
  int format = -1;         // the format of every key set, or -1 when it is read at run time
  // The kernel family: the generic gather-attention kernel, or the warp-specialized sparse-
  // decode family (src/cuda/sparse_decode/) with `rows` rows per head tile.
  enum class Family { generic, sparse_decode } family = Family::generic;
  int rows = 64;
};

// Shapes only (never device values), so the plan and the workspace size are graph-safe.
AttentionPlan plan_attention(int b, int s_q, int h_q, int h_kv, int d_qk, bool tokens_share_keys, bool f16,
                             bool allow_split, int raw_stride, int format);
// Staged bytes per key row for a key set (multiple of 16).
int staged_row_bytes(const KeySetParams& ks);
// The sparse-decode family's tiling: head tiles of up to 64 rows (16 or 32 for h_q <= 32), one
// query token and one CTA per SM (its shared memory), split-KV to fill the GPU. keys: the most
// keys a request can have (top-k plus the extra set's; 0 when not known, as for dense decode and
// prefill), with which small fp8_ds_mla batches put more than 32 heads on 16-row tiles.
AttentionPlan plan_sparse_decode(int b, int s_q, int h_q, int format, int64_t keys = 0);
size_t attention_workspace_bytes(const AttentionPlan& plan, int b, int s_q, int h_q);
// Fills p.split_offsets / part_o / part_lse from the workspace and launches plan, attention
// and combine kernels on `stream`.
void launch_attention(AttnParams p, const AttentionPlan& plan, const Workspace& ws, cudaStream_t stream);
// The device split schedule's kernel: fills p.split_offsets from the lengths for p.split_units
// work units and p.split_min_blocks key blocks a split at least (metadata.h decode_split_schedule).
void launch_split_plan(const AttnParams& p, cudaStream_t stream);
// Sparse prefill on the sparse-decode family (plan: plan_sparse_decode with no split): the
// workspace its tail split needs (0: none; sparse_decode config.h kTailMerge), and the launch:
// the attention kernel, with the tail split where `ws` holds it, then the combine of the tail.
size_t prefill_tail_workspace_bytes(const AttnParams& p, const AttentionPlan& plan);
void launch_prefill(AttnParams p, const AttentionPlan& plan, const Workspace& ws, cudaStream_t stream);

}  // namespace smla::cuda
