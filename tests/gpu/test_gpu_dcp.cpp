// Decode context parallelism on one GPU: N ranks simulated by N shard caches on the device
// (written by the GPU writer at the local slots of SPEC §4.6), per-shard attention, dcp_rescale
// and merge_states on the GPU, the reduce-scatter summed here; the result must equal the
// unsharded CPU reference with the sink. Also dcp_rescale against the CPU backend and
// dcp_combine over a one-rank NCCL communicator (all-gather, rescale and reduce-scatter collapse
// to the rescale of the single part). The two-rank run needs a machine with two GPUs.
#include <algorithm>
#include <cmath>
#include <string>
#include <thread>

#include "gpu/gpu_util.h"
#include "smla/dcp.h"

#if SMLA_WITH_NCCL
#include <nccl.h>
#endif

namespace smla::test {
namespace {

constexpr int kPage = 64;

// A context of b requests (row (i, p) = position p of request i) and paged caches holding it:
// request i owns pages i * max_blocks .. (i + 1) * max_blocks - 1 in every cache, so one block
// table serves the unsharded cache and every shard.
struct Context {
  int b, max_blocks, d_qk;
  CacheFormat format;
  std::vector<int32_t> len, table;
  DeviceBuffer kv_c, k_pe, d_table;
};

Context make_context(CacheFormat f, int d_qk, const std::vector<int32_t>& len) {
  Context c{static_cast<int>(len.size()), 0, d_qk, f, len, {}, {}, {}, {}};
  c.max_blocks = (*std::max_element(len.begin(), len.end()) + kPage - 1) / kPage;
  const size_t rows = static_cast<size_t>(c.b) * c.max_blocks * kPage;
  c.kv_c = upload(random_bf16(rows * (d_qk - 64)));
  c.k_pe = upload(random_bf16(rows * 64));
  c.table.resize(static_cast<size_t>(c.b) * c.max_blocks);
  for (size_t e = 0; e < c.table.size(); ++e) c.table[e] = static_cast<int32_t>(e);
  c.d_table = upload(c.table);
  return c;
}

// The cache of `rank` (-1: the unsharded cache), filled on the GPU: row (i, p) goes to the local
// slot of its local position when the rank owns p, and is skipped (slot -1) otherwise. Unwritten
// slots stay 0xff, NaN in every format, so a read of a foreign row would show.
struct DeviceCache {
  DeviceBuffer bytes;
  PagedCache cache;
};

DeviceCache write_shard(const Context& c, DcpLayout dcp, int rank) {
  const bool packed = is_packed_format(c.format);
  const DType dt = packed ? DType::u8 : DType::bf16;
  const int64_t row = packed ? bytes_per_token(c.format, c.d_qk) : c.d_qk;
  const int64_t pages = static_cast<int64_t>(c.b) * c.max_blocks;
  DeviceCache d;
  d.bytes = DeviceBuffer(static_cast<size_t>(pages * kPage * row * dtype_size(dt)));
  cudaMemset(d.bytes.ptr, 0xff, d.bytes.bytes);
  d.cache.format = c.format;
  d.cache.data = make_view(d.bytes.ptr, dt, {pages, kPage, 1, row}, cuda_device(0));
  const int64_t T = pages * kPage;
  std::vector<int64_t> slots(T, -1);
  for (int i = 0; i < c.b; ++i)
    for (int64_t p = 0; p < c.len[i]; ++p) {
      if (rank >= 0 && dcp_owner_rank(p, dcp) != rank) continue;
      const int64_t lp = rank < 0 ? p : dcp_local_position(p, dcp);
      slots[static_cast<size_t>(i) * c.max_blocks * kPage + p] = (static_cast<int64_t>(i) * c.max_blocks + lp / kPage) * kPage + lp % kPage;
    }
  DeviceBuffer d_slots = upload(slots);
  WriteCacheArgs w;
  w.kv_c = make_view(c.kv_c.ptr, DType::bf16, {T, c.d_qk - 64}, cuda_device(0));
  w.k_pe = make_view(c.k_pe.ptr, DType::bf16, {T, 64}, cuda_device(0));
  w.slot_mapping = make_view(d_slots.ptr, DType::i64, {T}, cuda_device(0));
  w.cache = d.cache;
  write_cache(w);
  cudaDeviceSynchronize();
  return d;
}

PagedCache download_cache(const DeviceCache& d, std::vector<uint8_t>& host) {
  host = download<uint8_t>(d.bytes, d.bytes.bytes);
  PagedCache h = d.cache;
  h.data.data = host.data();
  h.data.device = {};
  return h;
}

// The engine's combine of N partial (out [T, h, 512] bf16, lse [T, h]) on the device: merge_states
// of all parts, and per rank dcp_rescale against the stacked LSEs with the reduce-scatter
// summed here. Both must give the unsharded reference (out with the sink, lse without).
void combine_and_check(int N, int T, int h, const DeviceBuffer& parts, const DeviceBuffer& lse_all,
                       const std::vector<float>& sink, const std::vector<float>& ref_out,
                       const std::vector<float>& ref_lse) {
  const auto dev = cuda_device(0);
  DeviceBuffer d_sink = upload(sink);
  DeviceBuffer m_out = upload(std::vector<float>(static_cast<size_t>(T) * h * kDv, NAN));
  DeviceBuffer m_lse = upload(std::vector<float>(static_cast<size_t>(T) * h, NAN));
  MergeStatesArgs m;
  m.out_parts = make_view(parts.ptr, DType::bf16, {N, T, h, kDv}, dev);
  m.lse_parts = make_view(lse_all.ptr, DType::f32, {N, T, h}, dev);
  m.attn_sink = make_view(d_sink.ptr, DType::f32, {h}, dev);
  m.out = make_view(m_out.ptr, DType::f32, {T, h, kDv}, dev);
  m.lse = make_view(m_lse.ptr, DType::f32, {T, h}, dev);
  merge_states(m);
  GPU_CHECK(cudaDeviceSynchronize());
  const std::vector<double> want_out(ref_out.begin(), ref_out.end()), want_lse(ref_lse.begin(), ref_lse.end());
  expect_out_close(download<float>(m_out, want_out.size()), want_out, "merge_states of the shards");
  expect_lse_close(download<float>(m_lse, want_lse.size()), want_lse, "merge_states lse");

  const int hr = h / N;
  std::vector<float> received(static_cast<size_t>(N) * T * hr * kDv, 0.f), lse_mine;  // [dest, T, hr, d_v]
  for (int r = 0; r < N; ++r) {
    DeviceBuffer scaled = upload(std::vector<float>(received.size(), NAN));
    DeviceBuffer lse_r = upload(std::vector<float>(static_cast<size_t>(T) * hr, NAN));
    DcpRescaleArgs rs;
    rs.out_local = make_view(static_cast<uint16_t*>(parts.ptr) + static_cast<size_t>(r) * T * h * kDv, DType::bf16, {T, h, kDv}, dev);
    rs.lse_all = make_view(lse_all.ptr, DType::f32, {N, T, h}, dev);
    rs.rank = r;
    rs.attn_sink = m.attn_sink;
    rs.scaled = make_view(scaled.ptr, DType::f32, {N, T, hr, kDv}, dev);
    rs.lse = make_view(lse_r.ptr, DType::f32, {T, hr}, dev);
    dcp_rescale(rs);
    GPU_CHECK(cudaDeviceSynchronize());
    const auto s = download<float>(scaled, received.size());
    for (size_t e = 0; e < s.size(); ++e) received[e] += s[e];
    const auto l = download<float>(lse_r, static_cast<size_t>(T) * hr);
    lse_mine.insert(lse_mine.end(), l.begin(), l.end());
  }
  for (int d = 0; d < N; ++d) {
    std::vector<float> got_out, got_lse;
    std::vector<double> w_out, w_lse;
    for (int t = 0; t < T; ++t)
      for (int j = 0; j < hr; ++j) {
        const size_t head = static_cast<size_t>(t) * h + d * hr + j;
        got_lse.push_back(lse_mine[(static_cast<size_t>(d) * T + t) * hr + j]);
        w_lse.push_back(ref_lse[head]);
        for (int k = 0; k < kDv; ++k) {
          got_out.push_back(received[((static_cast<size_t>(d) * T + t) * hr + j) * kDv + k]);
          w_out.push_back(ref_out[head * kDv + k]);
        }
      }
    expect_out_close(got_out, w_out, "rank " + std::to_string(d) + " after the reduce-scatter");
    expect_lse_close(got_lse, w_lse, "rank " + std::to_string(d) + " lse");
  }
}

std::vector<float> random_sink(int h) {
  std::vector<float> s(h);
  for (auto& x : s) x = uniform(-1.f, 2.f);
  return s;
}

// sparse_decode (fp8_ds_mla, V3.2 rows): the top-k are request positions (with -1 and
// duplicates); each rank keeps the ones it owns, mapped to local positions, and turns them into
// slots with positions_to_slots on the GPU.
void run_sparse_dcp(int N, int I) {
  SCOPED_TRACE("sparse_decode N=" + std::to_string(N) + " I=" + std::to_string(I));
  const int b = 2, s_q = 2, h = 32, topk = 512, d = 576, T = b * s_q;
  const DcpLayout dcp{N, I};
  Context c = make_context(CacheFormat::fp8_ds_mla, d, {static_cast<int32_t>(uniform_int(600, 1500)),
                                                        static_cast<int32_t>(uniform_int(1, 300))});
  auto q = random_bf16(static_cast<size_t>(T) * h * d);
  auto sink = random_sink(h);
  std::vector<int32_t> pos(static_cast<size_t>(T) * topk), req(T);
  for (int t = 0; t < T; ++t) {
    req[t] = t / s_q;
    for (int k = 0; k < topk; ++k) {
      int32_t& p = pos[static_cast<size_t>(t) * topk + k];
      const float u = uniform(0.f, 1.f);
      p = u < 0.08f ? -1 : (u < 0.12f && k > 0 ? pos[static_cast<size_t>(t) * topk + k - 1]
                                               : static_cast<int32_t>(uniform_int(0, c.len[req[t]] - 1)));
    }
  }
  const auto dev = cuda_device(0);
  DeviceBuffer d_q = upload(q), d_req = upload(req);
  auto slots_of = [&](const std::vector<int32_t>& positions, DeviceBuffer& d_pos, DeviceBuffer& d_slots) {
    d_pos = upload(positions);
    d_slots = upload(std::vector<int32_t>(positions.size(), 7));
    positions_to_slots(make_view(c.d_table.ptr, DType::i32, {b, c.max_blocks}, dev), kPage,
                       make_view(d_req.ptr, DType::i32, {T}, dev), make_view(d_pos.ptr, DType::i32, {T, topk}, dev),
                       make_view(d_slots.ptr, DType::i32, {T, topk}, dev));
  };
  SparseDecodeArgs g;
  g.q = make_view(d_q.ptr, DType::bf16, {b, s_q, h, d}, dev);

  // Unsharded CPU reference, from the cache the GPU writer filled.
  {
    DeviceCache full = write_shard(c, dcp, -1);
    DeviceBuffer d_pos, d_slots;
    slots_of(pos, d_pos, d_slots);
    GPU_CHECK(cudaDeviceSynchronize());
    std::vector<uint8_t> host_bytes;
    auto idx = download<int32_t>(d_slots, pos.size());
    std::vector<uint16_t> out(static_cast<size_t>(T) * h * kDv);
    std::vector<float> lse(static_cast<size_t>(T) * h);
    SparseDecodeArgs a;
    a.q = make_view(q.data(), DType::bf16, {b, s_q, h, d});
    a.cache = download_cache(full, host_bytes);
    a.indices = make_view(idx.data(), DType::i32, {b, s_q, topk});
    a.attn_sink = make_view(sink.data(), DType::f32, {h});
    a.out = make_view(out.data(), DType::bf16, {b, s_q, h, kDv});
    a.lse = make_view(lse.data(), DType::f32, {b, s_q, h});
    sparse_decode(a);
    // Every rank's partials, then the combine.
    DeviceBuffer parts(static_cast<size_t>(N) * T * h * kDv * 2), lse_all(static_cast<size_t>(N) * T * h * 4);
    for (int r = 0; r < N; ++r) {
      DeviceCache shard = write_shard(c, dcp, r);
      std::vector<int32_t> local(pos.size());
      for (size_t e = 0; e < pos.size(); ++e)
        local[e] = pos[e] >= 0 && dcp_owner_rank(pos[e], dcp) == r ? static_cast<int32_t>(dcp_local_position(pos[e], dcp)) : -1;
      DeviceBuffer d_lpos, d_lslots;
      slots_of(local, d_lpos, d_lslots);
      g.cache = shard.cache;
      g.indices = make_view(d_lslots.ptr, DType::i32, {b, s_q, topk}, dev);
      g.out = make_view(static_cast<uint16_t*>(parts.ptr) + static_cast<size_t>(r) * T * h * kDv, DType::bf16, {b, s_q, h, kDv}, dev);
      g.lse = make_view(static_cast<float*>(lse_all.ptr) + static_cast<size_t>(r) * T * h, DType::f32, {b, s_q, h}, dev);
      DeviceBuffer ws(sparse_decode_workspace_size(g));
      sparse_decode(g, {nullptr, {ws.ptr, ws.bytes}});
      GPU_CHECK(cudaDeviceSynchronize());
    }
    combine_and_check(N, T, h, parts, lse_all, sink, bf16_to_float(out), lse);
  }
}

// dense_decode (bf16 cache): each rank attends over its local lengths (dcp_local_seqlens).
void run_dense_dcp(int N, int I) {
  SCOPED_TRACE("dense_decode N=" + std::to_string(N) + " I=" + std::to_string(I));
  const int h = 16, d = 576;
  const DcpLayout dcp{N, I};
  Context c = make_context(CacheFormat::bf16, d, {static_cast<int32_t>(uniform_int(1, 2000)), 0,
                                                  static_cast<int32_t>(uniform_int(0, N * I - 1)),
                                                  static_cast<int32_t>(uniform_int(1000, 3000))});
  const int b = c.b;
  auto q = random_bf16(static_cast<size_t>(b) * h * d);
  auto sink = random_sink(h);
  DeviceCache full = write_shard(c, dcp, -1);
  std::vector<uint8_t> host_bytes;
  std::vector<uint16_t> out(static_cast<size_t>(b) * h * kDv);
  std::vector<float> lse(static_cast<size_t>(b) * h);
  DenseDecodeArgs a;
  a.q = make_view(q.data(), DType::bf16, {b, 1, h, d});
  a.cache = download_cache(full, host_bytes);
  a.block_table = make_view(c.table.data(), DType::i32, {b, c.max_blocks});
  a.seqlens = make_view(c.len.data(), DType::i32, {b});
  a.attn_sink = make_view(sink.data(), DType::f32, {h});
  a.out = make_view(out.data(), DType::bf16, {b, 1, h, kDv});
  a.lse = make_view(lse.data(), DType::f32, {b, 1, h});
  dense_decode(a);

  const auto dev = cuda_device(0);
  DeviceBuffer d_q = upload(q), d_len = upload(c.len);
  DeviceBuffer parts(static_cast<size_t>(N) * b * h * kDv * 2), lse_all(static_cast<size_t>(N) * b * h * 4);
  for (int r = 0; r < N; ++r) {
    DeviceCache shard = write_shard(c, dcp, r);
    DeviceBuffer d_local = upload(std::vector<int32_t>(b, -5));
    dcp_local_seqlens(make_view(d_len.ptr, DType::i32, {b}, dev), dcp, r, make_view(d_local.ptr, DType::i32, {b}, dev));
    DenseDecodeArgs g;
    g.q = make_view(d_q.ptr, DType::bf16, {b, 1, h, d}, dev);
    g.cache = shard.cache;
    g.block_table = make_view(c.d_table.ptr, DType::i32, {b, c.max_blocks}, dev);
    g.seqlens = make_view(d_local.ptr, DType::i32, {b}, dev);
    g.out = make_view(static_cast<uint16_t*>(parts.ptr) + static_cast<size_t>(r) * b * h * kDv, DType::bf16, {b, 1, h, kDv}, dev);
    g.lse = make_view(static_cast<float*>(lse_all.ptr) + static_cast<size_t>(r) * b * h, DType::f32, {b, 1, h}, dev);
    DeviceBuffer ws(dense_decode_workspace_size(g));
    dense_decode(g, {nullptr, {ws.ptr, ws.bytes}});
    GPU_CHECK(cudaDeviceSynchronize());
  }
  combine_and_check(N, b, h, parts, lse_all, sink, bf16_to_float(out), lse);
}

TEST(GpuDcp, ShardedSparseDecodeCombinesToUnsharded) {
  run_sparse_dcp(2, 1);
  run_sparse_dcp(4, 64);
  run_sparse_dcp(8, 16);
}

TEST(GpuDcp, ShardedDenseDecodeCombinesToUnsharded) {
  run_dense_dcp(2, 64);
  run_dense_dcp(4, 1);
  run_dense_dcp(8, 128);
}

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
// Both methods of dcp_combine (smla/dcp.h).
class GpuDcpMethod : public ::testing::TestWithParam<DcpCombineMethod> {};
INSTANTIATE_TEST_SUITE_P(Methods, GpuDcpMethod,
                         ::testing::Values(DcpCombineMethod::reduce_scatter, DcpCombineMethod::all_to_all),
                         [](const auto& info) {
                           return std::string(info.param == DcpCombineMethod::all_to_all ? "AllToAll" : "ReduceScatter");
                         });

TEST_P(GpuDcpMethod, CombineOverOneRankCommunicator) {
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
  a.method = GetParam();
  DeviceBuffer ws(dcp_combine_workspace_size(a));
  dcp_combine(a, comm, {nullptr, {ws.ptr, ws.bytes}});
  GPU_CHECK(cudaDeviceSynchronize());
  expect_out_close(download<float>(d_out, out_ref.size()), to_double(out_ref), "combined out");
  expect_lse_close(download<float>(d_lse, lse_ref.size()), to_double(lse_ref), "combined lse");
  ncclCommDestroy(comm);
}

// What a rank refuses before its first collective, with the argument named: a misaligned
// workspace (its floats would fault mid-call), too small a one; and a call without tokens needs
// none (its size query says 0).
TEST_P(GpuDcpMethod, RefusesBeforeAnyCollective) {
  ncclComm_t comm;
  int dev = 0;
  ASSERT_EQ(ncclCommInitAll(&comm, 1, &dev), ncclSuccess);
  const int T = 3, h = 8, d_v = 512;
  DeviceBuffer d_out_local(T * h * d_v * 2), d_lse_local(T * h * 4), d_out(T * h * d_v * 4), d_lse(T * h * 4);
  DcpCombineArgs a;
  a.out_local = make_view(d_out_local.ptr, DType::bf16, {T, h, d_v}, cuda_device(0));
  a.lse_local = make_view(d_lse_local.ptr, DType::f32, {T, h}, cuda_device(0));
  a.out = make_view(d_out.ptr, DType::f32, {T, h, d_v}, cuda_device(0));
  a.lse = make_view(d_lse.ptr, DType::f32, {T, h}, cuda_device(0));
  a.method = GetParam();
  const size_t need = dcp_combine_workspace_size(a);
  DeviceBuffer ws(need + 16);
  auto* base = static_cast<uint8_t*>(ws.ptr);
  expect_error([&] { dcp_combine(a, comm, {nullptr, {base + 2, need}}); }, {"workspace must be aligned to 16 bytes", "% 16 = 2"});
  expect_error([&] { dcp_combine(a, comm, {nullptr, {base, need - 1}}); }, {"workspace must be at least"});
  DcpCombineArgs none = a;  // no tokens: no workspace
  none.out_local.shape[0] = none.lse_local.shape[0] = none.out.shape[0] = none.lse.shape[0] = 0;
  EXPECT_EQ(dcp_combine_workspace_size(none), 0u);
  dcp_combine(none, comm, {nullptr, {nullptr, 0}});
  // An error the caller left behind (here a failed allocation) is reported before the first
  // collective, not by the rescale's launch check between them: out stays as it was.
  GPU_CHECK(cudaMemset(d_out.ptr, 0xff, T * h * d_v * 4));
  GPU_CHECK(cudaDeviceSynchronize());
  void* huge = nullptr;
  ASSERT_NE(cudaMalloc(&huge, size_t{1} << 62), cudaSuccess);
  bool threw = false;
  try {
    dcp_combine(a, comm, {nullptr, {base, need}});
  } catch (const RuntimeError& e) {
    threw = true;
    EXPECT_NE(std::string(e.what()).find("cudaPeekAtLastError"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(threw) << "a stale CUDA error was not reported";
  EXPECT_EQ(cudaGetLastError(), cudaErrorMemoryAllocation);  // reported, not cleared: still the caller's
  GPU_CHECK(cudaDeviceSynchronize());
  std::vector<uint32_t> out_bits(static_cast<size_t>(T) * h * d_v);
  GPU_CHECK(cudaMemcpy(out_bits.data(), d_out.ptr, out_bits.size() * 4, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(std::all_of(out_bits.begin(), out_bits.end(), [](uint32_t v) { return v == 0xffffffffu; }));
  dcp_combine(a, comm, {nullptr, {base, need}});  // and the aligned call still runs
  GPU_CHECK(cudaDeviceSynchronize());
  ncclCommDestroy(comm);
}

// Two GPUs, one thread per rank on communicators from ncclCommInitAll: every rank's combined
// heads must equal the merge of both partials computed here (dcp_rescale on the CPU, summed).
TEST_P(GpuDcpMethod, CombineAcrossTwoGpus) {
  int count = 0;
  cudaGetDeviceCount(&count);
  if (count < 2) GTEST_SKIP() << "needs 2 GPUs, this machine has " << count;
  const int N = 2, T = 5, h = 16, d_v = 512, hr = h / N;
  std::vector<std::vector<uint16_t>> out_local(N);
  std::vector<float> lse_all = random_f32(N * T * h, -3.f, 3.f);
  lse_all[3] = -INFINITY;  // rank 0 empty for one head
  auto sink = random_f32(h, -1.f, 1.f);
  std::vector<float> want(static_cast<size_t>(N) * T * hr * d_v, 0.f), want_lse;
  for (int r = 0; r < N; ++r) {
    out_local[r] = random_bf16(static_cast<size_t>(T) * h * d_v);
    std::vector<float> scaled(want.size()), lse(static_cast<size_t>(T) * hr);
    DcpRescaleArgs rs;
    rs.out_local = make_view(out_local[r].data(), DType::bf16, {T, h, d_v});
    rs.lse_all = make_view(lse_all.data(), DType::f32, {N, T, h});
    rs.rank = r;
    rs.attn_sink = make_view(sink.data(), DType::f32, {h});
    rs.scaled = make_view(scaled.data(), DType::f32, {N, T, hr, d_v});
    rs.lse = make_view(lse.data(), DType::f32, {T, hr});
    dcp_rescale(rs);
    for (size_t e = 0; e < want.size(); ++e) want[e] += scaled[e];
    want_lse.insert(want_lse.end(), lse.begin(), lse.end());
  }
  ncclComm_t comms[N];
  int devs[N] = {0, 1};
  ASSERT_EQ(ncclCommInitAll(comms, N, devs), ncclSuccess);
  std::vector<std::vector<float>> got(N), got_lse(N);
  std::vector<std::string> errors(N);
  std::vector<std::thread> ranks;
  for (int r = 0; r < N; ++r)
    ranks.emplace_back([&, r] {
      cudaSetDevice(r);
      std::vector<float> lse_local(lse_all.begin() + static_cast<size_t>(r) * T * h, lse_all.begin() + static_cast<size_t>(r + 1) * T * h);
      DeviceBuffer d_out_local = upload(out_local[r]), d_lse_local = upload(lse_local), d_sink = upload(sink);
      DeviceBuffer d_out = upload(std::vector<float>(static_cast<size_t>(T) * hr * d_v, NAN));
      DeviceBuffer d_lse = upload(std::vector<float>(static_cast<size_t>(T) * hr, NAN));
      DcpCombineArgs a;
      a.out_local = make_view(d_out_local.ptr, DType::bf16, {T, h, d_v}, cuda_device(r));
      a.lse_local = make_view(d_lse_local.ptr, DType::f32, {T, h}, cuda_device(r));
      a.attn_sink = make_view(d_sink.ptr, DType::f32, {h}, cuda_device(r));
      a.world = N;
      a.rank = r;
      a.out = make_view(d_out.ptr, DType::f32, {T, hr, d_v}, cuda_device(r));
      a.lse = make_view(d_lse.ptr, DType::f32, {T, hr}, cuda_device(r));
      a.method = GetParam();
      DeviceBuffer ws(dcp_combine_workspace_size(a));
      try {
        dcp_combine(a, comms[r], {nullptr, {ws.ptr, ws.bytes}});
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
      cudaDeviceSynchronize();
      got[r] = download<float>(d_out, static_cast<size_t>(T) * hr * d_v);
      got_lse[r] = download<float>(d_lse, static_cast<size_t>(T) * hr);
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < N; ++r) {
    EXPECT_EQ(errors[r], "") << "rank " << r;
    const size_t n = static_cast<size_t>(T) * hr * d_v;
    expect_out_close(got[r], std::vector<double>(want.begin() + r * n, want.begin() + (r + 1) * n), "rank " + std::to_string(r) + " out");
    expect_lse_close(got_lse[r], std::vector<double>(want_lse.begin() + r * T * hr, want_lse.begin() + (r + 1) * T * hr),
                     "rank " + std::to_string(r) + " lse");
    ncclCommDestroy(comms[r]);
  }
}
#endif

}  // namespace
}  // namespace smla::test
