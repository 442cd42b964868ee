// The operations of SPEC §4. Every entry point validates all arguments on the host
// (throwing smla::Error, writing nothing) and then runs on the device the tensors live on:
// the CPU reference for CPU tensors, the CUDA kernels for CUDA tensors.
//
// Device calls take a stream and a caller-provided workspace (sized by the matching
// *_workspace_size query), never synchronize and never allocate, so they can be captured
// in a CUDA graph. Values only the device sees (indices, lengths, block tables) are never
// trusted: invalid ones are skipped or clamped as the SPEC says.
#pragma once

#include <cstddef>
#include <optional>

#include "smla/formats.h"
#include "smla/tensor.h"

namespace smla {

struct Workspace {
  void* data = nullptr;
  size_t bytes = 0;
};

// Where and how to run: the CUDA stream (cudaStream_t, nullptr = default stream) and the
// workspace. Ignored by the CPU backend.
struct Exec {
  void* stream = nullptr;
  Workspace workspace{};
};

// ---------------------------------------------------------------- sparse_decode (§4.1)
struct SparseDecodeArgs {
  TensorView q;                  // [b, s_q, h_q, d_qk] bf16 (any strides, last dim packed)
  PagedCache cache;              // fp8_ds_mla, fp8_model1 or bf16, h_kv = 1
  TensorView indices;            // [b, s_q, topk] int32 slots (last dim packed)
  TensorView topk_length;        // optional [b] int32
  PagedCache extra_cache;        // optional second key set (extra_cache.data absent = none)
  TensorView extra_indices;      // [b, s_q, extra_topk] int32
  TensorView extra_topk_length;  // optional [b] int32
  TensorView attn_sink;          // optional [h_q] float32
  std::optional<float> softmax_scale;  // default d_qk^-0.5
  TensorView out;                // [b, s_q, h_q, 512] bf16
  TensorView lse;                // [b, s_q, h_q] float32
};
size_t sparse_decode_workspace_size(const SparseDecodeArgs& args);
void sparse_decode(const SparseDecodeArgs& args, const Exec& exec = {});

// --------------------------------------------------------------- sparse_prefill (§4.2)
// Keys either from `kv` (bf16 rows, indices are row numbers) or, with `cache` set instead of kv,
// straight from a paged cache (fp8_ds_mla, fp8_model1 or bf16; indices are slots, as in
// sparse_decode): the results are those over the dequantized rows, and no bf16 copy of them is
// made in memory.
struct SparsePrefillArgs {
  TensorView q;            // [s_q, h_q, d_qk] bf16
  TensorView kv;           // [s_kv, d_qk] or [s_kv, 1, d_qk] bf16; absent when `cache` is set
  PagedCache cache;        // optional paged cache in place of kv (cache.data absent = none), h_kv = 1
  TensorView indices;      // [s_q, topk] or [s_q, 1, topk] int32 rows of kv (slots of cache)
  TensorView topk_length;  // optional [s_q] int32
  TensorView attn_sink;    // optional [h_q] float32
  std::optional<float> softmax_scale;
  TensorView out;          // [s_q, h_q, 512] bf16
  TensorView lse;          // [s_q, h_q] float32
  TensorView max_logits;   // [s_q, h_q] float32
};
size_t sparse_prefill_workspace_size(const SparsePrefillArgs& args);
void sparse_prefill(const SparsePrefillArgs& args, const Exec& exec = {});

// ----------------------------------------------------------------- dense_decode (§4.3)
struct DenseDecodeArgs {
  TensorView q;            // [b, s_q, h_q, d_qk] bf16/fp16, or fp8_e4m3 with an fp8_e4m3 cache
  PagedCache cache;        // bf16, fp16 or fp8_e4m3 (k_scale), [num_blocks, page, h_kv, d_qk]
  TensorView block_table;  // [b, max_blocks] int32
  TensorView seqlens;      // [b] int32
  bool causal = false;
  float q_scale = 1.0f;    // fp8 q only: dequantized q = float(q) * q_scale
  TensorView attn_sink;    // optional [h_q] float32
  std::optional<float> softmax_scale;
  TensorView out;          // [b, s_q, h_q, 512], bf16 (fp16 when q is fp16)
  TensorView lse;          // [b, s_q, h_q] float32
};
size_t dense_decode_workspace_size(const DenseDecodeArgs& args);
void dense_decode(const DenseDecodeArgs& args, const Exec& exec = {});

// ----------------------------------------------------------------- merge_states (§4.4)
struct MergeStatesArgs {
  TensorView out_parts;  // [n, T, h, d_v] float32 or bf16
  TensorView lse_parts;  // [n, T, h] float32
  TensorView attn_sink;  // optional [h] float32, applied once after the merge
  TensorView out;        // [T, h, d_v] bf16 or float32
  TensorView lse;        // [T, h] float32 (without the sink)
};
void merge_states(const MergeStatesArgs& args, const Exec& exec = {});

// ------------------------------------------------------- cache writers/readers (§4.5)
struct WriteCacheArgs {
  TensorView kv_c;          // [T, d_qk - 64] bf16 latent
  TensorView k_pe;          // [T, 64] bf16 RoPE
  TensorView slot_mapping;  // [T] int64; -1 (any negative or past the cache) = skip
  PagedCache cache;         // any format; fp8_e4m3 quantizes with cache.k_scale
};
void write_cache(const WriteCacheArgs& args, const Exec& exec = {});

struct GatherCacheArgs {
  PagedCache cache;  // any format, h_kv = 1
  TensorView slots;  // [N] int32 or int64; invalid slot -> zero row
  TensorView out;    // [N, d_qk] bf16 (dequantized)
};
void gather_cache(const GatherCacheArgs& args, const Exec& exec = {});

}  // namespace smla
