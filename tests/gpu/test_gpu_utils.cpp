// Cache writers/readers, merge_states and the index utilities on the GPU: identical to the
// CPU backend (bytes for the writers, values for the rest); and CUDA-graph replay.
#include <climits>
#include <cmath>

#include "gpu/gpu_util.h"

namespace smla::test {
namespace {

TEST(GpuCacheIo, WriterBytesEqualCpuAndGatherMatches) {
  for (CacheFormat f : {CacheFormat::bf16, CacheFormat::fp16, CacheFormat::fp8_e4m3, CacheFormat::fp8_ds_mla,
                        CacheFormat::fp8_model1}) {
    SCOPED_TRACE(format_name(f));
    const int d_qk = f == CacheFormat::fp8_model1 ? 512 : 576, ps = 16;
    const int64_t blocks = 8, T = 100;
    TestCache host = make_cache(f, blocks, ps, d_qk, 1, f == CacheFormat::fp8_e4m3 ? 0.037f : 1.0f);
    std::vector<uint8_t> before = host.bytes;
    auto kv_c = random_bf16(T * (d_qk - 64), -3.f, 3.f);
    auto k_pe = random_bf16(T * 64);
    std::vector<int64_t> slots(T);
    for (int64_t i = 0; i < T; ++i) slots[i] = i % 9 == 0 ? -1 : (i % 13 == 0 ? blocks * ps + 3 : i + 7);
    WriteCacheArgs w;
    w.kv_c = make_view(kv_c.data(), DType::bf16, {T, d_qk - 64});
    w.k_pe = make_view(k_pe.data(), DType::bf16, {T, 64});
    w.slot_mapping = make_view(slots.data(), DType::i64, {T});
    w.cache = host.host;
    write_cache(w);  // CPU
    DeviceBuffer dkv = upload(kv_c), dpe = upload(k_pe), dsl = upload(slots);
    TestCache dev = make_cache(f, blocks, ps, d_qk, 1, host.host.k_scale);
    GPU_CHECK(cudaMemcpy(dev.dev_bytes.ptr, before.data(), before.size(), cudaMemcpyHostToDevice));
    WriteCacheArgs g = w;
    g.kv_c = on_device(w.kv_c, dkv);
    g.k_pe = on_device(w.k_pe, dpe);
    g.slot_mapping = on_device(w.slot_mapping, dsl);
    g.cache = dev.dev;
    write_cache(g);
    GPU_CHECK(cudaDeviceSynchronize());
    auto got = download<uint8_t>(dev.dev_bytes, before.size());
    ASSERT_EQ(got, host.bytes) << "device writer bytes differ from the CPU writer";

    const int64_t N = 300;
    std::vector<int32_t> gs = hostile_indices(N, blocks * ps);
    std::vector<uint16_t> ref(N * d_qk);
    GatherCacheArgs r;
    r.cache = host.host;
    r.slots = make_view(gs.data(), DType::i32, {N});
    r.out = make_view(ref.data(), DType::bf16, {N, d_qk});
    gather_cache(r);
    DeviceBuffer dgs = upload(gs), dout = upload(std::vector<uint16_t>(N * d_qk, bf16_nan()));
    GatherCacheArgs gg = r;
    gg.cache = dev.dev;
    gg.slots = on_device(r.slots, dgs);
    gg.out = on_device(r.out, dout);
    gather_cache(gg);
    GPU_CHECK(cudaDeviceSynchronize());
    ASSERT_EQ(download<uint16_t>(dout, N * d_qk), ref) << "device gather differs from the CPU gather";
  }
}

TEST(GpuMergeStates, MatchesCpu) {
  const int n = 5, T = 7, h = 12, d_v = 512;
  auto parts = random_f32(n * T * h * d_v, -1.f, 1.f);
  auto lse = random_f32(n * T * h, -5.f, 5.f);
  for (size_t i = 0; i < lse.size(); i += 4) lse[i] = -INFINITY;
  for (int i = 0; i < n; ++i) lse[(i * T + 2) * h + 3] = -INFINITY;  // a row with no part
  lse[1] = NAN;
  std::vector<float> sink(h);
  for (auto& x : sink) x = uniform(-1.f, 1.f);
  MergeStatesArgs a;
  a.out_parts = make_view(parts.data(), DType::f32, {n, T, h, d_v});
  a.lse_parts = make_view(lse.data(), DType::f32, {n, T, h});
  a.attn_sink = make_view(sink.data(), DType::f32, {h});
  std::vector<float> out_ref(T * h * d_v), lse_ref(T * h);
  a.out = make_view(out_ref.data(), DType::f32, {T, h, d_v});
  a.lse = make_view(lse_ref.data(), DType::f32, {T, h});
  merge_states(a);
  DeviceBuffer dp = upload(parts), dl = upload(lse), ds = upload(sink);
  DeviceBuffer dout = upload(std::vector<float>(T * h * d_v, NAN)), dlse = upload(std::vector<float>(T * h, NAN));
  MergeStatesArgs g = a;
  g.out_parts = on_device(a.out_parts, dp);
  g.lse_parts = on_device(a.lse_parts, dl);
  g.attn_sink = on_device(a.attn_sink, ds);
  g.out = on_device(a.out, dout);
  g.lse = on_device(a.lse, dlse);
  merge_states(g);
  GPU_CHECK(cudaDeviceSynchronize());
  expect_out_close(download<float>(dout, T * h * d_v), to_double(out_ref), "out");
  expect_lse_close(download<float>(dlse, T * h), to_double(lse_ref), "lse");
}

TEST(GpuMetadata, MatchesCpuOnHostileValues) {
  const int64_t b = 6, max_blocks = 9, T = 40, k = 5;
  std::vector<int32_t> table(b * max_blocks);
  for (auto& x : table) x = static_cast<int32_t>(uniform_int(-2, 50));
  std::vector<int32_t> req(T), pos(T * k), pos1(T);
  std::vector<int64_t> pos64(T);
  for (auto& x : req) x = static_cast<int32_t>(uniform_int(-1, b));
  for (auto& x : pos) x = static_cast<int32_t>(uniform_int(-3, max_blocks * 16 + 5));
  for (auto& x : pos1) x = static_cast<int32_t>(uniform_int(-3, 400));
  for (auto& x : pos64) x = uniform_int(-3, 600);
  pos[0] = INT_MIN;
  pos[1] = INT_MAX;
  std::vector<int32_t> qsl = {0, 3, 3, 10, 8, 20, 40};  // one decreasing step on purpose
  auto same = [](auto run_cpu, auto run_gpu, auto out_cpu, size_t n) {
    run_cpu();
    auto got = run_gpu();
    ASSERT_EQ(got.size(), n);
    EXPECT_EQ(got, out_cpu());
  };
  {  // positions_to_slots
    std::vector<int32_t> slots(T * k, 7);
    DeviceBuffer dt = upload(table), dr = upload(req), dp = upload(pos), ds(T * k * 4);
    same([&] { positions_to_slots(make_view(table.data(), DType::i32, {b, max_blocks}), 16,
                                  make_view(req.data(), DType::i32, {T}), make_view(pos.data(), DType::i32, {T, k}),
                                  make_view(slots.data(), DType::i32, {T, k})); },
         [&] { positions_to_slots(make_view(dt.ptr, DType::i32, {b, max_blocks}, cuda_device(0)), 16,
                                  make_view(dr.ptr, DType::i32, {T}, cuda_device(0)),
                                  make_view(dp.ptr, DType::i32, {T, k}, cuda_device(0)),
                                  make_view(ds.ptr, DType::i32, {T, k}, cuda_device(0)));
               cudaDeviceSynchronize();
               return download<int32_t>(ds, T * k); },
         [&] { return slots; }, T * k);
  }
  {  // sliding window
    const int W = 12;
    std::vector<int32_t> out(T * W);
    DeviceBuffer dp = upload(pos1), dout(T * W * 4);
    same([&] { sliding_window_indices(make_view(pos1.data(), DType::i32, {T}), W, make_view(out.data(), DType::i32, {T, W})); },
         [&] { sliding_window_indices(make_view(dp.ptr, DType::i32, {T}, cuda_device(0)), W,
                                      make_view(dout.ptr, DType::i32, {T, W}, cuda_device(0)));
               cudaDeviceSynchronize();
               return download<int32_t>(dout, T * W); },
         [&] { return out; }, T * W);
  }
  {  // compressed slot mapping
    std::vector<int64_t> out(T);
    DeviceBuffer dp = upload(pos64), dr = upload(req), dt = upload(table), dout(T * 8);
    same([&] { compressed_slot_mapping(make_view(pos64.data(), DType::i64, {T}), make_view(req.data(), DType::i32, {T}),
                                       make_view(table.data(), DType::i32, {b, max_blocks}), 4, 16,
                                       make_view(out.data(), DType::i64, {T})); },
         [&] { compressed_slot_mapping(make_view(dp.ptr, DType::i64, {T}, cuda_device(0)),
                                       make_view(dr.ptr, DType::i32, {T}, cuda_device(0)),
                                       make_view(dt.ptr, DType::i32, {b, max_blocks}, cuda_device(0)), 4, 16,
                                       make_view(dout.ptr, DType::i64, {T}, cuda_device(0)));
               cudaDeviceSynchronize();
               return download<int64_t>(dout, T); },
         [&] { return out; }, T);
  }
  {  // req_id_per_token
    std::vector<int32_t> out(T);
    DeviceBuffer dq = upload(qsl), dout(T * 4);
    const int64_t nb = static_cast<int64_t>(qsl.size());
    same([&] { req_id_per_token(make_view(qsl.data(), DType::i32, {nb}), make_view(out.data(), DType::i32, {T})); },
         [&] { req_id_per_token(make_view(dq.ptr, DType::i32, {nb}, cuda_device(0)),
                                make_view(dout.ptr, DType::i32, {T}, cuda_device(0)));
               cudaDeviceSynchronize();
               return download<int32_t>(dout, T); },
         [&] { return out; }, T);
  }
  {  // page table from req_to_token
    const int64_t max_reqs = 4, max_ctx = 100, nb = 5, max_pages = 8;
    std::vector<int32_t> r2t(max_reqs * max_ctx), pool(nb), lens(nb), out(nb * max_pages);
    for (auto& x : r2t) x = static_cast<int32_t>(uniform_int(-5, 5000));
    for (auto& x : pool) x = static_cast<int32_t>(uniform_int(-1, max_reqs));
    for (auto& x : lens) x = static_cast<int32_t>(uniform_int(-3, 200));
    DeviceBuffer dr = upload(r2t), dp = upload(pool), dl = upload(lens), dout(nb * max_pages * 4);
    same([&] { page_table_from_req_to_token(make_view(r2t.data(), DType::i32, {max_reqs, max_ctx}),
                                            make_view(pool.data(), DType::i32, {nb}), make_view(lens.data(), DType::i32, {nb}),
                                            16, make_view(out.data(), DType::i32, {nb, max_pages})); },
         [&] { page_table_from_req_to_token(make_view(dr.ptr, DType::i32, {max_reqs, max_ctx}, cuda_device(0)),
                                            make_view(dp.ptr, DType::i32, {nb}, cuda_device(0)),
                                            make_view(dl.ptr, DType::i32, {nb}, cuda_device(0)), 16,
                                            make_view(dout.ptr, DType::i32, {nb, max_pages}, cuda_device(0)));
               cudaDeviceSynchronize();
               return download<int32_t>(dout, nb * max_pages); },
         [&] { return out; }, nb * max_pages);
  }
  {  // dcp local lengths and split schedule
    std::vector<int32_t> lens(300);
    for (auto& x : lens) x = static_cast<int32_t>(uniform_int(-10, 40000));
    lens[0] = INT_MAX;
    lens[1] = INT_MIN;
    const int64_t n = static_cast<int64_t>(lens.size());
    std::vector<int32_t> out(n), offs(n + 1);
    DeviceBuffer dl = upload(lens), dout(n * 4), doffs((n + 1) * 4);
    same([&] { dcp_local_seqlens(make_view(lens.data(), DType::i32, {n}), {4, 64}, 3, make_view(out.data(), DType::i32, {n})); },
         [&] { dcp_local_seqlens(make_view(dl.ptr, DType::i32, {n}, cuda_device(0)), {4, 64}, 3,
                                 make_view(dout.ptr, DType::i32, {n}, cuda_device(0)));
               cudaDeviceSynchronize();
               return download<int32_t>(dout, n); },
         [&] { return out; }, n);
    SplitSchedulePlan plan{132, 64, 2048};
    same([&] { decode_split_schedule(make_view(lens.data(), DType::i32, {n}), plan, make_view(offs.data(), DType::i32, {n + 1})); },
         [&] { decode_split_schedule(make_view(dl.ptr, DType::i32, {n}, cuda_device(0)), plan,
                                     make_view(doffs.ptr, DType::i32, {n + 1}, cuda_device(0)));
               cudaDeviceSynchronize();
               return download<int32_t>(doffs, n + 1); },
         [&] { return offs; }, n + 1);
  }
}

// dcp_local_topk: the kernel's packed rows, counts and topk_length equal the CPU's bit for
// bit, outputs poisoned first: strided positions and table rows, hostile positions and table
// entries, rows shorter and longer than a warp's 32-entry chunk, s_q past the CTA's 8 warps,
// more requests than the grid has CTAs, with and without topk_length.
TEST(GpuMetadata, DcpLocalTopkMatchesCpu) {
  struct Case {
    int N, I, page;
    int64_t b, s_q, k, len;  // len: positions fall in [-3, len + 100]
  };
  const Device dev = cuda_device(0);
  for (Case c : {Case{2, 1, 16, 5, 1, 37, 20000}, Case{4, 64, 64, 3, 3, 2048, 20000}, Case{2, 64, 1, 7, 9, 100, 20000},
                 Case{4, 1, 7, 2, 2, 1, 500}, Case{2, 1, 16, 70000, 1, 4, 200}}) {
    SCOPED_TRACE("N " + std::to_string(c.N) + " I " + std::to_string(c.I) + " b " + std::to_string(c.b) + " s_q " +
                 std::to_string(c.s_q) + " k " + std::to_string(c.k));
    const int64_t max_blocks = uniform_int(1, c.len / c.N / c.page + 2), table_st = max_blocks + 2;
    const int64_t st1 = c.k + 3, st0 = c.s_q * st1 + 5;
    std::vector<int32_t> pos(c.b * st0), table(c.b * table_st);
    for (auto& x : pos) x = static_cast<int32_t>(uniform_int(-3, c.len + 100));
    for (size_t e = 0; e < pos.size(); e += 7) pos[e] = pos[e / 2];  // duplicates
    pos[0] = INT_MAX;
    pos[1] = INT_MIN;
    for (auto& x : table) x = static_cast<int32_t>(uniform_int(-2, 1 << 20));
    for (size_t e = 0; e < table.size(); e += 11) table[e] = INT_MAX / c.page + (c.page > 1);  // slots past INT32_MAX
    const auto P = make_strided_view(pos.data(), DType::i32, {c.b, c.s_q, c.k}, {st0, st1, 1});
    const auto Bt = make_strided_view(table.data(), DType::i32, {c.b, max_blocks}, {table_st, 1});
    DeviceBuffer dpos = upload(pos), dtable = upload(table);
    const auto dP = on_device(P, dpos), dBt = on_device(Bt, dtable);
    const int64_t n = c.b * c.s_q * c.k, rows = c.b * c.s_q;
    for (int rank = 0; rank < c.N; ++rank) {
      for (bool with_tl : {true, false}) {
        std::vector<int32_t> slots(n, 0x5a5a5a5a), counts(rows, 0x5a5a5a5a), tl(c.b, 0x5a5a5a5a);
        DeviceBuffer dslots = upload(slots), dcounts = upload(counts), dtl = upload(tl);
        dcp_local_topk(P, Bt, c.page, {c.N, c.I}, rank, make_view(slots.data(), DType::i32, {c.b, c.s_q, c.k}),
                       make_view(counts.data(), DType::i32, {c.b, c.s_q}),
                       with_tl ? make_view(tl.data(), DType::i32, {c.b}) : TensorView{});
        dcp_local_topk(dP, dBt, c.page, {c.N, c.I}, rank, make_view(dslots.ptr, DType::i32, {c.b, c.s_q, c.k}, dev),
                       make_view(dcounts.ptr, DType::i32, {c.b, c.s_q}, dev),
                       with_tl ? make_view(dtl.ptr, DType::i32, {c.b}, dev) : TensorView{});
        GPU_CHECK(cudaDeviceSynchronize());
        ASSERT_EQ(download<int32_t>(dslots, n), slots) << "slots, rank " << rank;
        ASSERT_EQ(download<int32_t>(dcounts, rows), counts) << "counts, rank " << rank;
        ASSERT_EQ(download<int32_t>(dtl, c.b), tl) << (with_tl ? "topk_length" : "an absent topk_length written")
                                                   << ", rank " << rank;
      }
    }
  }
}

// A graph captured once replays with new indices, lengths and sequence lengths read on the
// device, and gives the new correct result.
TEST(GpuGraph, SparseDecodeReplaysWithNewIndices) {
  TestCache cache = make_cache(CacheFormat::fp8_ds_mla, 64, 64, 576);
  const int b = 2, s_q = 1, h = 32, topk = 512;
  auto q = random_bf16(b * s_q * h * 576);
  DeviceBuffer dq = upload(q), didx(b * s_q * topk * 4), dtl(b * 4);
  DeviceBuffer dout(b * s_q * h * kDv * 2), dlse(b * s_q * h * 4);
  SparseDecodeArgs g;
  g.q = make_view(dq.ptr, DType::bf16, {b, s_q, h, 576}, cuda_device(0));
  g.cache = cache.dev;
  g.indices = make_view(didx.ptr, DType::i32, {b, s_q, topk}, cuda_device(0));
  g.topk_length = make_view(dtl.ptr, DType::i32, {b}, cuda_device(0));
  g.out = make_view(dout.ptr, DType::bf16, {b, s_q, h, kDv}, cuda_device(0));
  g.lse = make_view(dlse.ptr, DType::f32, {b, s_q, h}, cuda_device(0));
  DeviceBuffer ws(sparse_decode_workspace_size(g));
  cudaStream_t stream;
  GPU_CHECK(cudaStreamCreate(&stream));
  std::vector<int32_t> idx0(b * s_q * topk, 0), tl0(b, topk);
  GPU_CHECK(cudaMemcpy(didx.ptr, idx0.data(), idx0.size() * 4, cudaMemcpyHostToDevice));
  GPU_CHECK(cudaMemcpy(dtl.ptr, tl0.data(), tl0.size() * 4, cudaMemcpyHostToDevice));
  sparse_decode(g, {stream, {ws.ptr, ws.bytes}});  // warm-up outside capture (one-time setup)
  GPU_CHECK(cudaStreamSynchronize(stream));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  GPU_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  sparse_decode(g, {stream, {ws.ptr, ws.bytes}});
  GPU_CHECK(cudaStreamEndCapture(stream, &graph));
  GPU_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int round = 0; round < 3; ++round) {
    auto idx = hostile_indices(b * s_q * topk, 64 * 64);
    std::vector<int32_t> tl = {static_cast<int32_t>(uniform_int(0, topk)), static_cast<int32_t>(uniform_int(0, topk))};
    GPU_CHECK(cudaMemcpyAsync(didx.ptr, idx.data(), idx.size() * 4, cudaMemcpyHostToDevice, stream));
    GPU_CHECK(cudaMemcpyAsync(dtl.ptr, tl.data(), tl.size() * 4, cudaMemcpyHostToDevice, stream));
    GPU_CHECK(cudaMemsetAsync(dout.ptr, 0xff, dout.bytes, stream));
    GPU_CHECK(cudaGraphLaunch(exec, stream));
    GPU_CHECK(cudaStreamSynchronize(stream));
    SparseDecodeArgs r;
    r.q = make_view(q.data(), DType::bf16, {b, s_q, h, 576});
    r.cache = cache.host;
    r.indices = make_view(idx.data(), DType::i32, {b, s_q, topk});
    r.topk_length = make_view(tl.data(), DType::i32, {b});
    std::vector<uint16_t> out_ref(b * s_q * h * kDv);
    std::vector<float> lse_ref(b * s_q * h);
    r.out = make_view(out_ref.data(), DType::bf16, {b, s_q, h, kDv});
    r.lse = make_view(lse_ref.data(), DType::f32, {b, s_q, h});
    sparse_decode(r);
    expect_out_close(bf16_to_float(download<uint16_t>(dout, out_ref.size())), to_double(bf16_to_float(out_ref)),
                     "graph replay out, round " + std::to_string(round));
    expect_lse_close(download<float>(dlse, lse_ref.size()), to_double(lse_ref), "graph replay lse");
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// 16 heads: a 16-row tile; 128: two 64-row tiles.
void dense_graph_replays(int h) {
  SCOPED_TRACE("h_q " + std::to_string(h));
  const int b = 3, s_q = 2, ps = 64, mb = 16;
  TestCache cache = make_cache(CacheFormat::bf16, b * mb, ps, 576);
  auto q = random_bf16(b * s_q * h * 576);
  std::vector<int32_t> bt(b * mb);
  for (size_t i = 0; i < bt.size(); ++i) bt[i] = static_cast<int32_t>(i);
  DeviceBuffer dq = upload(q), dbt = upload(bt), dseq(b * 4), dout(b * s_q * h * kDv * 2), dlse(b * s_q * h * 4);
  DenseDecodeArgs g;
  g.q = make_view(dq.ptr, DType::bf16, {b, s_q, h, 576}, cuda_device(0));
  g.cache = cache.dev;
  g.block_table = make_view(dbt.ptr, DType::i32, {b, mb}, cuda_device(0));
  g.seqlens = make_view(dseq.ptr, DType::i32, {b}, cuda_device(0));
  g.causal = true;
  g.out = make_view(dout.ptr, DType::bf16, {b, s_q, h, kDv}, cuda_device(0));
  g.lse = make_view(dlse.ptr, DType::f32, {b, s_q, h}, cuda_device(0));
  DeviceBuffer ws(dense_decode_workspace_size(g));
  cudaStream_t stream;
  GPU_CHECK(cudaStreamCreate(&stream));
  std::vector<int32_t> seq0(b, 1);
  GPU_CHECK(cudaMemcpy(dseq.ptr, seq0.data(), b * 4, cudaMemcpyHostToDevice));
  dense_decode(g, {stream, {ws.ptr, ws.bytes}});
  GPU_CHECK(cudaStreamSynchronize(stream));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  GPU_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  dense_decode(g, {stream, {ws.ptr, ws.bytes}});
  GPU_CHECK(cudaStreamEndCapture(stream, &graph));
  GPU_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int round = 0; round < 3; ++round) {
    std::vector<int32_t> seq(b);
    for (auto& x : seq) x = static_cast<int32_t>(uniform_int(0, mb * ps));
    GPU_CHECK(cudaMemcpyAsync(dseq.ptr, seq.data(), b * 4, cudaMemcpyHostToDevice, stream));
    GPU_CHECK(cudaGraphLaunch(exec, stream));
    GPU_CHECK(cudaStreamSynchronize(stream));
    DenseDecodeArgs r = g;
    r.q = make_view(q.data(), DType::bf16, {b, s_q, h, 576});
    r.cache = cache.host;
    r.block_table = make_view(bt.data(), DType::i32, {b, mb});
    r.seqlens = make_view(seq.data(), DType::i32, {b});
    std::vector<uint16_t> out_ref(b * s_q * h * kDv);
    std::vector<float> lse_ref(b * s_q * h);
    r.out = make_view(out_ref.data(), DType::bf16, {b, s_q, h, kDv});
    r.lse = make_view(lse_ref.data(), DType::f32, {b, s_q, h});
    dense_decode(r);
    expect_out_close(bf16_to_float(download<uint16_t>(dout, out_ref.size())), to_double(bf16_to_float(out_ref)),
                     "graph replay out, round " + std::to_string(round));
    expect_lse_close(download<float>(dlse, lse_ref.size()), to_double(lse_ref), "graph replay lse");
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST(GpuGraph, DenseDecodeReplaysWithNewSeqlens) {
  for (int h : {16, 128}) dense_graph_replays(h);
}

}  // namespace
}  // namespace smla::test

namespace smla::test {
namespace {

// merge_states, write_cache, positions_to_slots and dcp_local_topk captured in one graph,
// replayed with new inputs written on the device: each replay matches the CPU backend on the
// same inputs.
TEST(GpuGraph, MergeWriterAndIndexUtilitiesReplay) {
  const int n = 3, T = 4, h = 8, d_v = 512, ps = 16, blocks = 8, b = 2, mb = 4, k = 5;
  TestCache cache = make_cache(CacheFormat::fp8_ds_mla, blocks, ps, 576);
  const size_t cache_bytes = cache.bytes.size();
  DeviceBuffer parts(n * T * h * d_v * 4), lses(n * T * h * 4), out(T * h * d_v * 4), lse(T * h * 4);
  DeviceBuffer kv_c(T * 512 * 2), k_pe(T * 64 * 2), slots(T * 8);
  DeviceBuffer table(b * mb * 4), req(T * 4), pos(T * k * 4), pslots(T * k * 4);
  // dcp_local_topk of rank 1 of 2 (interleave 16): rows longer than a warp's chunk, and
  // positions whose local block is past the table.
  const int s_q2 = 2, k2 = 40, topk_rank = 1;
  const DcpLayout dcp{2, 16};
  DeviceBuffer gpos(b * s_q2 * k2 * 4), gslots(b * s_q2 * k2 * 4), gcounts(b * s_q2 * 4), gtl(b * 4);
  const Device dev = cuda_device(0);
  MergeStatesArgs m;
  m.out_parts = make_view(parts.ptr, DType::f32, {n, T, h, d_v}, dev);
  m.lse_parts = make_view(lses.ptr, DType::f32, {n, T, h}, dev);
  m.out = make_view(out.ptr, DType::f32, {T, h, d_v}, dev);
  m.lse = make_view(lse.ptr, DType::f32, {T, h}, dev);
  WriteCacheArgs w;
  w.kv_c = make_view(kv_c.ptr, DType::bf16, {T, 512}, dev);
  w.k_pe = make_view(k_pe.ptr, DType::bf16, {T, 64}, dev);
  w.slot_mapping = make_view(slots.ptr, DType::i64, {T}, dev);
  w.cache = cache.dev;
  auto run_all = [&](cudaStream_t s) {
    merge_states(m, {s, {}});
    write_cache(w, {s, {}});
    positions_to_slots(make_view(table.ptr, DType::i32, {b, mb}, dev), ps, make_view(req.ptr, DType::i32, {T}, dev),
                       make_view(pos.ptr, DType::i32, {T, k}, dev), make_view(pslots.ptr, DType::i32, {T, k}, dev),
                       {s, {}});
    dcp_local_topk(make_view(gpos.ptr, DType::i32, {b, s_q2, k2}, dev), make_view(table.ptr, DType::i32, {b, mb}, dev),
                   ps, dcp, topk_rank, make_view(gslots.ptr, DType::i32, {b, s_q2, k2}, dev),
                   make_view(gcounts.ptr, DType::i32, {b, s_q2}, dev), make_view(gtl.ptr, DType::i32, {b}, dev),
                   {s, {}});
  };
  cudaStream_t stream;
  GPU_CHECK(cudaStreamCreate(&stream));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  GPU_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  run_all(stream);
  GPU_CHECK(cudaStreamEndCapture(stream, &graph));
  GPU_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int round = 0; round < 3; ++round) {
    auto h_parts = random_f32(n * T * h * d_v, -1.f, 1.f);
    auto h_lses = random_f32(n * T * h, -3.f, 3.f);
    auto h_kv = random_bf16(T * 512, -2.f, 2.f);
    auto h_pe = random_bf16(T * 64);
    // Distinct slots (two writes to one slot may land in either order on the device), one
    // skipped and one past the cache.
    std::vector<int64_t> h_slots(T);
    for (int i = 0; i < T; ++i) h_slots[i] = (round * T + i) * 3 % (blocks * ps);
    h_slots[1] = -1;
    h_slots[2] = blocks * ps + 3;
    std::vector<int32_t> h_table(b * mb), h_req(T), h_pos(T * k);
    for (auto& x : h_table) x = static_cast<int32_t>(uniform_int(-1, blocks - 1));
    for (auto& x : h_req) x = static_cast<int32_t>(uniform_int(-1, b));
    for (auto& x : h_pos) x = static_cast<int32_t>(uniform_int(-2, mb * ps + 2));
    std::vector<int32_t> h_gpos(b * s_q2 * k2);
    for (auto& x : h_gpos) x = static_cast<int32_t>(uniform_int(-2, 2 * mb * ps * dcp.world));
    GPU_CHECK(cudaMemcpy(parts.ptr, h_parts.data(), h_parts.size() * 4, cudaMemcpyHostToDevice));
    GPU_CHECK(cudaMemcpy(lses.ptr, h_lses.data(), h_lses.size() * 4, cudaMemcpyHostToDevice));
    GPU_CHECK(cudaMemcpy(kv_c.ptr, h_kv.data(), h_kv.size() * 2, cudaMemcpyHostToDevice));
    GPU_CHECK(cudaMemcpy(k_pe.ptr, h_pe.data(), h_pe.size() * 2, cudaMemcpyHostToDevice));
    GPU_CHECK(cudaMemcpy(slots.ptr, h_slots.data(), h_slots.size() * 8, cudaMemcpyHostToDevice));
    GPU_CHECK(cudaMemcpy(table.ptr, h_table.data(), h_table.size() * 4, cudaMemcpyHostToDevice));
    GPU_CHECK(cudaMemcpy(req.ptr, h_req.data(), h_req.size() * 4, cudaMemcpyHostToDevice));
    GPU_CHECK(cudaMemcpy(pos.ptr, h_pos.data(), h_pos.size() * 4, cudaMemcpyHostToDevice));
    GPU_CHECK(cudaMemcpy(gpos.ptr, h_gpos.data(), h_gpos.size() * 4, cudaMemcpyHostToDevice));
    // Poisoned: every output value must come from this replay.
    GPU_CHECK(cudaMemset(gslots.ptr, 0x5a, gslots.bytes));
    GPU_CHECK(cudaMemset(gcounts.ptr, 0x5a, gcounts.bytes));
    GPU_CHECK(cudaMemset(gtl.ptr, 0x5a, gtl.bytes));
    GPU_CHECK(cudaGraphLaunch(exec, stream));
    GPU_CHECK(cudaStreamSynchronize(stream));

    std::vector<float> out_ref(T * h * d_v), lse_ref(T * h);
    MergeStatesArgs mr = m;
    mr.out_parts = make_view(h_parts.data(), DType::f32, {n, T, h, d_v});
    mr.lse_parts = make_view(h_lses.data(), DType::f32, {n, T, h});
    mr.out = make_view(out_ref.data(), DType::f32, {T, h, d_v});
    mr.lse = make_view(lse_ref.data(), DType::f32, {T, h});
    merge_states(mr);
    expect_out_close(download<float>(out, out_ref.size()), to_double(out_ref), "merge replay " + std::to_string(round));
    expect_lse_close(download<float>(lse, lse_ref.size()), to_double(lse_ref), "merge replay lse");

    WriteCacheArgs wr = w;
    wr.kv_c = make_view(h_kv.data(), DType::bf16, {T, 512});
    wr.k_pe = make_view(h_pe.data(), DType::bf16, {T, 64});
    wr.slot_mapping = make_view(h_slots.data(), DType::i64, {T});
    wr.cache = cache.host;
    write_cache(wr);  // the host copy follows the device one write for write
    EXPECT_EQ(download<uint8_t>(cache.dev_bytes, cache_bytes), cache.bytes) << "writer replay " << round;

    std::vector<int32_t> ps_ref(T * k);
    positions_to_slots(make_view(h_table.data(), DType::i32, {b, mb}), ps, make_view(h_req.data(), DType::i32, {T}),
                       make_view(h_pos.data(), DType::i32, {T, k}), make_view(ps_ref.data(), DType::i32, {T, k}));
    EXPECT_EQ(download<int32_t>(pslots, ps_ref.size()), ps_ref) << "positions_to_slots replay " << round;

    std::vector<int32_t> g_slots(b * s_q2 * k2), g_counts(b * s_q2), g_tl(b);
    dcp_local_topk(make_view(h_gpos.data(), DType::i32, {b, s_q2, k2}), make_view(h_table.data(), DType::i32, {b, mb}),
                   ps, dcp, topk_rank, make_view(g_slots.data(), DType::i32, {b, s_q2, k2}),
                   make_view(g_counts.data(), DType::i32, {b, s_q2}), make_view(g_tl.data(), DType::i32, {b}));
    EXPECT_EQ(download<int32_t>(gslots, g_slots.size()), g_slots) << "dcp_local_topk replay " << round;
    EXPECT_EQ(download<int32_t>(gcounts, g_counts.size()), g_counts) << "dcp_local_topk counts replay " << round;
    EXPECT_EQ(download<int32_t>(gtl, g_tl.size()), g_tl) << "dcp_local_topk topk_length replay " << round;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace smla::test
