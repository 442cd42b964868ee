// Decode context parallelism across ranks (SPEC §3, §4.6): every rank attends over its shard of
// the cache for all heads (sparse_decode or dense_decode with the local lengths and slots of
// smla/metadata.h), then the partial results are combined as engines do: an all-gather of the
// LSEs and a reduce-scatter of the rescaled outputs over the head dimension, or one all-to-all
// of each rank's heads and a local merge. The sink is applied once, after the merge.
#pragma once

#include <cstddef>

#include "smla/ops.h"
#include "smla/tensor.h"

namespace smla {

// One rank's share of the combine, given every rank's lse: its partial output rescaled to the
// merged lse and laid out by destination rank, so that summing `scaled` over ranks (the
// reduce-scatter) gives each rank the merged output of its h / N heads.
//   lse_g = logsumexp over ranks with a finite lse, w = exp(lse_all[rank] - lse_g),
//   scaled[d, t, j] = out_local[t, d * h/N + j] * w * sink_factor(head, lse_g),
//   lse[t, j] = lse_g of head rank * h/N + j (without the sink); no finite lse: 0 and -inf.
struct DcpRescaleArgs {
  TensorView out_local;  // [T, h, d_v] float32 or bf16, last dim packed
  TensorView lse_all;    // [N, T, h] float32: rank r's lse (without sink) at lse_all[r]
  int rank = 0;          // this rank, 0 <= rank < N
  TensorView attn_sink;  // optional [h] float32
  TensorView scaled;     // [N, T, h / N, d_v] float32, packed (the reduce-scatter's input)
  TensorView lse;        // [T, h / N] float32
};
void dcp_rescale(const DcpRescaleArgs& args, const Exec& exec = {});

// How dcp_combine moves the partials (the two ways engines do):
//   reduce_scatter: ncclAllGather of lse_local, dcp_rescale, ncclReduceScatter (sum) of the
//     float32 rescaled partials into out;
//   all_to_all: every rank sends each rank its heads of out_local (in out_local's dtype) with
//     their LSEs by ncclSend / ncclRecv in one group, then merge_states of the N received parts
//     (for a bf16 partial half of reduce_scatter's bytes; smla.dcp_combine's default).
enum class DcpCombineMethod : uint8_t { reduce_scatter, all_to_all };

// The whole combine on the caller's NCCL communicator (an ncclComm_t, passed as a pointer so
// this header needs no NCCL) and exec.stream, by `method`. CUDA tensors only; workspace from the
// size query (it depends on the method).
struct DcpCombineArgs {
  TensorView out_local;  // [T, h, d_v] float32 or bf16, last dim packed
  TensorView lse_local;  // [T, h] float32, packed
  TensorView attn_sink;  // optional [h] float32
  int world = 1;         // N, the communicator's size
  int rank = 0;          // this rank in the communicator
  TensorView out;        // [T, h / N, d_v] float32, packed
  TensorView lse;        // [T, h / N] float32
  DcpCombineMethod method = DcpCombineMethod::reduce_scatter;
};
size_t dcp_combine_workspace_size(const DcpCombineArgs& args);
void dcp_combine(const DcpCombineArgs& args, void* nccl_comm, const Exec& exec);

// Whether this build holds the NCCL combine (dcp_combine).
bool built_with_nccl();

}  // namespace smla
