// dcp_combine over NCCL (built when NCCL is found), all on exec.stream, by args.method:
// reduce_scatter: all-gather of the LSEs, dcp_rescale, reduce-scatter (sum) of the rescaled
// partials over heads; all_to_all: each rank's heads of the partial and their LSEs packed per
// destination, one group of ncclSend / ncclRecv, merge_states of the received parts.
#include <nccl.h>

#include <cstdint>
#include <string>

#include "api/validate.h"
#include "cuda/common/cuda_check.h"
#include "cuda/cuda_backend.h"

namespace smla::cuda {

namespace {

constexpr size_t kAlign = 256;
size_t align_up(size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

void nccl_check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw RuntimeError(std::string("NCCL error in ") + what + ": " + ncclGetErrorString(r));
}

// reduce_scatter's workspace: lse_all [N, T, h] then scaled [N, T, h / N, d_v], both float32.
size_t lse_all_bytes(const DcpCombineArgs& a) {
  return static_cast<size_t>(a.world) * a.out_local.shape[0] * a.out_local.shape[1] * sizeof(float);
}

// all_to_all's message to one rank: its heads of out_local [T, h / N, d_v] in out_local's dtype,
// then (at a 256-byte offset) their LSEs [T, h / N] float32. The workspace holds N messages to
// send, then N received.
struct A2aLayout {
  int64_t T, hr, d_v;
  size_t elt, out_bytes, lse_at, message;
  explicit A2aLayout(const DcpCombineArgs& a)
      : T(a.out_local.shape[0]), hr(a.out_local.shape[1] / a.world), d_v(a.out_local.shape[2]),
        elt(dtype_size(a.out_local.dtype)) {
    out_bytes = static_cast<size_t>(T) * hr * d_v * elt;
    lse_at = align_up(out_bytes);
    message = align_up(lse_at + static_cast<size_t>(T) * hr * sizeof(float));
  }
};

// One CTA per (token, head) row of out_local: the row into its destination's message, and its
// LSE (lse_local is packed). 16-byte pieces where row and message allow, else 2-byte ones.
__global__ void pack_a2a_kernel(const uint8_t* out_local, int64_t stride_t, int64_t stride_h, const float* lse_local,
                                uint8_t* send, int64_t h, int64_t hr, int64_t row_bytes, int64_t lse_at,
                                int64_t message) {
  const int64_t row = blockIdx.x, t = row / h, head = row % h, d = head / hr, j = head % hr;
  const uint8_t* src = out_local + t * stride_t + head * stride_h;
  uint8_t* dst = send + d * message + (t * hr + j) * row_bytes;
  const bool wide = row_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(src) % 16 == 0 &&
                    reinterpret_cast<uintptr_t>(dst) % 16 == 0;
  if (wide) {
    for (int64_t i = threadIdx.x; i < row_bytes / 16; i += blockDim.x)
      reinterpret_cast<uint4*>(dst)[i] = reinterpret_cast<const uint4*>(src)[i];
  } else {
    for (int64_t i = threadIdx.x; i < row_bytes / 2; i += blockDim.x)
      reinterpret_cast<uint16_t*>(dst)[i] = reinterpret_cast<const uint16_t*>(src)[i];
  }
  if (threadIdx.x == 0) reinterpret_cast<float*>(send + d * message + lse_at)[t * hr + j] = lse_local[t * h + head];
}

void combine_all_to_all(const DcpCombineArgs& a, ncclComm_t comm, const Exec& exec) {
  const A2aLayout L(a);
  const int64_t h = a.out_local.shape[1];
  auto* send = static_cast<uint8_t*>(exec.workspace.data);
  uint8_t* recv = send + static_cast<size_t>(a.world) * L.message;
  cudaStream_t stream = as_stream(exec.stream);
  const int64_t elt = static_cast<int64_t>(L.elt);
  pack_a2a_kernel<<<static_cast<unsigned>(L.T * h), 64, 0, stream>>>(
      static_cast<const uint8_t*>(a.out_local.data), a.out_local.stride[0] * elt, a.out_local.stride[1] * elt,
      static_cast<const float*>(a.lse_local.data), send, h, L.hr, L.d_v * elt, static_cast<int64_t>(L.lse_at),
      static_cast<int64_t>(L.message));
  SMLA_CUDA_CHECK_LAUNCH();
  // The group is closed whatever happens inside it: a group left open would hold back this
  // thread's later NCCL calls (and hang the peers) instead of reporting the error.
  nccl_check(ncclGroupStart(), "ncclGroupStart");
  ncclResult_t first = ncclSuccess;
  const char* failed = "";
  for (int peer = 0; peer < a.world && first == ncclSuccess; ++peer) {
    failed = "ncclSend";
    first = ncclSend(send + peer * L.message, L.message, ncclUint8, peer, comm, stream);
    if (first != ncclSuccess) break;
    failed = "ncclRecv";
    first = ncclRecv(recv + peer * L.message, L.message, ncclUint8, peer, comm, stream);
  }
  const ncclResult_t ended = ncclGroupEnd();
  nccl_check(first, failed);
  nccl_check(ended, "ncclGroupEnd");
  // Received part r (from rank r) at recv + r * message: out [T, hr, d_v], then its LSEs.
  const int64_t part_elems = static_cast<int64_t>(L.message / L.elt);
  MergeStatesArgs m;
  m.out_parts = make_strided_view(recv, a.out_local.dtype, {a.world, L.T, L.hr, L.d_v},
                                  {part_elems, L.hr * L.d_v, L.d_v, 1}, a.out_local.device);
  m.lse_parts = make_strided_view(recv + L.lse_at, DType::f32, {a.world, L.T, L.hr},
                                  {static_cast<int64_t>(L.message / sizeof(float)), L.hr, 1}, a.out_local.device);
  // The sink of this rank's heads: attn_sink[rank * hr ...].
  if (a.attn_sink.present())
    m.attn_sink = make_strided_view(static_cast<float*>(a.attn_sink.data) + a.rank * L.hr * a.attn_sink.stride[0],
                                    DType::f32, {L.hr}, {a.attn_sink.stride[0]}, a.out_local.device);
  m.out = a.out;
  m.lse = a.lse;
  cuda::merge_states(m, exec);
}

}  // namespace

size_t dcp_combine_workspace_size(const DcpCombineArgs& a) {
  if (a.method == DcpCombineMethod::all_to_all) return 2 * static_cast<size_t>(a.world) * A2aLayout(a).message;
  const size_t scaled = static_cast<size_t>(a.out_local.shape[0]) * a.out_local.shape[1] * a.out_local.shape[2] * sizeof(float);
  return align_up(lse_all_bytes(a)) + scaled;
}

void dcp_combine(const DcpCombineArgs& a, void* nccl_comm, const Exec& exec) {
  // Everything a rank can refuse is refused here, before its first collective (a rank that
  // throws once its peers are inside one leaves them waiting).
  // 0 bytes for T = 0: no workspace needed.
  detail::check_workspace(exec.workspace, cuda::dcp_combine_workspace_size(a), "dcp_combine_workspace_size");
  auto comm = static_cast<ncclComm_t>(nccl_comm);
  int n = 0, r = 0, comm_dev = 0, dev = 0;
  nccl_check(ncclCommCount(comm, &n), "ncclCommCount");
  nccl_check(ncclCommUserRank(comm, &r), "ncclCommUserRank");
  nccl_check(ncclCommCuDevice(comm, &comm_dev), "ncclCommCuDevice");
  SMLA_CUDA_CHECK(cudaGetDevice(&dev));
  if (n != a.world) throw Error("world", "the communicator's size " + std::to_string(n), std::to_string(a.world));
  if (r != a.rank) throw Error("rank", "the communicator's rank " + std::to_string(r), std::to_string(a.rank));
  // The kernels run on the current device and NCCL on the communicator's: they must agree.
  if (comm_dev != dev)
    throw Error("nccl_comm", "a communicator of the current device cuda:" + std::to_string(dev),
                "one of cuda:" + std::to_string(comm_dev));

  const int64_t T = a.out_local.shape[0], h = a.out_local.shape[1], d_v = a.out_local.shape[2];
  if (T == 0) return;
  // An error left by the caller's earlier work would be reported by the rescale's launch
  // check, between the two collectives of reduce_scatter: report it before the first.
  SMLA_CUDA_CHECK(cudaPeekAtLastError());
  if (a.method == DcpCombineMethod::all_to_all) {
    combine_all_to_all(a, comm, exec);
    return;
  }
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
