// The CUDA backend (sm_90a): called after host validation, on CUDA tensors.
#pragma once

#include <cstddef>

#include "smla/dcp.h"
#include "smla/metadata.h"
#include "smla/ops.h"

namespace smla::cuda {

size_t sparse_decode_workspace_size(const SparseDecodeArgs& a);
void sparse_decode(const SparseDecodeArgs& a, const Exec& exec);
size_t sparse_prefill_workspace_size(const SparsePrefillArgs& a);
void sparse_prefill(const SparsePrefillArgs& a, const Exec& exec);
size_t dense_decode_workspace_size(const DenseDecodeArgs& a);
void dense_decode(const DenseDecodeArgs& a, const Exec& exec);
void merge_states(const MergeStatesArgs& a, const Exec& exec);
void write_cache(const WriteCacheArgs& a, const Exec& exec);
void gather_cache(const GatherCacheArgs& a, const Exec& exec);
void dcp_rescale(const DcpRescaleArgs& a, const Exec& exec);
// NCCL builds only (SMLA_WITH_NCCL).
size_t dcp_combine_workspace_size(const DcpCombineArgs& a);
void dcp_combine(const DcpCombineArgs& a, void* nccl_comm, const Exec& exec);

void req_id_per_token(const TensorView& query_start_loc, const TensorView& out, const Exec& exec);
void page_table_from_req_to_token(const TensorView& req_to_token, const TensorView& req_pool_indices,
                                  const TensorView& seq_lens, int page_size, const TensorView& block_table,
                                  const Exec& exec);
void positions_to_slots(const TensorView& block_table, int page_size, const TensorView& req_id,
                        const TensorView& positions, const TensorView& slots, const Exec& exec);
void sliding_window_indices(const TensorView& positions, int window, const TensorView& out, const Exec& exec);
void compressed_slot_mapping(const TensorView& positions, const TensorView& req_id, const TensorView& block_table,
                             int compress_ratio, int states_per_page, const TensorView& out, const Exec& exec);
void dcp_local_seqlens(const TensorView& seqlens, DcpLayout d, int rank, const TensorView& out, const Exec& exec);
void dcp_local_topk(const TensorView& positions, const TensorView& block_table, int page_size, DcpLayout d, int rank,
                    const TensorView& slots, const TensorView& counts, const TensorView& topk_length,
                    const Exec& exec);
void decode_split_schedule(const TensorView& lengths, const SplitSchedulePlan& plan,
                           const TensorView& split_offsets, const Exec& exec);

int device_sm_count();
bool device_available();

}  // namespace smla::cuda
