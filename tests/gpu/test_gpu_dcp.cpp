// The DCP combine on the GPU: dcp_rescale against the CPU backend, and dcp_combine over a
// one-rank NCCL communicator (one GPU): all-gather, rescale and reduce-scatter collapse to the
// rescale of the single part. The two-rank run needs a machine with two GPUs.
#include <cmath>

#include "gpu/gpu_util.h"
#include "smla/dcp.h"

#if SMLA_WITH_NCCL
#include <nccl.h>
#endif

namespace smla::test {
namespace {

TEST(GpuDcp, RescaleMatchesCpu) {
  const int N = 4, T = 5, h = 16, d_v = 512, rank = 2;
  auto out_local = random_bf16(T * h * d_v);
  auto lse_all = random_f32(N * T * h, -3.f, 3.f);
  for (size_t i = 0; i < lse_all.size(); i += 7) lse_all[i] = -INFINITY;
  auto sink = random_f32(h, -1.f, 1.f);
  DcpRescaleArgs a;
  a.out_local = make_view(out_local.data(), DType::bf16, {T, h, d_v});
  a.lse_all = make_view(lse_all.data(), DType::f32, {N, T, h});
  a.rank = rank;
  a.attn_sink = make_view(sink.data(), DType::f32, {h});
  std::vector<float> scaled_ref(N * T * (h / N) * d_v), lse_ref(T * (h / N));
  a.scaled = make_view(scaled_ref.data(), DType::f32, {N, T, h / N, d_v});
  a.lse = make_view(lse_ref.data(), DType::f32, {T, h / N});
  dcp_rescale(a);
  DeviceBuffer d_out = upload(out_local), d_lse_all = upload(lse_all), d_sink = upload(sink);
  DeviceBuffer d_scaled = upload(std::vector<float>(scaled_ref.size(), NAN)), d_lse = upload(std::vector<float>(lse_ref.size(), NAN));
  DcpRescaleArgs g = a;
  g.out_local = on_device(a.out_local, d_out);
  g.lse_all = on_device(a.lse_all, d_lse_all);
  g.attn_sink = on_device(a.attn_sink, d_sink);
  g.scaled = on_device(a.scaled, d_scaled);
  g.lse = on_device(a.lse, d_lse);
  dcp_rescale(g);
  GPU_CHECK(cudaDeviceSynchronize());
  expect_out_close(download<float>(d_scaled, scaled_ref.size()), to_double(scaled_ref), "scaled");
  expect_lse_close(download<float>(d_lse, lse_ref.size()), to_double(lse_ref), "lse");
}

#if SMLA_WITH_NCCL
TEST(GpuDcp, CombineOverOneRankCommunicator) {
  ncclComm_t comm;
  int dev = 0;
  ASSERT_EQ(ncclCommInitAll(&comm, 1, &dev), ncclSuccess);
  const int T = 3, h = 8, d_v = 512;
  auto out_local = random_f32(T * h * d_v, -1.f, 1.f);
  auto lse_local = random_f32(T * h, -2.f, 2.f);
  auto sink = random_f32(h, -1.f, 1.f);
  DcpRescaleArgs r;  // the CPU answer for one rank: the rescale of the only part
  r.out_local = make_view(out_local.data(), DType::f32, {T, h, d_v});
  r.lse_all = make_view(lse_local.data(), DType::f32, {1, T, h});
  r.attn_sink = make_view(sink.data(), DType::f32, {h});
  std::vector<float> out_ref(T * h * d_v), lse_ref(T * h);
  r.scaled = make_view(out_ref.data(), DType::f32, {1, T, h, d_v});
  r.lse = make_view(lse_ref.data(), DType::f32, {T, h});
  dcp_rescale(r);
  DeviceBuffer d_out_local = upload(out_local), d_lse_local = upload(lse_local), d_sink = upload(sink);
  DeviceBuffer d_out = upload(std::vector<float>(out_ref.size(), NAN)), d_lse = upload(std::vector<float>(lse_ref.size(), NAN));
  DcpCombineArgs a;
  a.out_local = make_view(d_out_local.ptr, DType::f32, {T, h, d_v}, cuda_device(0));
  a.lse_local = make_view(d_lse_local.ptr, DType::f32, {T, h}, cuda_device(0));
  a.attn_sink = make_view(d_sink.ptr, DType::f32, {h}, cuda_device(0));
  a.out = make_view(d_out.ptr, DType::f32, {T, h, d_v}, cuda_device(0));
  a.lse = make_view(d_lse.ptr, DType::f32, {T, h}, cuda_device(0));
  DeviceBuffer ws(dcp_combine_workspace_size(a));
  dcp_combine(a, comm, {nullptr, {ws.ptr, ws.bytes}});
  GPU_CHECK(cudaDeviceSynchronize());
  expect_out_close(download<float>(d_out, out_ref.size()), to_double(out_ref), "combined out");
  expect_lse_close(download<float>(d_lse, lse_ref.size()), to_double(lse_ref), "combined lse");
  ncclCommDestroy(comm);
}
#endif

}  // namespace
}  // namespace smla::test
