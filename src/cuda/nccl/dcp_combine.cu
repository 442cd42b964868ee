// dcp_combine over NCCL (built when NCCL is found): all-gather of the LSEs, dcp_rescale,
// reduce-scatter (sum) of the rescaled partials over heads, all on exec.stream.
#include <nccl.h>

#include <string>

#include "cuda/common/cuda_check.h"
#include "cuda/cuda_backend.h"

namespace smla::cuda {

namespace {

constexpr size_t kAlign = 256;
size_t align_up(size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

void nccl_check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw RuntimeError(std::string("NCCL error in ") + what + ": " + ncclGetErrorString(r));
}

// Workspace: lse_all [N, T, h] then scaled [N, T, h / N, d_v], both float32.
size_t lse_all_bytes(const DcpCombineArgs& a) {
  return static_cast<size_t>(a.world) * a.out_local.shape[0] * a.out_local.shape[1] * sizeof(float);
}

}  // namespace

size_t dcp_combine_workspace_size(const DcpCombineArgs& a) {
  const size_t scaled = static_cast<size_t>(a.out_local.shape[0]) * a.out_local.shape[1] * a.out_local.shape[2] * sizeof(float);
  return align_up(lse_all_bytes(a)) + scaled;
}

void dcp_combine(const DcpCombineArgs& a, void* nccl_comm, const Exec& exec) {
  const size_t need = cuda::dcp_combine_workspace_size(a);
  if (exec.workspace.bytes < need || exec.workspace.data == nullptr)
    throw Error("workspace", "at least " + std::to_string(need) + " bytes (see dcp_combine_workspace_size)",
                std::to_string(exec.workspace.bytes) + " bytes");
  auto comm = static_cast<ncclComm_t>(nccl_comm);
  int n = 0, r = 0;
  nccl_check(ncclCommCount(comm, &n), "ncclCommCount");
  nccl_check(ncclCommUserRank(comm, &r), "ncclCommUserRank");
  if (n != a.world) throw Error("world", "the communicator's size " + std::to_string(n), std::to_string(a.world));
  if (r != a.rank) throw Error("rank", "the communicator's rank " + std::to_string(r), std::to_string(a.rank));

  const int64_t T = a.out_local.shape[0], h = a.out_local.shape[1], d_v = a.out_local.shape[2];
  if (T == 0) return;
  auto* base = static_cast<uint8_t*>(exec.workspace.data);
  float* lse_all = reinterpret_cast<float*>(base);
  float* scaled = reinterpret_cast<float*>(base + align_up(lse_all_bytes(a)));
  cudaStream_t stream = as_stream(exec.stream);

  // lse_local must be packed [T, h] (validated), so it can be sent as is.
  nccl_check(ncclAllGather(a.lse_local.data, lse_all, static_cast<size_t>(T * h), ncclFloat32, comm, stream),
             "ncclAllGather");
  DcpRescaleArgs rs;
  rs.out_local = a.out_local;
  rs.lse_all = make_view(lse_all, DType::f32, {a.world, T, h}, a.out_local.device);
  rs.rank = a.rank;
  rs.attn_sink = a.attn_sink;
  rs.scaled = make_view(scaled, DType::f32, {a.world, T, h / a.world, d_v}, a.out_local.device);
  rs.lse = a.lse;
  cuda::dcp_rescale(rs, exec);
  nccl_check(ncclReduceScatter(scaled, a.out.data, static_cast<size_t>(T * (h / a.world) * d_v), ncclFloat32, ncclSum,
                               comm, stream),
             "ncclReduceScatter");
}

}  // namespace smla::cuda
