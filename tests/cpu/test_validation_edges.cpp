// Edges of validation and of the mathematics: views on a device no backend runs on, lengths
// that disagree, and rows whose inputs are not finite (SPEC §3, §5; API.md "Rules common to
// the operations").
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "api/validate.h"
#include "common/test_util.h"
#include "smla/dcp.h"
#include "smla/metadata.h"
#include "smla/numeric.h"
#include "smla/ops.h"

namespace smla {
namespace {

namespace tu = smla::test;

constexpr int kD = 576;
const float kNan = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

// ------------------------------------------------------------------ devices
// A Device is plain data: a C++ caller (or a binding) can hand over a type outside the enum,
// or a negative CUDA index. No backend runs there; each entry point must say so, naming its
// reference argument, before anything runs — not fall through to the CPU backend.
const Device kUnknownType{static_cast<DeviceType>(7), 0};
const Device kNegativeCuda{DeviceType::cuda, -1};

void expect_device_rejected(const std::function<void(Device)>& call, const std::string& ref,
                            const std::vector<tu::Watched>& outputs) {
  for (Device d : {kUnknownType, kNegativeCuda}) {
    const std::string given = d.type == DeviceType::cuda ? "cuda:-1" : "device type 7";
    tu::expect_rejected_untouched({[&] { call(d); }}, {ref + " must be on cpu or a cuda device, got on " + given},
                                  outputs);
  }
}

TEST(DeviceValidation, NamesAreSpelledOut) {
  EXPECT_EQ(device_name(kCPU), "cpu");
  EXPECT_EQ(device_name(cuda_device(1)), "cuda:1");
  EXPECT_EQ(device_name(kUnknownType), "device type 7");
  EXPECT_EQ(device_name(Device{DeviceType::cpu, 2}), "cpu:2");
}

TEST(DeviceValidation, AttentionRejectsUnknownDevices) {
  std::vector<uint16_t> q = tu::random_bf16(2 * kD), cache = tu::random_bf16(8 * kD), kv = tu::random_bf16(6 * kD);
  std::vector<int32_t> idx = {0, 1, 2, 3}, bt = {0, 1}, seqlens = {5};
  std::vector<uint16_t> out(2 * kDv, tu::bf16_nan());
  std::vector<float> lse(2, tu::f32_nan()), max_logits(2, tu::f32_nan());
  const std::vector<tu::Watched> outs = {tu::watch("out", out), tu::watch("lse", lse)};

  auto decode_args = [&](Device d) {
    SparseDecodeArgs a;
    a.q = make_view(q.data(), DType::bf16, {1, 1, 2, kD}, d);
    a.cache = {make_view(cache.data(), DType::bf16, {2, 4, kD}, d), CacheFormat::bf16};
    a.indices = make_view(idx.data(), DType::i32, {1, 1, 4}, d);
    a.out = make_view(out.data(), DType::bf16, {1, 1, 2, kDv}, d);
    a.lse = make_view(lse.data(), DType::f32, {1, 1, 2}, d);
    return a;
  };
  // The unchanged call is valid on the CPU.
  std::vector<uint16_t> out_ok(2 * kDv);
  std::vector<float> lse_ok(2);
  {
    SparseDecodeArgs a = decode_args(kCPU);
    a.out.data = out_ok.data();
    a.lse.data = lse_ok.data();
    sparse_decode(a);
  }
  expect_device_rejected([&](Device d) { sparse_decode(decode_args(d)); }, "q", outs);
  expect_device_rejected([&](Device d) { sparse_decode_workspace_size(decode_args(d)); }, "q", outs);

  auto prefill_args = [&](Device d) {
    SparsePrefillArgs a;
    a.q = make_view(q.data(), DType::bf16, {1, 2, kD}, d);
    a.kv = make_view(kv.data(), DType::bf16, {6, kD}, d);
    a.indices = make_view(idx.data(), DType::i32, {1, 4}, d);
    a.out = make_view(out.data(), DType::bf16, {1, 2, kDv}, d);
    a.lse = make_view(lse.data(), DType::f32, {1, 2}, d);
    a.max_logits = make_view(max_logits.data(), DType::f32, {1, 2}, d);
    return a;
  };
  expect_device_rejected([&](Device d) { sparse_prefill(prefill_args(d)); }, "q",
                         {tu::watch("out", out), tu::watch("lse", lse), tu::watch("max_logits", max_logits)});

  auto dense_args = [&](Device d) {
    DenseDecodeArgs a;
    a.q = make_view(q.data(), DType::bf16, {1, 1, 2, kD}, d);
    a.cache = {make_view(cache.data(), DType::bf16, {2, 4, 1, kD}, d), CacheFormat::bf16};
    a.block_table = make_view(bt.data(), DType::i32, {1, 2}, d);
    a.seqlens = make_view(seqlens.data(), DType::i32, {1}, d);
    a.out = make_view(out.data(), DType::bf16, {1, 1, 2, kDv}, d);
    a.lse = make_view(lse.data(), DType::f32, {1, 1, 2}, d);
    return a;
  };
  expect_device_rejected([&](Device d) { dense_decode(dense_args(d)); }, "q", outs);
  expect_device_rejected([&](Device d) { dense_decode_workspace_size(dense_args(d)); }, "q", outs);
}

TEST(DeviceValidation, MergeCacheDcpAndIndexUtilitiesRejectUnknownDevices) {
  std::vector<float> parts = tu::random_f32(2 * 2 * 4, -1, 1), lses = tu::random_f32(4, -1, 1);
  std::vector<float> out(2 * 4, tu::f32_nan()), lse(2, tu::f32_nan());
  expect_device_rejected(
      [&](Device d) {
        MergeStatesArgs a;
        a.out_parts = make_view(parts.data(), DType::f32, {2, 1, 2, 4}, d);
        a.lse_parts = make_view(lses.data(), DType::f32, {2, 1, 2}, d);
        a.out = make_view(out.data(), DType::f32, {1, 2, 4}, d);
        a.lse = make_view(lse.data(), DType::f32, {1, 2}, d);
        merge_states(a);
      },
      "out_parts", {tu::watch("out", out), tu::watch("lse", lse)});

  std::vector<float> scaled(2 * 1 * 1 * 4, tu::f32_nan());
  expect_device_rejected(
      [&](Device d) {
        DcpRescaleArgs a;
        a.out_local = make_view(parts.data(), DType::f32, {1, 2, 4}, d);
        a.lse_all = make_view(lses.data(), DType::f32, {2, 1, 2}, d);
        a.rank = 0;
        a.scaled = make_view(scaled.data(), DType::f32, {2, 1, 1, 4}, d);
        a.lse = make_view(lse.data(), DType::f32, {1, 1}, d);
        dcp_rescale(a);
      },
      "out_local", {tu::watch("scaled", scaled), tu::watch("lse", lse)});

  std::vector<uint16_t> cache(8 * kD, 0), kv_c = tu::random_bf16(3 * 512), k_pe = tu::random_bf16(3 * 64);
  std::vector<int64_t> slots = {0, 5, 7};
  expect_device_rejected(
      [&](Device d) {
        WriteCacheArgs a;
        a.kv_c = make_view(kv_c.data(), DType::bf16, {3, 512}, d);
        a.k_pe = make_view(k_pe.data(), DType::bf16, {3, 64}, d);
        a.slot_mapping = make_view(slots.data(), DType::i64, {3}, d);
        a.cache = {make_view(cache.data(), DType::bf16, {2, 4, kD}, d), CacheFormat::bf16};
        write_cache(a);
      },
      "cache", {tu::watch("cache", cache)});

  std::vector<uint16_t> rows(3 * kD, tu::bf16_nan());
  expect_device_rejected(
      [&](Device d) {
        GatherCacheArgs a;
        a.cache = {make_view(cache.data(), DType::bf16, {2, 4, kD}, d), CacheFormat::bf16};
        a.slots = make_view(slots.data(), DType::i64, {3}, d);
        a.out = make_view(rows.data(), DType::bf16, {3, kD}, d);
        gather_cache(a);
      },
      "cache", {tu::watch("out", rows)});

  std::vector<int32_t> positions = {0, 3, 5}, window(3 * 2, -7), qsl = {0, 2, 3}, req(3, -7), split(4, -7);
  expect_device_rejected(
      [&](Device d) {
        sliding_window_indices(make_view(positions.data(), DType::i32, {3}, d), 2,
                               make_view(window.data(), DType::i32, {3, 2}, d));
      },
      "positions", {tu::watch("out", window)});
  expect_device_rejected(
      [&](Device d) {
        req_id_per_token(make_view(qsl.data(), DType::i32, {3}, d), make_view(req.data(), DType::i32, {3}, d));
      },
      "query_start_loc", {tu::watch("out", req)});
  expect_device_rejected(
      [&](Device d) {
        decode_split_schedule(make_view(positions.data(), DType::i32, {3}, d), SplitSchedulePlan{4, 64, 128},
                              make_view(split.data(), DType::i32, {4}, d));
      },
      "lengths", {tu::watch("split_offsets", split)});
}

TEST(DeviceValidation, ATensorOnAnUnknownDeviceAmongCpuTensorsIsNamed) {
  std::vector<uint16_t> cache(8 * kD, 0), kv_c = tu::random_bf16(3 * 512), k_pe = tu::random_bf16(3 * 64);
  std::vector<int64_t> slots = {0, 5, 7};
  WriteCacheArgs a;
  a.kv_c = make_view(kv_c.data(), DType::bf16, {3, 512}, kUnknownType);
  a.k_pe = make_view(k_pe.data(), DType::bf16, {3, 64});
  a.slot_mapping = make_view(slots.data(), DType::i64, {3});
  a.cache = {make_view(cache.data(), DType::bf16, {2, 4, kD}), CacheFormat::bf16};
  tu::expect_rejected_untouched({[&] { write_cache(a); }}, {"kv_c must be on cpu like cache, got on device type 7"},
                                {tu::watch("cache", cache)});
}

// ------------------------------------------------------------------ lengths
// write_cache takes its token count from kv_c, k_pe and slot_mapping together: the error names
// the one that disagrees with the other two.
struct WriteCase {
  std::vector<uint16_t> cache = std::vector<uint16_t>(8 * kD, 0);
  std::vector<uint16_t> kv_c = tu::random_bf16(4 * 512), k_pe = tu::random_bf16(4 * 64);
  std::vector<int64_t> slots = {0, 3, 5, 7};
  WriteCacheArgs args(int64_t kv_rows, int64_t pe_rows, int64_t n_slots) {
    WriteCacheArgs a;
    a.kv_c = make_view(kv_c.data(), DType::bf16, {kv_rows, 512});
    a.k_pe = make_view(k_pe.data(), DType::bf16, {pe_rows, 64});
    a.slot_mapping = make_view(slots.data(), DType::i64, {n_slots});
    a.cache = {make_view(cache.data(), DType::bf16, {2, 4, kD}), CacheFormat::bf16};
    return a;
  }
  void expect(int64_t kv_rows, int64_t pe_rows, int64_t n_slots, const std::string& message) {
    WriteCacheArgs a = args(kv_rows, pe_rows, n_slots);
    tu::expect_rejected_untouched({[&] { write_cache(a); }}, {message}, {tu::watch("cache", cache)});
  }
};

TEST(WriteCacheLengths, NamesTheArgumentOutOfStep) {
  WriteCase w;
  w.expect(4, 4, 3, "slot_mapping must be int64 of shape (4,) (one slot per row of kv_c and k_pe), got int64 (3,)");
  w.expect(3, 3, 4, "slot_mapping must be int64 of shape (3,) (one slot per row of kv_c and k_pe), got int64 (4,)");
  w.expect(3, 4, 4, "kv_c must be bfloat16 of shape (4, 512), got bfloat16 (3, 512)");
  w.expect(4, 3, 4, "k_pe must be bfloat16 of shape (4, 64), got bfloat16 (3, 64)");
  w.expect(4, 3, 2, "k_pe must be bfloat16 of shape (4, 64), got bfloat16 (3, 64)");  // no two agree: kv_c counts
  write_cache(w.args(4, 4, 4));  // and agreeing lengths pass
}

// ------------------------------------------------------------------ workspaces
// The one rule every launch with a workspace applies (attention splits, dcp_combine): enough
// bytes, a buffer, 16-byte alignment; none needed, anything passes.
std::string workspace_error(const Workspace& ws, size_t need) {
  try {
    detail::check_workspace(ws, need, "x_workspace_size");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(WorkspaceRule, NamesWhatIsMissing) {
  alignas(16) static uint8_t buf[64];
  EXPECT_EQ(workspace_error({nullptr, 0}, 0), "");
  EXPECT_EQ(workspace_error({buf + 1, 0}, 0), "");  // nothing needed: not even alignment
  EXPECT_EQ(workspace_error({buf, 64}, 64), "");
  EXPECT_EQ(workspace_error({buf, 63}, 64), "workspace must be at least 64 bytes (see x_workspace_size), got 63 bytes");
  EXPECT_EQ(workspace_error({nullptr, 64}, 64),
            "workspace must be at least 64 bytes (see x_workspace_size), got 64 bytes at a null address");
  EXPECT_EQ(workspace_error({buf + 4, 60}, 48), "workspace must be aligned to 16 bytes, got address % 16 = 4");
}

// ------------------------------------------------------------------ non-finite inputs
// A row whose logits are not all finite (a NaN or an infinity in q or in a key it attends to)
// is not an empty row: the CPU backend reports NaN for out, lse and max_logits. A row with no
// valid key keeps out = 0, lse = max_logits = -inf. A NaN in a key no row names changes nothing.

bool all_nan(const std::vector<uint16_t>& bf16, size_t from, size_t n) {
  for (size_t i = from; i < from + n; ++i)
    if (!std::isnan(bf16_bits_to_float(bf16[i]))) return false;
  return true;
}
bool all_finite(const std::vector<uint16_t>& bf16, size_t from, size_t n) {
  for (size_t i = from; i < from + n; ++i)
    if (!std::isfinite(bf16_bits_to_float(bf16[i]))) return false;
  return true;
}
bool all_zero(const std::vector<uint16_t>& bf16, size_t from, size_t n) {
  for (size_t i = from; i < from + n; ++i)
    if (bf16_bits_to_float(bf16[i]) != 0.0f) return false;
  return true;
}

TEST(NonFiniteInputs, SparsePrefillReportsNanRows) {
  // 4 tokens x 2 heads over 6 kv rows. Token 0: NaN in q of head 1. Token 1: attends to kv row
  // 4, which holds +inf. Token 2: finite keys only (kv row 5, NaN, is named by no token
  // within its length). Token 3: no valid key.
  const int s_q = 4, h = 2, s_kv = 6, topk = 3;
  std::vector<uint16_t> q = tu::random_bf16(s_q * h * kD), kv = tu::random_bf16(s_kv * kD);
  q[(0 * h + 1) * kD + 17] = float_to_bf16_bits(kNan);
  kv[4 * kD + 600 % kD] = float_to_bf16_bits(kInf);
  for (int i = 0; i < kD; ++i) kv[5 * kD + i] = float_to_bf16_bits(kNan);
  std::vector<int32_t> idx = {0, 1, 2, /**/ 0, 4, -1, /**/ 1, 2, 5, /**/ -1, 6, 99};
  std::vector<int32_t> lengths = {3, 3, 2, 3};
  std::vector<uint16_t> out(s_q * h * kDv, tu::bf16_nan());
  std::vector<float> lse(s_q * h, 7.0f), ml(s_q * h, 7.0f);
  SparsePrefillArgs a;
  a.q = make_view(q.data(), DType::bf16, {s_q, h, kD});
  a.kv = make_view(kv.data(), DType::bf16, {s_kv, kD});
  a.indices = make_view(idx.data(), DType::i32, {s_q, topk});
  a.topk_length = make_view(lengths.data(), DType::i32, {s_q});
  std::vector<float> sink = {0.5f, -0.5f};
  a.attn_sink = make_view(sink.data(), DType::f32, {h});
  a.out = make_view(out.data(), DType::bf16, {s_q, h, kDv});
  a.lse = make_view(lse.data(), DType::f32, {s_q, h});
  a.max_logits = make_view(ml.data(), DType::f32, {s_q, h});
  sparse_prefill(a);

  auto row = [&](int t, int hh) { return static_cast<size_t>(t * h + hh); };
  // Token 0: head 0 finite, head 1 NaN (its q holds the NaN).
  EXPECT_TRUE(std::isfinite(lse[row(0, 0)]) && std::isfinite(ml[row(0, 0)]));
  EXPECT_TRUE(all_finite(out, row(0, 0) * kDv, kDv));
  EXPECT_TRUE(std::isnan(lse[row(0, 1)])) << lse[row(0, 1)];
  EXPECT_TRUE(std::isnan(ml[row(0, 1)])) << "max_logits of a NaN row must not read as an empty row: " << ml[row(0, 1)];
  EXPECT_TRUE(all_nan(out, row(0, 1) * kDv, kDv));
  // Token 1: every head NaN (a key with an infinity).
  for (int hh = 0; hh < h; ++hh) {
    EXPECT_TRUE(std::isnan(lse[row(1, hh)]) && std::isnan(ml[row(1, hh)]));
    EXPECT_TRUE(all_nan(out, row(1, hh) * kDv, kDv));
  }
  // Token 2: the NaN row 5 lies past its length: finite.
  for (int hh = 0; hh < h; ++hh) {
    EXPECT_TRUE(std::isfinite(lse[row(2, hh)]) && std::isfinite(ml[row(2, hh)]));
    EXPECT_TRUE(all_finite(out, row(2, hh) * kDv, kDv));
  }
  // Token 3: empty.
  for (int hh = 0; hh < h; ++hh) {
    EXPECT_EQ(lse[row(3, hh)], -kInf);
    EXPECT_EQ(ml[row(3, hh)], -kInf);
    EXPECT_TRUE(all_zero(out, row(3, hh) * kDv, kDv));
  }
}

TEST(NonFiniteInputs, SparseDecodeReportsNanRows) {
  // 2 requests x 2 heads over a bf16 cache of 8 slots; slot 6 holds a NaN. Request 0 names
  // it; request 1 does not, but has a NaN in q of head 0.
  const int b = 2, h = 2, topk = 3;
  std::vector<uint16_t> q = tu::random_bf16(b * h * kD), cache = tu::random_bf16(8 * kD);
  cache[6 * kD + 3] = float_to_bf16_bits(kNan);
  q[(1 * h + 0) * kD + 500] = float_to_bf16_bits(kNan);
  std::vector<int32_t> idx = {0, 6, 2, /**/ 1, 2, 3};
  std::vector<uint16_t> out(b * h * kDv, tu::bf16_nan());
  std::vector<float> lse(b * h, 7.0f);
  SparseDecodeArgs a;
  a.q = make_view(q.data(), DType::bf16, {b, 1, h, kD});
  a.cache = {make_view(cache.data(), DType::bf16, {2, 4, kD}), CacheFormat::bf16};
  a.indices = make_view(idx.data(), DType::i32, {b, 1, topk});
  a.out = make_view(out.data(), DType::bf16, {b, 1, h, kDv});
  a.lse = make_view(lse.data(), DType::f32, {b, 1, h});
  sparse_decode(a);
  EXPECT_TRUE(std::isnan(lse[0]) && std::isnan(lse[1]));
  EXPECT_TRUE(all_nan(out, 0, 2 * kDv));
  EXPECT_TRUE(std::isnan(lse[2]));
  EXPECT_TRUE(all_nan(out, 2 * kDv, kDv));
  EXPECT_TRUE(std::isfinite(lse[3]));
  EXPECT_TRUE(all_finite(out, 3 * kDv, kDv));
}

TEST(NonFiniteInputs, DenseDecodeReportsNanRowsAndKeepsEmptyRows) {
  // Request 0 reads positions 0..4 of block 0, whose position 2 holds a NaN: NaN. Request 1
  // reads block 1 (finite). Request 2 has length 0: empty.
  const int b = 3, h = 2;
  std::vector<uint16_t> q = tu::random_bf16(b * h * kD), cache = tu::random_bf16(2 * 8 * kD);
  cache[2 * kD + 100] = float_to_bf16_bits(kNan);
  std::vector<int32_t> bt = {0, 1, 0}, seqlens = {5, 6, 0};
  std::vector<uint16_t> out(b * h * kDv, tu::bf16_nan());
  std::vector<float> lse(b * h, 7.0f);
  DenseDecodeArgs a;
  a.q = make_view(q.data(), DType::bf16, {b, 1, h, kD});
  a.cache = {make_view(cache.data(), DType::bf16, {2, 8, 1, kD}), CacheFormat::bf16};
  a.block_table = make_view(bt.data(), DType::i32, {b, 1});
  a.seqlens = make_view(seqlens.data(), DType::i32, {b});
  a.out = make_view(out.data(), DType::bf16, {b, 1, h, kDv});
  a.lse = make_view(lse.data(), DType::f32, {b, 1, h});
  dense_decode(a);
  EXPECT_TRUE(std::isnan(lse[0]) && std::isnan(lse[1]));
  EXPECT_TRUE(all_nan(out, 0, 2 * kDv));
  EXPECT_TRUE(std::isfinite(lse[2]) && std::isfinite(lse[3]));
  EXPECT_TRUE(all_finite(out, 2 * kDv, 2 * kDv));
  EXPECT_EQ(lse[4], -kInf);
  EXPECT_EQ(lse[5], -kInf);
  EXPECT_TRUE(all_zero(out, 4 * kDv, 2 * kDv));
}

TEST(NonFiniteInputs, MergeSkipsNonFiniteLsesAndCarriesNanOutputs) {
  // merge_states weighs parts by their lse: a part whose lse is NaN (or +-inf) is skipped and
  // its output never read; a NaN inside the output of a part that does count is carried.
  const int n = 3, h = 3, d_v = 4;
  std::vector<float> parts(n * h * d_v, 0.25f), lses = {/*part 0*/ 0.1f, 0.2f, 0.3f, /*part 1*/ kNan, 0.5f, kNan,
                                                        /*part 2*/ -kInf, kInf, -kInf};
  for (int k = 0; k < d_v; ++k) parts[(1 * h + 0) * d_v + k] = kNan;  // part 1, head 0: lse NaN, skipped
  parts[(0 * h + 1) * d_v + 2] = kNan;                                   // part 0, head 1: counts
  std::vector<float> out(h * d_v, 7.0f), lse(h, 7.0f);
  MergeStatesArgs a;
  a.out_parts = make_view(parts.data(), DType::f32, {n, 1, h, d_v});
  a.lse_parts = make_view(lses.data(), DType::f32, {n, 1, h});
  a.out = make_view(out.data(), DType::f32, {1, h, d_v});
  a.lse = make_view(lse.data(), DType::f32, {1, h});
  merge_states(a);
  EXPECT_FLOAT_EQ(lse[0], 0.1f);
  for (int k = 0; k < d_v; ++k) EXPECT_FLOAT_EQ(out[0 * d_v + k], 0.25f);
  EXPECT_TRUE(std::isfinite(lse[1]));
  EXPECT_TRUE(std::isnan(out[1 * d_v + 2]));
  EXPECT_FLOAT_EQ(lse[2], 0.3f);
  for (int k = 0; k < d_v; ++k) EXPECT_FLOAT_EQ(out[2 * d_v + k], 0.25f);
}

}  // namespace
}  // namespace smla
