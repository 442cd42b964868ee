// The CUDA attention kernels against the CPU backend (float64, itself tested against
// independent computations in tests/cpu), on fresh random inputs with hostile indices.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "gpu/gpu_util.h"

namespace smla::test {
namespace {

struct SparseCase {
  CacheFormat format;
  int d_qk, b, s_q, h_q, topk, page_size;
  int64_t blocks;
  bool topk_length, sink, extra;
  int extra_topk = 0, extra_page = 64;
  int check_b = -1;  // requests checked against the CPU (all when -1)
  // Every third page of each cache is NaN bytes; entries inside the lengths never name one,
  // entries past them always do: a kernel that reads (or fails to zero) a key it must skip
  // shows NaN.
  bool nan_past_length = false;
  int scale_spread = 0;  // make_cache's: per-tile scales across binades
  int out_pad = 0;  // out's head stride is kDv + out_pad bf16 values; the pad must stay unwritten
  std::vector<int32_t> lengths;  // topk_length's values when given (else random, the first topk, the second 0)
};

bool poisoned_page(int64_t slot, int page_size) { return (slot / page_size) % 3 == 2; }

// Fills the poisoned pages with 0xff (NaN in e4m3, bf16 and float32 scales) and re-uploads.
void poison_pages(TestCache& c) {
  const int64_t stride = c.host.data.stride[0] * static_cast<int64_t>(dtype_size(c.host.data.dtype));
  const int ps = c.host.page_size();
  for (int64_t blk = 0; blk < c.host.num_blocks(); ++blk)
    if (poisoned_page(blk * ps, ps)) std::memset(c.bytes.data() + blk * stride, 0xff, static_cast<size_t>(stride));
  cudaMemcpy(c.dev_bytes.ptr, c.bytes.data(), c.bytes.size(), cudaMemcpyHostToDevice);
}

// Entries j < len of each list move off poisoned pages; valid entries past len move onto one.
void steer_indices(std::vector<int32_t>& idx, int lists_per_req, int topk, const std::vector<int32_t>& len,
                   int64_t slots, int page_size) {
  for (size_t l = 0; l < idx.size() / topk; ++l) {
    const int n = len.empty() ? topk : std::clamp(len[l / lists_per_req], 0, topk);
    for (int j = 0; j < topk; ++j) {
      int32_t& x = idx[l * topk + j];
      if (x < 0 || x >= slots) continue;
      if (j < n && poisoned_page(x, page_size)) x -= page_size;
      if (j >= n && !poisoned_page(x, page_size)) {
        const int64_t y = (x / page_size / 3 * 3 + 2) * static_cast<int64_t>(page_size) + x % page_size;
        x = y < slots ? static_cast<int32_t>(y) : -1;
      }
    }
  }
}

// Checks requests [r0, r0 + n) of a GPU run against the CPU path on the same host inputs.
void check_sparse_range(const SparseCase& c, const SparseDecodeArgs& a, const std::vector<uint16_t>& out_gpu,
                        const std::vector<float>& lse_gpu, int r0, int n) {
  SCOPED_TRACE("requests " + std::to_string(r0) + ".." + std::to_string(r0 + n - 1));
  auto rows = [&](TensorView v) {
    v.data = static_cast<char*>(v.data) + r0 * v.stride[0] * static_cast<int64_t>(dtype_size(v.dtype));
    v.shape[0] = n;
    return v;
  };
  SparseDecodeArgs r = a;
  r.q = rows(a.q);
  r.indices = rows(a.indices);
  if (c.topk_length) r.topk_length = rows(a.topk_length);
  if (c.extra) {
    r.extra_indices = rows(a.extra_indices);
    r.extra_topk_length = rows(a.extra_topk_length);
  }
  const size_t per_req = static_cast<size_t>(c.s_q) * c.h_q;
  std::vector<uint16_t> out_ref(n * per_req * kDv);
  std::vector<float> lse_ref(n * per_req);
  r.out = make_view(out_ref.data(), DType::bf16, {n, c.s_q, c.h_q, kDv});
  r.lse = make_view(lse_ref.data(), DType::f32, {n, c.s_q, c.h_q});
  sparse_decode(r);
  const std::vector<uint16_t> out_part(out_gpu.begin() + r0 * per_req * kDv, out_gpu.begin() + (r0 + n) * per_req * kDv);
  const std::vector<float> lse_part(lse_gpu.begin() + r0 * per_req, lse_gpu.begin() + (r0 + n) * per_req);
  expect_out_close(bf16_to_float(out_part), to_double(bf16_to_float(out_ref)), "out");
  expect_lse_close(lse_part, to_double(lse_ref), "lse");
}

void run_sparse_decode(const SparseCase& c) {
  SCOPED_TRACE(std::string(format_name(c.format)) + " b=" + std::to_string(c.b) + " s_q=" + std::to_string(c.s_q) +
               " h_q=" + std::to_string(c.h_q) + " topk=" + std::to_string(c.topk) + " page=" + std::to_string(c.page_size));
  TestCache cache = make_cache(c.format, c.blocks, c.page_size, c.d_qk, 1, 1.0f, c.scale_spread);
  const int64_t slots = c.blocks * c.page_size;
  // q with a padded head stride: non-contiguous on purpose.
  const int64_t q_hs = c.d_qk + 64;
  auto q = random_bf16(static_cast<size_t>(c.b) * c.s_q * c.h_q * q_hs);
  auto idx = hostile_indices(static_cast<size_t>(c.b) * c.s_q * c.topk, slots);
  std::vector<int32_t> tl(c.b);
  for (auto& x : tl) x = static_cast<int32_t>(uniform_int(-3, c.topk + 5));
  if (c.b > 0) tl[0] = c.topk;
  if (c.b > 1) tl[1] = 0;
  if (!c.lengths.empty()) tl = c.lengths;
  std::vector<float> sink(c.h_q);
  for (int h = 0; h < c.h_q; ++h) sink[h] = h == 0 ? INFINITY : (h == 1 ? -INFINITY : uniform(-2.f, 2.f));

  TestCache extra;
  std::vector<int32_t> eidx, etl;
  if (c.extra) {
    extra = make_cache(c.format, 64, c.extra_page, c.d_qk);
    eidx = hostile_indices(static_cast<size_t>(c.b) * c.s_q * c.extra_topk, 64LL * c.extra_page);
    etl.resize(c.b);
    for (auto& x : etl) x = static_cast<int32_t>(uniform_int(0, c.extra_topk));
  }
  if (c.nan_past_length) {
    poison_pages(cache);
    steer_indices(idx, c.s_q, c.topk, c.topk_length ? tl : std::vector<int32_t>{}, slots, c.page_size);
    if (c.extra) {
      poison_pages(extra);
      steer_indices(eidx, c.s_q, c.extra_topk, etl, 64LL * c.extra_page, c.extra_page);
    }
  }

  SparseDecodeArgs a;
  a.q = make_strided_view(q.data(), DType::bf16, {c.b, c.s_q, c.h_q, c.d_qk},
                          {c.s_q * c.h_q * q_hs, c.h_q * q_hs, q_hs, 1});
  a.cache = cache.host;
  a.indices = make_view(idx.data(), DType::i32, {c.b, c.s_q, c.topk});
  if (c.topk_length) a.topk_length = make_view(tl.data(), DType::i32, {c.b});
  if (c.sink) a.attn_sink = make_view(sink.data(), DType::f32, {c.h_q});
  if (c.extra) {
    a.extra_cache = extra.host;
    a.extra_indices = make_view(eidx.data(), DType::i32, {c.b, c.s_q, c.extra_topk});
    a.extra_topk_length = make_view(etl.data(), DType::i32, {c.b});
  }
  const size_t n_out = static_cast<size_t>(c.b) * c.s_q * c.h_q * kDv, n_lse = static_cast<size_t>(c.b) * c.s_q * c.h_q;

  // GPU run over the whole batch, outputs poisoned with NaN.
  SparseDecodeArgs g = a;
  DeviceBuffer dq = upload(q), didx = upload(idx), dtl = upload(tl), dsink = upload(sink), deidx, detl;
  g.q = on_device(a.q, dq);
  g.cache = cache.dev;
  g.indices = on_device(a.indices, didx);
  if (c.topk_length) g.topk_length = on_device(a.topk_length, dtl);
  if (c.sink) g.attn_sink = on_device(a.attn_sink, dsink);
  if (c.extra) {
    deidx = upload(eidx);
    detl = upload(etl);
    g.extra_cache = extra.dev;
    g.extra_indices = on_device(a.extra_indices, deidx);
    g.extra_topk_length = on_device(a.extra_topk_length, detl);
  }
  const int64_t o_hs = kDv + c.out_pad;
  DeviceBuffer dout = upload(std::vector<uint16_t>(n_lse * o_hs, bf16_nan()));
  DeviceBuffer dlse = upload(std::vector<float>(n_lse, NAN));
  g.out = make_strided_view(dout.ptr, DType::bf16, {c.b, c.s_q, c.h_q, kDv}, {c.s_q * c.h_q * o_hs, c.h_q * o_hs, o_hs, 1},
                            cuda_device(0));
  g.lse = make_view(dlse.ptr, DType::f32, {c.b, c.s_q, c.h_q}, cuda_device(0));
  DeviceBuffer ws = poisoned_workspace(sparse_decode_workspace_size(g));
  sparse_decode(g, {nullptr, {ws.ptr, ws.bytes}});
  GPU_CHECK(cudaDeviceSynchronize());
  const auto out_padded = download<uint16_t>(dout, n_lse * o_hs);
  std::vector<uint16_t> out_gpu(n_out), pad;
  for (size_t row = 0; row < n_lse; ++row) {
    std::copy_n(out_padded.begin() + row * o_hs, kDv, out_gpu.begin() + row * kDv);
    pad.insert(pad.end(), out_padded.begin() + row * o_hs + kDv, out_padded.begin() + (row + 1) * o_hs);
  }
  EXPECT_TRUE(std::all_of(pad.begin(), pad.end(), [](uint16_t x) { return x == bf16_nan(); }))
      << "out written between its rows";
  auto lse_gpu = download<float>(dlse, n_lse);
  EXPECT_FALSE(any_nan_bf16(out_gpu)) << "NaN left in out (unwritten or leaked)";

  // CPU reference on check_b requests (all when -1): the first half and the last half of them,
  // so that a sampled batch also checks the units that CTAs reach last (views into the same
  // buffers).
  const int cb = c.check_b < 0 ? c.b : std::min(c.check_b, c.b);
  const int tail = cb / 2;
  check_sparse_range(c, a, out_gpu, lse_gpu, 0, cb - tail);
  if (tail > 0) check_sparse_range(c, a, out_gpu, lse_gpu, c.b - tail, tail);
}

TEST(GpuSparseDecode, V32Fp8DsMlaHeads) {
  // 128 heads: two 64-row tiles in a cluster pair that shares each block's gathers; 32 heads: a
  // 32-row tile whose two consumer warpgroups split the value columns.
  for (int h : {1, 16, 20, 32, 64, 128})
    run_sparse_decode({CacheFormat::fp8_ds_mla, 576, 3, 2, h, 256, 64, 64, true, true, false});
}

TEST(GpuSparseDecode, ScalesAcrossBinades) {
  // Per-tile scales that span binades, so a block's largest scale differs from block to block
  // (the caches above hold every scale in one binade): kernels that track a scale exponent
  // across blocks must rescale only the tiles whose exponent grew.
  for (int h : {16, 32, 64, 128}) {
    SparseCase c{CacheFormat::fp8_ds_mla, 576, 3, 2, h, 512, 64, 64, true, true, false};
    c.scale_spread = 6;
    run_sparse_decode(c);
  }
  SparseCase c{CacheFormat::fp8_model1, 512, 3, 2, 64, 256, 256, 12, true, true, true, 512, 64};
  c.scale_spread = 6;
  run_sparse_decode(c);
}

TEST(GpuSparseDecode, HeadTilesAndTokens) {
  // 16-, 32- and 64-row tiles, balanced tiles (h 96 = 2 x 48, h 40 = one padded 64-row tile),
  // s_q up to 4 (MTP).
  for (int h : {8, 24, 32, 40, 96})
    for (int s_q : {1, 3})
      run_sparse_decode({CacheFormat::fp8_ds_mla, 576, 2, s_q, h, 320, 64, 64, true, true, false});
  run_sparse_decode({CacheFormat::fp8_ds_mla, 576, 3, 4, 128, 200, 64, 64, true, true, false});
  run_sparse_decode({CacheFormat::fp8_ds_mla, 576, 2, 4, 16, 200, 64, 64, true, true, false});
}

TEST(GpuSparseDecode, StridedOut) {
  // One key block a request (no split): the 64-row CTAs stage O's bf16 rows in shared memory and
  // copy them out in bulk, here into an `out` whose rows are 8 values apart (16-byte aligned, as
  // the API requires); nothing is written between them. 16 heads: the narrow tiles' stores;
  // 128: pairs.
  for (int h : {16, 64, 128}) {
    SparseCase c{CacheFormat::fp8_ds_mla, 576, 5, 2, h, 64, 64, 48, true, true, false};
    c.out_pad = 8;
    run_sparse_decode(c);
  }
  // V4: 64 + 64 keys, enough requests that each is one split.
  SparseCase c{CacheFormat::fp8_model1, 512, 48, 1, 64, 64, 256, 12, true, true, true, 64, 64};
  c.out_pad = 8;
  c.check_b = 6;
  run_sparse_decode(c);
  // More units than CTAs: the persistent kernels, each CTA through several unsplit units (one
  // unit's rows still leaving while the next unit's Q arrives).
  for (int h : {64, 128}) {
    SparseCase many{CacheFormat::fp8_ds_mla, 576, 300, 1, h, 64, 64, 48, true, true, false};
    many.out_pad = 8;
    many.check_b = 6;
    run_sparse_decode(many);
  }
}

TEST(GpuSparseDecode, NanPagesPastLengthsAreNeverUsed) {
  for (int h : {16, 32, 64, 128}) {
    SparseCase c{CacheFormat::fp8_ds_mla, 576, 4, 2, h, 384, 64, 48, true, true, false};
    c.nan_past_length = true;
    run_sparse_decode(c);
  }
  for (int h : {16, 64}) {
    SparseCase c{CacheFormat::fp8_model1, 512, 4, 2, h, 128, 256, 12, true, true, true, 512, 64};
    c.nan_past_length = true;
    run_sparse_decode(c);
  }
  SparseCase c{CacheFormat::bf16, 576, 3, 1, 64, 300, 16, 96, true, true, false};
  c.nan_past_length = true;
  run_sparse_decode(c);
}

TEST(GpuSparseDecode, V32RealShapeSampled) {
  // b 128, s_q 2, topk 2048: the whole batch on the GPU (splits off), 4 requests checked.
  run_sparse_decode({CacheFormat::fp8_ds_mla, 576, 128, 2, 128, 2048, 64, 4096, false, false, false, 0, 64, 4});
  run_sparse_decode({CacheFormat::fp8_ds_mla, 576, 128, 1, 16, 2048, 64, 4096, true, true, false, 0, 64, 4});
  run_sparse_decode({CacheFormat::fp8_ds_mla, 576, 128, 1, 32, 2048, 64, 4096, true, true, false, 0, 64, 4});
  // More 64-row units than SMs: the persistent kernel, each CTA walking several requests
  // (the b128 s_q2 h128 case above does the same with pair clusters).
  run_sparse_decode({CacheFormat::fp8_ds_mla, 576, 300, 1, 64, 256, 64, 2048, true, true, false, 0, 64, 6});
  run_sparse_decode({CacheFormat::fp8_model1, 512, 200, 2, 64, 128, 256, 512, true, true, true, 512, 64, 4});
}

TEST(GpuSparseDecode, SmallBatchSplitsKv) {
  // b = 1 and 2 spread one request over many CTAs: the combine path.
  for (int h : {16, 32, 128})
    run_sparse_decode({CacheFormat::fp8_ds_mla, 576, 1, 1, h, 2048, 64, 1024, true, true, false});
  run_sparse_decode({CacheFormat::fp8_ds_mla, 576, 2, 2, 64, 2048, 64, 1024, true, true, false});
  // Without topk_length every request has the same key count: the split count follows from the
  // shapes (no schedule kernel). b = 1 h128: 32 splits, four combine warps per head; b = 32 h16
  // topk 512: 3 splits, one warp per head.
  run_sparse_decode({CacheFormat::fp8_ds_mla, 576, 1, 1, 128, 2048, 64, 1024, false, true, false});
  run_sparse_decode({CacheFormat::fp8_ds_mla, 576, 32, 1, 16, 512, 64, 1024, false, true, false, 0, 64, 4});
  // More splits than a warp has lanes (b = 1 h16 topk 4096: 64 one-block splits): the combine
  // reads the lse of splits 32 on in its loops, not from the lanes; by shapes and by the schedule.
  run_sparse_decode({CacheFormat::fp8_ds_mla, 576, 1, 1, 16, 4096, 64, 1024, false, true, false});
  run_sparse_decode({CacheFormat::fp8_ds_mla, 576, 1, 1, 16, 4096, 64, 1024, true, true, false});
}

TEST(GpuSparseDecode, NarrowTilesUniformSplits) {
  // Uniform key counts (no topk_length: the split count follows from shapes) at small batches
  // on narrow tiles: 16-row tiles of 128 and 64 heads (11 and 8 splits), 16 heads, the 32-row
  // tiles' split value columns, s_q 2, fp8_model1's one-block splits, bf16 rows; hostile
  // indices and a sink throughout.
  run_sparse_decode({CacheFormat::fp8_ds_mla, 576, 1, 1, 128, 2048, 64, 1024, false, true, false});
  run_sparse_decode({CacheFormat::fp8_ds_mla, 576, 1, 2, 64, 1024, 64, 1024, false, true, false});
  run_sparse_decode({CacheFormat::fp8_ds_mla, 576, 2, 1, 16, 2048, 64, 1024, false, true, false});
  run_sparse_decode({CacheFormat::fp8_ds_mla, 576, 3, 1, 32, 700, 64, 1024, false, true, false});
  run_sparse_decode({CacheFormat::fp8_model1, 512, 1, 2, 64, 640, 256, 16, false, true, false});
  run_sparse_decode({CacheFormat::bf16, 512, 1, 1, 8, 1000, 16, 128, false, false, false});
  // Padded rows: h 8 in a 16-row tile (10 one-block splits), h 100 as seven tiles of 15 (8
  // splits); s_q 3 (11 splits); keys that end inside a block; NaN pages in the cache that no
  // valid index names.
  run_sparse_decode({CacheFormat::fp8_ds_mla, 576, 1, 1, 8, 600, 64, 1024, false, true, false});
  run_sparse_decode({CacheFormat::fp8_ds_mla, 576, 1, 1, 100, 1000, 64, 1024, false, true, false});
  run_sparse_decode({CacheFormat::fp8_ds_mla, 576, 1, 3, 16, 700, 64, 1024, false, false, false});
  // Chunks of 4 blocks where the shapes alone give 5 (meta::split_per_unit_alternating): b2 h128
  // below and b1 s_q2 h128 here, 8 splits each on 132 SMs, the last block part full.
  run_sparse_decode({CacheFormat::fp8_ds_mla, 576, 1, 2, 128, 2000, 64, 1024, false, true, false});
  SparseCase c{CacheFormat::fp8_ds_mla, 576, 2, 1, 128, 2048, 64, 1024, false, true, false};
  c.nan_past_length = true;
  run_sparse_decode(c);
  // 16-row tiles where 64-row splits would be of two blocks and the 16-row launch is one wave
  // (narrow_floor): b4 h128 (4 splits of 8), b4 s_q3 h128 topk 512 (one split of 8 blocks: no
  // combine).
  run_sparse_decode({CacheFormat::fp8_ds_mla, 576, 4, 1, 128, 2048, 64, 1024, false, true, false});
  run_sparse_decode({CacheFormat::fp8_ds_mla, 576, 4, 3, 128, 512, 64, 1024, false, true, false});
}

TEST(GpuSparseDecode, NarrowTilesSplitsFromLengths) {
  // The schedule kernel's splits on 16-row tiles: b3 h128 with random lengths (16-row by the
  // two-block rule), b2 h128 with lengths 2048 and 2000 (7 splits of 5 blocks a request, the
  // second's last block of 16 keys) and 2048 and 64 (11 of 3, one of 1).
  run_sparse_decode({CacheFormat::fp8_ds_mla, 576, 3, 1, 128, 2048, 64, 1024, true, true, false});
  for (std::vector<int32_t> lengths : {std::vector<int32_t>{2048, 2000}, std::vector<int32_t>{2048, 64}}) {
    SparseCase c{CacheFormat::fp8_ds_mla, 576, 2, 1, 128, 2048, 64, 1024, true, true, false};
    c.lengths = lengths;
    run_sparse_decode(c);
  }
  SparseCase c{CacheFormat::fp8_ds_mla, 576, 2, 2, 64, 2048, 64, 1024, true, true, false};
  c.lengths = {2048, 2040};  // s_q 2, the second request's keys ending inside a block
  c.nan_past_length = true;
  run_sparse_decode(c);
}

TEST(GpuSparseDecode, SplitsFromLengthsAtBatchEdges) {
  // The device split schedule from random lengths (negative, zero, past topk) at 31-33 requests:
  // up to 32 requests the kernels' own (split_lookup.cuh inline_splits), written by CTA (0, 0, 0)
  // into the poisoned workspace for the combine; persistent 64-row CTAs and 33 requests read the
  // schedule kernel's. 64-row tiles, the extra key set, the 16-row tiles; the first and last three
  // requests checked.
  for (int b : {31, 32, 33})
    run_sparse_decode({CacheFormat::fp8_ds_mla, 576, b, 1, 64, 512, 64, 1024, true, true, false, 0, 64, 6});
  run_sparse_decode({CacheFormat::fp8_model1, 512, 32, 1, 64, 128, 256, 16, true, true, true, 512, 64, 6});
  run_sparse_decode({CacheFormat::fp8_ds_mla, 576, 32, 2, 16, 1024, 64, 1024, true, false, false, 0, 64, 6});
}

TEST(GpuSparseDecode, PageSizes) {
  for (int ps : {1, 16, 64, 256})
    run_sparse_decode({CacheFormat::fp8_ds_mla, 576, 2, 1, 32, 192, ps, 4096 / ps, true, true, false});
}

TEST(GpuSparseDecode, Bf16Cache) {
  run_sparse_decode({CacheFormat::bf16, 576, 2, 2, 24, 300, 64, 32, true, true, false});
  run_sparse_decode({CacheFormat::bf16, 512, 2, 1, 8, 100, 16, 64, true, false, false});
  run_sparse_decode({CacheFormat::bf16, 576, 2, 2, 128, 300, 64, 32, true, true, false});
  run_sparse_decode({CacheFormat::bf16, 512, 3, 1, 64, 260, 32, 32, true, true, false});
  // More units than CTAs, with lengths (request 1's is zero, others random, a few negative): the
  // persistent CTAs walk units without key blocks between units with them.
  SparseCase many{CacheFormat::bf16, 576, 300, 1, 64, 256, 64, 600, true, true, false};
  many.check_b = 6;
  run_sparse_decode(many);
}

TEST(GpuSparseDecode, V4Model1WithExtraCache) {
  // 128-slot window from a page-256 cache plus a 512-slot compressed set from a page-64 cache.
  run_sparse_decode({CacheFormat::fp8_model1, 512, 4, 2, 64, 128, 256, 16, true, true, true, 512, 64});
  run_sparse_decode({CacheFormat::fp8_model1, 512, 2, 1, 128, 128, 256, 16, false, true, true, 512, 64});
  run_sparse_decode({CacheFormat::fp8_model1, 512, 64, 1, 16, 128, 256, 64, true, true, true, 512, 64, 3});
  run_sparse_decode({CacheFormat::fp8_model1, 512, 8, 2, 128, 128, 256, 16, true, true, true, 1024, 64, 2});
}

TEST(GpuSparseDecode, AllInvalidIndicesGiveZeroAndMinusInf) {
  // One key block: one CTA per head tile, two-CTA clusters; 2048 keys at b = 2: narrow tiles
  // over uniform splits, every split empty (the combine merges lse -inf partials).
  for (auto [h, topk] : {std::pair{16, 64}, std::pair{128, 64}, std::pair{16, 2048}, std::pair{128, 2048}}) {
    SCOPED_TRACE("h_q=" + std::to_string(h) + " topk=" + std::to_string(topk));
    TestCache cache = make_cache(CacheFormat::fp8_ds_mla, 4, 64, 576);
    const int b = 2, s_q = 1;
    auto q = random_bf16(static_cast<size_t>(b) * s_q * h * 576);
    std::vector<int32_t> idx(b * s_q * topk);
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = i % 3 == 0 ? -1 : (i % 3 == 1 ? std::numeric_limits<int32_t>::min() : 256);
    std::vector<float> sink(h, 0.5f);
    DeviceBuffer dq = upload(q), didx = upload(idx), dsink = upload(sink);
    DeviceBuffer dout = upload(std::vector<uint16_t>(b * s_q * h * kDv, bf16_nan()));
    DeviceBuffer dlse = upload(std::vector<float>(b * s_q * h, NAN));
    SparseDecodeArgs g;
    g.q = make_view(dq.ptr, DType::bf16, {b, s_q, h, 576}, cuda_device(0));
    g.cache = cache.dev;
    g.indices = make_view(didx.ptr, DType::i32, {b, s_q, topk}, cuda_device(0));
    g.attn_sink = make_view(dsink.ptr, DType::f32, {h}, cuda_device(0));
    g.out = make_view(dout.ptr, DType::bf16, {b, s_q, h, kDv}, cuda_device(0));
    g.lse = make_view(dlse.ptr, DType::f32, {b, s_q, h}, cuda_device(0));
    DeviceBuffer ws(sparse_decode_workspace_size(g));
    sparse_decode(g, {nullptr, {ws.ptr, ws.bytes}});
    GPU_CHECK(cudaDeviceSynchronize());
    for (uint16_t v : download<uint16_t>(dout, b * s_q * h * kDv)) ASSERT_EQ(v & 0x7fff, 0) << "out must be 0";
    for (float v : download<float>(dlse, b * s_q * h)) ASSERT_TRUE(std::isinf(v) && v < 0) << "lse must be -inf";
  }
}

TEST(GpuSparseDecode, TooSmallWorkspaceIsRejected) {
  TestCache cache = make_cache(CacheFormat::fp8_ds_mla, 4, 64, 576);
  DeviceBuffer dq(1 * 1 * 16 * 576 * 2), didx(64 * 4), dout(16 * kDv * 2), dlse(16 * 4);
  SparseDecodeArgs g;
  g.q = make_view(dq.ptr, DType::bf16, {1, 1, 16, 576}, cuda_device(0));
  g.cache = cache.dev;
  g.indices = make_view(didx.ptr, DType::i32, {1, 1, 64}, cuda_device(0));
  g.out = make_view(dout.ptr, DType::bf16, {1, 1, 16, kDv}, cuda_device(0));
  g.lse = make_view(dlse.ptr, DType::f32, {1, 1, 16}, cuda_device(0));
  ASSERT_GT(sparse_decode_workspace_size(g), 0u);
  expect_error([&] { sparse_decode(g, {nullptr, {nullptr, 0}}); }, {"workspace", "bytes"});
}

// ---------------------------------------------------------------- sparse_prefill
// Keys from bf16 kv rows, or (paged) from the slots of a paged cache in `format` with pages of
// `page` tokens (s_kv rounded up to whole pages).
// Returns the workspace the call asked for (nonzero only where sparse prefill splits a tail).
size_t run_sparse_prefill(int s_q, int h_q, int d_qk, int topk, int s_kv, int check_tokens,
                        std::optional<CacheFormat> paged = std::nullopt, int page = 64, int scale_spread = 0) {
  SCOPED_TRACE("prefill s_q=" + std::to_string(s_q) + " h_q=" + std::to_string(h_q) + " topk=" + std::to_string(topk) +
               (paged ? std::string(" from ") + format_name(*paged) + " page " + std::to_string(page) : ""));
  const int64_t kv_stride = d_qk + 32;  // padded rows
  TestCache cache;
  std::vector<uint16_t> kv;
  if (paged) {
    cache = make_cache(*paged, (s_kv + page - 1) / page, page, d_qk, 1, 1.0f, scale_spread);
    s_kv = static_cast<int>(cache.host.num_slots());
  } else {
    kv = random_bf16(static_cast<size_t>(s_kv) * kv_stride);
  }
  auto q = random_bf16(static_cast<size_t>(s_q) * h_q * d_qk);
  auto idx = hostile_indices(static_cast<size_t>(s_q) * topk, s_kv);
  std::vector<int32_t> tl(s_q);
  for (auto& x : tl) x = static_cast<int32_t>(uniform_int(-1, topk + 1));
  std::vector<float> sink(h_q);
  for (auto& x : sink) x = uniform(-1.f, 1.f);
  SparsePrefillArgs a;
  a.q = make_view(q.data(), DType::bf16, {s_q, h_q, d_qk});
  if (paged) a.cache = cache.host;
  else a.kv = make_strided_view(kv.data(), DType::bf16, {s_kv, d_qk}, {kv_stride, 1});
  a.indices = make_view(idx.data(), DType::i32, {s_q, topk});
  a.topk_length = make_view(tl.data(), DType::i32, {s_q});
  a.attn_sink = make_view(sink.data(), DType::f32, {h_q});
  DeviceBuffer dq = upload(q), dkv = upload(kv), didx = upload(idx), dtl = upload(tl), dsink = upload(sink);
  const size_t n_out = static_cast<size_t>(s_q) * h_q * kDv, n_l = static_cast<size_t>(s_q) * h_q;
  DeviceBuffer dout = upload(std::vector<uint16_t>(n_out, bf16_nan()));
  DeviceBuffer dlse = upload(std::vector<float>(n_l, NAN)), dmax = upload(std::vector<float>(n_l, NAN));
  SparsePrefillArgs g = a;
  g.q = on_device(a.q, dq);
  if (paged) g.cache = cache.dev;
  else g.kv = on_device(a.kv, dkv);
  g.indices = on_device(a.indices, didx);
  g.topk_length = on_device(a.topk_length, dtl);
  g.attn_sink = on_device(a.attn_sink, dsink);
  g.out = make_view(dout.ptr, DType::bf16, {s_q, h_q, kDv}, cuda_device(0));
  g.lse = make_view(dlse.ptr, DType::f32, {s_q, h_q}, cuda_device(0));
  g.max_logits = make_view(dmax.ptr, DType::f32, {s_q, h_q}, cuda_device(0));
  DeviceBuffer ws(sparse_prefill_workspace_size(g));
  sparse_prefill(g, {nullptr, {ws.ptr, ws.bytes}});
  const cudaError_t synced = cudaDeviceSynchronize();  // (GPU_CHECK's ASSERT needs a void function)
  EXPECT_EQ(synced, cudaSuccess) << cudaGetErrorString(synced);
  if (synced != cudaSuccess) return ws.bytes;
  auto out_gpu = download<uint16_t>(dout, n_out);
  auto lse_gpu = download<float>(dlse, n_l), max_gpu = download<float>(dmax, n_l);
  EXPECT_FALSE(any_nan_bf16(out_gpu));
  const int ct = std::min(check_tokens, s_q);
  SparsePrefillArgs r = a;
  r.q.shape[0] = r.indices.shape[0] = r.topk_length.shape[0] = ct;
  std::vector<uint16_t> out_ref(static_cast<size_t>(ct) * h_q * kDv);
  std::vector<float> lse_ref(static_cast<size_t>(ct) * h_q), max_ref(lse_ref.size());
  r.out = make_view(out_ref.data(), DType::bf16, {ct, h_q, kDv});
  r.lse = make_view(lse_ref.data(), DType::f32, {ct, h_q});
  r.max_logits = make_view(max_ref.data(), DType::f32, {ct, h_q});
  sparse_prefill(r);
  out_gpu.resize(out_ref.size());
  lse_gpu.resize(lse_ref.size());
  max_gpu.resize(max_ref.size());
  expect_out_close(bf16_to_float(out_gpu), to_double(bf16_to_float(out_ref)), "out");
  expect_lse_close(lse_gpu, to_double(lse_ref), "lse");
  expect_lse_close(max_gpu, to_double(max_ref), "max_logits");
  return ws.bytes;
}

TEST(GpuSparsePrefill, Shapes) {
  run_sparse_prefill(8, 128, 576, 512, 4096, 8);
  run_sparse_prefill(5, 16, 512, 300, 1000, 5);
  run_sparse_prefill(3, 5, 576, 64, 200, 3);
  // Every head tile of the sparse-decode family (16, 32, 64 rows; 96 = 2 x 48), d_qk 512 and 576.
  for (int h : {20, 32, 64, 96})
    for (int d : {576, 512}) run_sparse_prefill(6, h, d, 256 + h, 3000, 6);
}

// From a paged cache (SPEC §4.2): the packed formats' kernels that also keep max_logits, every
// head tile, pairs and persistent pairs (300 tokens of 128 heads exceed one wave), page sizes
// other than 64, and a bf16 cache.
TEST(GpuSparsePrefill, FromPagedCache) {
  for (int h : {16, 32, 64, 128}) {
    run_sparse_prefill(6, h, 576, 300, 2000, 6, CacheFormat::fp8_ds_mla);
    run_sparse_prefill(6, h, 512, 200 + h, 2000, 6, CacheFormat::fp8_model1, 48);
  }
  run_sparse_prefill(5, 20, 576, 128, 700, 5, CacheFormat::fp8_ds_mla, 16);
  run_sparse_prefill(300, 128, 576, 256, 4096, 4, CacheFormat::fp8_ds_mla);
  run_sparse_prefill(300, 64, 512, 256, 4096, 4, CacheFormat::fp8_model1, 256);
  run_sparse_prefill(6, 128, 576, 256, 2000, 6, CacheFormat::bf16, 16);
  run_sparse_prefill(6, 24, 512, 256, 2000, 6, CacheFormat::bf16);
}

TEST(GpuSparsePrefill, FromPagedCacheScalesAcrossBinades) {
  // As GpuSparseDecode.ScalesAcrossBinades, with the exact rescale rule of kernels that return
  // max_logits (O^T rescaled at every new maximum).
  for (int h : {16, 32, 64})
    run_sparse_prefill(6, h, 576, 300, 2000, 6, CacheFormat::fp8_ds_mla, 64, 6);
}

// More units than SMs, and a last round of the persistent walk that is part-empty (on 132 SMs
// 140 units leave 8 for it): built with the tail split (sparse_decode config.h
// SMLA_SD_TAIL_SPLIT=1) those 8 units run in parts that the combine merges, at 128 heads in the
// second head tile. Every token is checked, the tail's last; lengths of -1 .. topk + 1 give
// parts without keys.
TEST(GpuSparsePrefill, PersistentTail) {
  const size_t ws64 = run_sparse_prefill(140, 64, 512, 256, 4096, 140);
  const size_t ws128 = run_sparse_prefill(70, 128, 576, 384, 4096, 70);
  // A build with the tail split (SMLA_SD_TAIL_SPLIT=1) must take it here, or the test checks
  // nothing of it: its variant runs set SMLA_EXPECT_TAIL_SPLIT=1 (bench/sparse_decode_variants.sh).
  std::printf("[ tail     ] prefill workspace %zu and %zu bytes\n", ws64, ws128);
  if (const char* e = std::getenv("SMLA_EXPECT_TAIL_SPLIT"); e != nullptr && std::string(e) == "1") {
    EXPECT_GT(ws64, 0u);
    EXPECT_GT(ws128, 0u);
  }
}

TEST(GpuSparsePrefill, RealShapeSampled) {
  run_sparse_prefill(4096, 128, 576, 2048, 32768, 3);
}

// ---------------------------------------------------------------- dense_decode
struct DenseCase {
  CacheFormat format;
  DType q_dtype;
  int d_qk, b, s_q, h_q, h_kv, page_size, max_blocks;
  bool causal, sink;
  int check_b = -1;
  // Each request gets pages of its own, and the slots of positions past its seqlen (and every
  // page no request names) are NaN bytes: a kernel that reads a key it must skip shows NaN.
  bool poison = false;
  std::optional<float> softmax_scale;  // default d_qk^-0.5
};

void run_dense_decode(const DenseCase& c) {
  SCOPED_TRACE(std::string(format_name(c.format)) + " q=" + dtype_name(c.q_dtype) + " b=" + std::to_string(c.b) +
               " s_q=" + std::to_string(c.s_q) + " h_q=" + std::to_string(c.h_q) + " h_kv=" + std::to_string(c.h_kv) +
               " page=" + std::to_string(c.page_size) + " causal=" + std::to_string(c.causal));
  const int64_t blocks = static_cast<int64_t>(c.b) * c.max_blocks + 3;
  const float k_scale = c.format == CacheFormat::fp8_e4m3 ? 0.0123f : 1.0f;
  TestCache cache = make_cache(c.format, blocks, c.page_size, c.d_qk, c.h_kv, k_scale);
  const size_t nq = static_cast<size_t>(c.b) * c.s_q * c.h_q * c.d_qk;
  std::vector<uint8_t> q(nq * dtype_size(c.q_dtype));
  for (size_t i = 0; i < nq; ++i) {
    float v = uniform(-1.f, 1.f);
    if (c.q_dtype == DType::fp8_e4m3) q[i] = float_to_e4m3(v * 20.f);
    else {
      uint16_t bits = c.q_dtype == DType::f16 ? float_to_fp16_bits(v) : float_to_bf16_bits(v);
      std::memcpy(&q[2 * i], &bits, 2);
    }
  }
  std::vector<int32_t> bt(static_cast<size_t>(c.b) * c.max_blocks);
  if (c.poison) {
    std::vector<int32_t> perm(static_cast<size_t>(blocks));
    for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int32_t>(i);
    for (size_t i = perm.size() - 1; i > 0; --i) std::swap(perm[i], perm[static_cast<size_t>(uniform_int(0, static_cast<int64_t>(i)))]);
    for (size_t i = 0; i < bt.size(); ++i) bt[i] = perm[i];
  } else {
    for (auto& x : bt) x = static_cast<int32_t>(uniform_int(0, blocks - 1));
  }
  for (size_t i = 0; i < bt.size(); i += 7) bt[i] = (i % 2) ? -1 : static_cast<int32_t>(blocks + 5);  // hostile
  std::vector<int32_t> seq(c.b);
  const int cap = c.max_blocks * c.page_size;
  for (auto& x : seq) x = static_cast<int32_t>(uniform_int(1, cap));
  if (c.b > 1) seq[1] = 0;
  if (c.b > 2) seq[2] = cap + 100;  // clamped
  if (c.b > 3) seq[3] = -5;
  if (c.poison) {
    // Slot (blk, off) of an element-format cache: its h_kv rows at blk * page stride + off *
    // token stride (pages are padded, so the page stride is not page_size token strides).
    const int64_t es = static_cast<int64_t>(dtype_size(cache.host.data.dtype));
    const int64_t page_bytes = cache.host.data.stride[0] * es, token_bytes = cache.host.data.stride[1] * es;
    std::vector<char> keep(static_cast<size_t>(blocks * c.page_size), 0);
    for (int r = 0; r < c.b; ++r) {
      const int len = std::clamp(seq[r], 0, cap);
      for (int v = 0; v < len; ++v) {
        const int32_t blk = bt[static_cast<size_t>(r) * c.max_blocks + v / c.page_size];
        if (blk >= 0 && blk < blocks) keep[static_cast<size_t>(blk) * c.page_size + v % c.page_size] = 1;
      }
    }
    for (size_t slot = 0; slot < keep.size(); ++slot)
      if (!keep[slot])
        std::memset(cache.bytes.data() + static_cast<int64_t>(slot) / c.page_size * page_bytes +
                        static_cast<int64_t>(slot) % c.page_size * token_bytes,
                    0xff, static_cast<size_t>(token_bytes));
    cudaMemcpy(cache.dev_bytes.ptr, cache.bytes.data(), cache.bytes.size(), cudaMemcpyHostToDevice);
  }
  std::vector<float> sink(c.h_q);
  for (auto& x : sink) x = uniform(-1.f, 1.f);
  const DType out_dt = c.q_dtype == DType::f16 ? DType::f16 : DType::bf16;

  DenseDecodeArgs a;
  a.q = make_view(q.data(), c.q_dtype, {c.b, c.s_q, c.h_q, c.d_qk});
  a.cache = cache.host;
  a.block_table = make_view(bt.data(), DType::i32, {c.b, c.max_blocks});
  a.seqlens = make_view(seq.data(), DType::i32, {c.b});
  a.causal = c.causal;
  a.q_scale = c.q_dtype == DType::fp8_e4m3 ? 0.05f : 1.0f;
  a.softmax_scale = c.softmax_scale;
  if (c.sink) a.attn_sink = make_view(sink.data(), DType::f32, {c.h_q});
  const size_t n_out = static_cast<size_t>(c.b) * c.s_q * c.h_q * kDv, n_l = static_cast<size_t>(c.b) * c.s_q * c.h_q;
  DeviceBuffer dq = upload(q), dbt = upload(bt), dseq = upload(seq), dsink = upload(sink);
  DeviceBuffer dout = upload(std::vector<uint16_t>(n_out, 0x7fff)), dlse = upload(std::vector<float>(n_l, NAN));
  DenseDecodeArgs g = a;
  g.q = on_device(a.q, dq);
  g.cache = cache.dev;
  g.block_table = on_device(a.block_table, dbt);
  g.seqlens = on_device(a.seqlens, dseq);
  if (c.sink) g.attn_sink = on_device(a.attn_sink, dsink);
  g.out = make_view(dout.ptr, out_dt, {c.b, c.s_q, c.h_q, kDv}, cuda_device(0));
  g.lse = make_view(dlse.ptr, DType::f32, {c.b, c.s_q, c.h_q}, cuda_device(0));
  DeviceBuffer ws = poisoned_workspace(dense_decode_workspace_size(g));
  dense_decode(g, {nullptr, {ws.ptr, ws.bytes}});
  GPU_CHECK(cudaDeviceSynchronize());
  auto out_gpu = download<uint16_t>(dout, n_out);
  auto lse_gpu = download<float>(dlse, n_l);
  auto to_f = [&](const std::vector<uint16_t>& v) {
    std::vector<float> f(v.size());
    for (size_t i = 0; i < v.size(); ++i) f[i] = out_dt == DType::f16 ? fp16_bits_to_float(v[i]) : bf16_bits_to_float(v[i]);
    return f;
  };
  for (float x : to_f(out_gpu)) ASSERT_FALSE(std::isnan(x)) << "NaN left in out";
  const int cb = c.check_b < 0 ? c.b : std::min(c.b, c.check_b);
  DenseDecodeArgs r = a;
  r.q.shape[0] = r.block_table.shape[0] = r.seqlens.shape[0] = cb;
  std::vector<uint16_t> out_ref(static_cast<size_t>(cb) * c.s_q * c.h_q * kDv);
  std::vector<float> lse_ref(static_cast<size_t>(cb) * c.s_q * c.h_q);
  r.out = make_view(out_ref.data(), out_dt, {cb, c.s_q, c.h_q, kDv});
  r.lse = make_view(lse_ref.data(), DType::f32, {cb, c.s_q, c.h_q});
  dense_decode(r);
  out_gpu.resize(out_ref.size());
  lse_gpu.resize(lse_ref.size());
  expect_out_close(to_f(out_gpu), to_double(to_f(out_ref)), "out");
  // fp8 q: the FP8 tensor cores' short accumulator is the caller's bargain (SPEC §6).
  if (c.q_dtype == DType::fp8_e4m3) expect_lse_close(lse_gpu, to_double(lse_ref), "lse", 1e-3, 1e-4);
  else expect_lse_close(lse_gpu, to_double(lse_ref), "lse");
}

TEST(GpuDenseDecode, PageSizesAndCausal) {
  for (int ps : {16, 32, 64, 128, 256})
    for (int s_q : {1, 2, 3, 4})
      run_dense_decode({CacheFormat::bf16, DType::bf16, 576, 5, s_q, 16, 1, ps, 1024 / ps, true, true});
}

TEST(GpuDenseDecode, DtypesAndHeads) {
  run_dense_decode({CacheFormat::fp16, DType::f16, 576, 4, 2, 128, 1, 64, 8, true, false});
  run_dense_decode({CacheFormat::fp8_e4m3, DType::bf16, 576, 4, 1, 64, 1, 64, 8, false, true});
  run_dense_decode({CacheFormat::fp8_e4m3, DType::fp8_e4m3, 576, 4, 3, 16, 1, 16, 40, true, false});
  run_dense_decode({CacheFormat::bf16, DType::bf16, 512, 4, 1, 8, 2, 64, 6, false, true});
  run_dense_decode({CacheFormat::bf16, DType::bf16, 576, 3, 4, 40, 1, 1, 300, true, true});
}

// The calls the warp-specialized family takes (bf16 q and cache, one KV head, d_qk 576 / 512):
// every head tile (16, 32, 64 rows, pairs of 64-row tiles, h_q between tile sizes), causal
// tokens, odd page sizes, lengths that split the keys, NaN in every slot a call must skip.
TEST(GpuDenseDecode, WarpSpecializedHeadsTokensPages) {
  for (int h : {8, 16, 20, 32, 64, 96, 128})
    for (int s_q : {1, 2, 4})
      run_dense_decode({CacheFormat::bf16, DType::bf16, 576, 5, s_q, h, 1, 64, 10, s_q != 2, h % 3 == 0, -1, true});
  for (int ps : {1, 8, 16, 48, 256})
    for (int h : {16, 64})
      run_dense_decode({CacheFormat::bf16, DType::bf16, 576, 4, 3, h, 1, ps, 640 / ps, true, true, -1, true});
  run_dense_decode({CacheFormat::bf16, DType::bf16, 512, 4, 2, 16, 1, 64, 12, true, true, -1, true});
  run_dense_decode({CacheFormat::bf16, DType::bf16, 512, 4, 1, 128, 1, 64, 12, false, false, -1, true});
  // One request, long: the keys split over many CTAs and a combine.
  run_dense_decode({CacheFormat::bf16, DType::bf16, 576, 1, 1, 128, 1, 64, 64, false, true, -1, true});
  run_dense_decode({CacheFormat::bf16, DType::bf16, 576, 2, 2, 16, 1, 64, 128, true, false, -1, true});
}

// 65-128 heads on the TMA tiles (bf16, pages of 16, 32 or a multiple of 64; two head tiles a
// token, the second partial at 96): every TMA page size, causal tokens, partial blocks, NaN in
// every slot a call must skip, and a grid of two waves or more (the launch order that puts the
// CTAs reading the same keys side by side, work.cuh dense_cta_position).
TEST(GpuDenseDecode, HeadTilePairsOnTmaPages) {
  for (int ps : {16, 32, 64, 128, 256})
    for (int h : {96, 128})
      run_dense_decode({CacheFormat::bf16, DType::bf16, 576, 3, 2, h, 1, ps, 640 / ps, true, h == 96, -1, true});
  run_dense_decode({CacheFormat::bf16, DType::bf16, 512, 3, 3, 128, 1, 32, 20, true, true, -1, true});
  run_dense_decode({CacheFormat::bf16, DType::bf16, 576, 140, 2, 128, 1, 64, 4, true, false, 3, true});
}

// fp8_e4m3 caches with bf16 q and h_q <= 32 (the family's 16/32-row tiles, rows copied by the
// TMA unit and converted by the producers): every head tile, causal tokens, odd pages, hostile
// table entries, NaN bytes in every slot a call must skip, splits and a combine.
TEST(GpuDenseDecode, Fp8CacheOnFamily) {
  for (int h : {8, 16, 20, 32})
    for (int s_q : {1, 2, 4})
      run_dense_decode({CacheFormat::fp8_e4m3, DType::bf16, 576, 5, s_q, h, 1, 64, 10, s_q != 2, h % 3 == 2, -1, true});
  for (int ps : {1, 8, 16, 48, 256})
    run_dense_decode({CacheFormat::fp8_e4m3, DType::bf16, 576, 4, 3, 16, 1, ps, 640 / ps, true, true, -1, true});
  run_dense_decode({CacheFormat::fp8_e4m3, DType::bf16, 576, 1, 1, 32, 1, 64, 64, false, true, -1, true});
  run_dense_decode({CacheFormat::fp8_e4m3, DType::bf16, 576, 2, 2, 16, 1, 64, 128, true, false, -1, true});
}

// fp8_e4m3 caches above 32 heads, bf16 and fp8 q: the family's 64-row tiles (pairs of them at
// 65-128 heads, the persistent kernel beyond one wave; SMLA_SD_E4M3_WIDE=0 builds the generic
// kernel; with the measurement build SMLA_SD_E4M3_FP8=1, fp8 q on pages of 16, 32 or 64k tokens
// runs the FP8 tiles): head tiles, causal tokens, odd pages, NaN bytes in every slot a call must
// skip, one long request split over many CTAs.
TEST(GpuDenseDecode, Fp8CacheWideHeads) {
  for (int h : {40, 64, 96, 128})
    for (int s_q : {1, 2})
      for (DType qd : {DType::bf16, DType::fp8_e4m3})
        run_dense_decode({CacheFormat::fp8_e4m3, qd, 576, 5, s_q, h, 1, 64, 10, s_q != 1, h % 3 == 0, -1, true});
  for (int ps : {1, 16, 48, 256})
    run_dense_decode({CacheFormat::fp8_e4m3, DType::fp8_e4m3, 576, 4, 3, 128, 1, ps, 640 / ps, true, true, -1, true});
  run_dense_decode({CacheFormat::fp8_e4m3, DType::fp8_e4m3, 576, 1, 1, 128, 1, 64, 64, false, true, -1, true});
  run_dense_decode({CacheFormat::fp8_e4m3, DType::bf16, 576, 140, 2, 128, 1, 64, 4, true, false, 3, true});
}

// A softmax scale so small that its product with the fp8 scales underflows in float (a legal
// input: positive and finite): every key weighs the same, and masked keys (causal tokens, the
// last partial page, NaN bytes past each length) still weigh nothing, not NaN, on the 64-row
// tiles and the narrow ones.
TEST(GpuDenseDecode, UnderflowingScaleProduct) {
  for (int h : {16, 64})
    for (DType qd : {DType::bf16, DType::fp8_e4m3}) {
      DenseCase c{CacheFormat::fp8_e4m3, qd, 576, 3, 2, h, 1, 64, 6, true, false, -1, true};
      c.softmax_scale = 1e-44f;
      run_dense_decode(c);
    }
}

// Seqlens on the device: the split schedule at 32 and 33 requests (the kernels' own, then the
// schedule kernel's; GpuSparseDecode.SplitsFromLengthsAtBatchEdges).
TEST(GpuDenseDecode, SplitsAtBatchEdges) {
  for (int b : {32, 33})
    run_dense_decode({CacheFormat::bf16, DType::bf16, 576, b, 1, 16, 1, 64, 8, true, true, -1, true});
  run_dense_decode({CacheFormat::bf16, DType::bf16, 576, 32, 2, 128, 1, 64, 8, true, false, 8, true});
}

TEST(GpuDenseDecode, LongContextSampled) {
  run_dense_decode({CacheFormat::bf16, DType::bf16, 576, 8, 1, 128, 1, 64, 8192 / 64, true, false, 2});
  run_dense_decode({CacheFormat::bf16, DType::bf16, 576, 2, 2, 16, 1, 64, 32768 / 64, true, true, 1});
}

// ---------------------------------------------------------------- several devices
// A process that serves several GPUs launches the same kernels on each: a kernel's dynamic
// shared-memory limit is an attribute of the function on the device current at the call, and
// the persistent grid's resident clusters come from a query on that device (per_device.h). So
// the calls below run on device 1 after device 0 and on device 0 again, each checked.
TEST(GpuMultiDevice, KernelsOnEveryDevice) {
  int count = 0;
  cudaGetDeviceCount(&count);
  if (count < 2) GTEST_SKIP() << "needs 2 GPUs, this machine has " << count;
  for (int dev : {0, 1, 0}) {
    SCOPED_TRACE("device " + std::to_string(dev));
    ASSERT_EQ(cudaSetDevice(dev), cudaSuccess);
    // packed head-tile pairs beyond one wave (persistent clusters), 16-row raw-ring tiles, the
    // bf16-row tiles, dense decode on the TMA tiles and on the generic kernel, persistent prefill
    SparseCase pairs{CacheFormat::fp8_ds_mla, 576, 140, 1, 128, 256, 64, 600, true, true, false};
    pairs.check_b = 4;
    run_sparse_decode(pairs);
    run_sparse_decode({CacheFormat::fp8_ds_mla, 576, 3, 2, 16, 256, 64, 64, true, true, false});
    run_sparse_decode({CacheFormat::bf16, 576, 2, 2, 128, 300, 64, 32, true, true, false});
    run_dense_decode({CacheFormat::bf16, DType::bf16, 576, 5, 2, 128, 1, 64, 16, true, true});
    run_dense_decode({CacheFormat::fp16, DType::f16, 576, 4, 2, 128, 1, 64, 8, true, false});
    run_sparse_prefill(140, 64, 512, 256, 4096, 6);
  }
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
}

}  // namespace
}  // namespace smla::test
