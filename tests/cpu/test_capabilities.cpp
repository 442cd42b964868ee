// Capabilities (SPEC §4.7): every rule of the support table triggered by one configuration,
// with the sentence it gives; supported configurations give nothing.
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/test_util.h"
#include "smla/capabilities.h"
#include "smla/ops.h"

namespace smla {
namespace {

KernelConfig cfg(Op op, Backend backend, CacheFormat format, int d_qk, DType q = DType::bf16) {
  KernelConfig c;
  c.op = op;
  c.backend = backend;
  c.format = format;
  c.d_qk = d_qk;
  c.q_dtype = q;
  return c;
}

void expect_supported(const KernelConfig& c) {
  auto why = why_not(c);
  if (c.backend == Backend::cuda_sm90 && !built_with_cuda()) {
    ASSERT_TRUE(why.has_value()) << op_name(c.op);
    EXPECT_EQ(*why, "backend cuda_sm90 requires a build with CUDA, this build has none");
  } else {
    EXPECT_FALSE(why.has_value()) << backend_name(c.backend) << " " << op_name(c.op) << ": " << *why;
  }
}

void expect_why(const KernelConfig& c, const std::string& sentence) {
  auto why = why_not(c);
  ASSERT_TRUE(why.has_value()) << "expected: " << sentence;
  EXPECT_EQ(*why, sentence);
}

constexpr Backend kBackends[] = {Backend::cpu, Backend::cuda_sm90};

TEST(CapabilitiesWhyNot, SupportedConfigurations) {
  for (Backend be : kBackends) {
    for (auto [f, d] : std::vector<std::pair<CacheFormat, int>>{{CacheFormat::fp8_ds_mla, 576},
                                                                 {CacheFormat::fp8_model1, 512},
                                                                 {CacheFormat::bf16, 576},
                                                                 {CacheFormat::bf16, 512}}) {
      for (int h_q : {1, 16, 64, 128}) {
        for (int page : {1, 64, 256}) {
          KernelConfig c = cfg(Op::sparse_decode, be, f, d);
          c.h_q = h_q;
          c.page_size = page;
          c.s_q = (h_q % 3) + 1;
          c.topk = page == 1 ? 1 : 2048;
          expect_supported(c);
        }
      }
    }
    for (int d : {576, 512}) {
      KernelConfig c = cfg(Op::sparse_prefill, be, CacheFormat::bf16, d);
      c.s_q = 4096;
      c.page_size = 0;  // ignored: bf16 kv rows, or a paged cache of any page size
      expect_supported(c);
      // From a paged cache in a packed format.
      c = cfg(Op::sparse_prefill, be, d == 576 ? CacheFormat::fp8_ds_mla : CacheFormat::fp8_model1, d);
      c.s_q = 4096;
      c.h_q = 128;
      expect_supported(c);
      for (auto [f, q] : std::vector<std::pair<CacheFormat, DType>>{{CacheFormat::bf16, DType::bf16},
                                                                     {CacheFormat::fp16, DType::f16},
                                                                     {CacheFormat::fp8_e4m3, DType::bf16},
                                                                     {CacheFormat::fp8_e4m3, DType::fp8_e4m3}}) {
        KernelConfig dd = cfg(Op::dense_decode, be, f, d, q);
        dd.h_q = 16;
        dd.h_kv = 4;
        dd.topk = 0;  // dense: ignored
        dd.s_q = 2;
        expect_supported(dd);
      }
    }
    KernelConfig m = cfg(Op::merge_states, be, CacheFormat::fp16, 7, DType::f32);
    m.topk = m.page_size = m.s_q = 0;  // none of these exist for a merge
    expect_supported(m);
    for (Op op : {Op::write_cache, Op::gather_cache}) {
      for (auto [f, d] : std::vector<std::pair<CacheFormat, int>>{
               {CacheFormat::bf16, 576}, {CacheFormat::fp16, 512}, {CacheFormat::fp8_e4m3, 576},
               {CacheFormat::fp8_ds_mla, 576}, {CacheFormat::fp8_model1, 512}}) {
        KernelConfig c = cfg(op, be, f, d, DType::f32);
        c.h_q = 0;
        c.s_q = 0;
        c.topk = 0;
        expect_supported(c);
      }
    }
  }
  // The CPU backend has no limit on heads or query tokens.
  KernelConfig big = cfg(Op::sparse_decode, Backend::cpu, CacheFormat::fp8_ds_mla, 576);
  big.h_q = 1024;
  big.s_q = 64;
  big.topk = 100000;
  expect_supported(big);
}

TEST(CapabilitiesWhyNot, FormatWidthAndQueryDtype) {
  expect_why(cfg(Op::sparse_decode, Backend::cpu, CacheFormat::fp16, 576),
             "format must be fp8_ds_mla, fp8_model1 or bf16 for cpu sparse_decode, got fp16");
  expect_why(cfg(Op::sparse_decode, Backend::cuda_sm90, CacheFormat::fp8_e4m3, 576),
             "format must be fp8_ds_mla, fp8_model1 or bf16 for cuda_sm90 sparse_decode, got fp8_e4m3");
  expect_why(cfg(Op::sparse_decode, Backend::cpu, CacheFormat::fp8_ds_mla, 512),
             "d_qk must be 576 for cpu sparse_decode with format fp8_ds_mla, got 512");
  expect_why(cfg(Op::sparse_decode, Backend::cpu, CacheFormat::fp8_model1, 576),
             "d_qk must be 512 for cpu sparse_decode with format fp8_model1, got 576");
  expect_why(cfg(Op::sparse_decode, Backend::cpu, CacheFormat::bf16, 448),
             "d_qk must be 576 or 512 for cpu sparse_decode with format bf16, got 448");
  expect_why(cfg(Op::sparse_decode, Backend::cpu, CacheFormat::bf16, 576, DType::f16),
             "q_dtype must be bfloat16 for cpu sparse_decode with format bf16, got float16");
  expect_why(cfg(Op::sparse_prefill, Backend::cpu, CacheFormat::fp8_e4m3, 576),
             "format must be bf16, fp8_ds_mla or fp8_model1 for cpu sparse_prefill, got fp8_e4m3");
  expect_why(cfg(Op::sparse_prefill, Backend::cpu, CacheFormat::fp8_ds_mla, 512),
             "d_qk must be 576 for cpu sparse_prefill with format fp8_ds_mla, got 512");
  expect_why(cfg(Op::sparse_prefill, Backend::cpu, CacheFormat::bf16, 128),
             "d_qk must be 576 or 512 for cpu sparse_prefill with format bf16, got 128");
  expect_why(cfg(Op::sparse_prefill, Backend::cuda_sm90, CacheFormat::bf16, 576, DType::fp8_e4m3),
             "q_dtype must be bfloat16 for cuda_sm90 sparse_prefill with format bf16, got float8_e4m3fn");
  expect_why(cfg(Op::dense_decode, Backend::cpu, CacheFormat::fp8_ds_mla, 576),
             "format must be bf16, fp16 or fp8_e4m3 for cpu dense_decode, got fp8_ds_mla");
  expect_why(cfg(Op::dense_decode, Backend::cpu, CacheFormat::fp16, 576, DType::bf16),
             "q_dtype must be float16 for cpu dense_decode with format fp16, got bfloat16");
  expect_why(cfg(Op::dense_decode, Backend::cpu, CacheFormat::bf16, 576, DType::fp8_e4m3),
             "q_dtype must be bfloat16 for cpu dense_decode with format bf16, got float8_e4m3fn");
  expect_why(cfg(Op::dense_decode, Backend::cuda_sm90, CacheFormat::fp8_e4m3, 512, DType::f16),
             "q_dtype must be bfloat16 or float8_e4m3fn for cuda_sm90 dense_decode with format fp8_e4m3, "
             "got float16");
  expect_why(cfg(Op::dense_decode, Backend::cpu, CacheFormat::fp16, 256, DType::f16),
             "d_qk must be 576 or 512 for cpu dense_decode with format fp16, got 256");
  expect_why(cfg(Op::write_cache, Backend::cpu, CacheFormat::fp8_ds_mla, 512),
             "d_qk must be 576 for cpu write_cache with format fp8_ds_mla, got 512");
  expect_why(cfg(Op::gather_cache, Backend::cuda_sm90, CacheFormat::fp8_model1, 576),
             "d_qk must be 512 for cuda_sm90 gather_cache with format fp8_model1, got 576");
}

TEST(CapabilitiesWhyNot, SizesOnTheCpu) {
  auto sd = [] { return cfg(Op::sparse_decode, Backend::cpu, CacheFormat::fp8_ds_mla, 576); };
  KernelConfig c = sd();
  c.h_q = 0;
  expect_why(c, "h_q must be at least 1 for cpu sparse_decode, got 0");
  c = sd();
  c.h_kv = 2;
  expect_why(c, "h_kv must be 1 for cpu sparse_decode, got 2");
  c = sd();
  c.page_size = 0;
  expect_why(c, "page_size must be at least 1 for cpu sparse_decode, got 0");
  c = sd();
  c.topk = 0;
  expect_why(c, "topk must be at least 1 for cpu sparse_decode, got 0");
  c = sd();
  c.s_q = 0;
  expect_why(c, "s_q must be at least 1 for cpu sparse_decode, got 0");

  auto sp = [] { return cfg(Op::sparse_prefill, Backend::cpu, CacheFormat::bf16, 512); };
  c = sp();
  c.topk = -5;
  expect_why(c, "topk must be at least 1 for cpu sparse_prefill, got -5");
  c = sp();
  c.h_kv = 8;
  expect_why(c, "h_kv must be 1 for cpu sparse_prefill, got 8");
  c = sp();
  c.s_q = 0;
  expect_why(c, "s_q must be at least 1 for cpu sparse_prefill, got 0");

  auto dd = [] { return cfg(Op::dense_decode, Backend::cpu, CacheFormat::bf16, 576); };
  c = dd();
  c.h_q = 6;
  c.h_kv = 4;
  expect_why(c, "h_q must be a multiple of h_kv = 4 for cpu dense_decode, got 6");
  c = dd();
  c.h_kv = 0;
  expect_why(c, "h_kv must be at least 1 for cpu dense_decode, got 0");
  c = dd();
  c.h_q = -1;
  expect_why(c, "h_q must be at least 1 for cpu dense_decode, got -1");
  c = dd();
  c.page_size = -64;
  expect_why(c, "page_size must be at least 1 for cpu dense_decode, got -64");

  c = cfg(Op::merge_states, Backend::cpu, CacheFormat::bf16, 576);
  c.h_q = 0;
  expect_why(c, "h_q must be at least 1 for cpu merge_states, got 0");
  c = cfg(Op::gather_cache, Backend::cpu, CacheFormat::bf16, 576);
  c.h_kv = 2;
  expect_why(c, "h_kv must be 1 for cpu gather_cache, got 2");
  c = cfg(Op::write_cache, Backend::cpu, CacheFormat::fp8_e4m3, 576);
  c.page_size = 0;
  expect_why(c, "page_size must be at least 1 for cpu write_cache, got 0");
}

TEST(CapabilitiesWhyNot, CudaLimits) {
  KernelConfig c = cfg(Op::sparse_decode, Backend::cuda_sm90, CacheFormat::fp8_ds_mla, 576);
  c.h_q = 256;
  expect_why(c, "h_q must be between 1 and 128 for cuda_sm90 sparse_decode, got 256");
  c.h_q = 0;
  expect_why(c, "h_q must be between 1 and 128 for cuda_sm90 sparse_decode, got 0");
  c.h_q = 128;
  c.s_q = 5;
  expect_why(c, "s_q must be between 1 and 4 for cuda_sm90 sparse_decode, got 5");

  c = cfg(Op::dense_decode, Backend::cuda_sm90, CacheFormat::bf16, 576);
  c.h_q = 129;
  expect_why(c, "h_q must be between 1 and 128 for cuda_sm90 dense_decode, got 129");
  c.h_q = 128;
  c.s_q = 8;
  expect_why(c, "s_q must be between 1 and 4 for cuda_sm90 dense_decode, got 8");

  c = cfg(Op::sparse_prefill, Backend::cuda_sm90, CacheFormat::bf16, 512);
  c.h_q = 512;
  expect_why(c, "h_q must be between 1 and 128 for cuda_sm90 sparse_prefill, got 512");
  c.h_q = 128;
  c.s_q = 8192;  // prefill has no s_q limit
  expect_supported(c);

  // The same configurations are fine on the CPU.
  for (Op op : {Op::sparse_decode, Op::dense_decode}) {
    KernelConfig cpu = cfg(op, Backend::cpu, CacheFormat::bf16, 576);
    cpu.h_q = 256;
    cpu.s_q = 8;
    expect_supported(cpu);
  }
}

TEST(CapabilitiesWhyNot, BuildRequirementAndUnknownValues) {
  KernelConfig c = cfg(Op::sparse_decode, Backend::cuda_sm90, CacheFormat::fp8_ds_mla, 576);
  if (built_with_cuda()) {
    EXPECT_FALSE(why_not(c).has_value());
  } else {
    expect_why(c, "backend cuda_sm90 requires a build with CUDA, this build has none");
  }
  c.op = static_cast<Op>(99);
  expect_why(c, "op must be one of sparse_decode, sparse_prefill, dense_decode, merge_states, write_cache or "
                "gather_cache, got 99");
  c.op = Op::sparse_decode;
  c.backend = static_cast<Backend>(7);
  expect_why(c, "backend must be cpu or cuda_sm90, got 7");
  c.backend = Backend::cpu;
  c.format = static_cast<CacheFormat>(42);
  expect_why(c, "format must be fp8_ds_mla, fp8_model1 or bf16 for cpu sparse_decode, got ?");
}

TEST(CapabilitiesListing, OneEntryPerOpAndBackend) {
  auto caps = capabilities();
  ASSERT_EQ(caps.size(), 12u);
  std::set<std::pair<int, int>> seen;
  for (const Capability& c : caps) {
    EXPECT_TRUE(seen.insert({static_cast<int>(c.op), static_cast<int>(c.backend)}).second) << op_name(c.op);
    for (const std::string* s : {&c.architectures, &c.q_dtypes, &c.formats, &c.d_qk, &c.h_q, &c.page_sizes,
                                 &c.topk, &c.s_q})
      EXPECT_FALSE(s->empty()) << op_name(c.op) << " " << backend_name(c.backend);
    EXPECT_EQ(c.architectures, c.backend == Backend::cpu ? "any x86-64/arm64 CPU" : "sm_90a (H100, H200)");
  }
  auto find = [&](Op op, Backend b) {
    for (const Capability& c : caps)
      if (c.op == op && c.backend == b) return c;
    ADD_FAILURE() << "missing " << op_name(op);
    return Capability{};
  };
  Capability sd = find(Op::sparse_decode, Backend::cpu);
  EXPECT_EQ(sd.formats, "fp8_ds_mla (d_qk 576), fp8_model1 (d_qk 512) or bf16 (d_qk 576 or 512)");
  EXPECT_EQ(sd.d_qk, "576 or 512");
  EXPECT_EQ(sd.q_dtypes, "bfloat16");
  EXPECT_EQ(sd.h_q, "at least 1 (h_kv 1)");
  EXPECT_EQ(sd.s_q, "at least 1");
  Capability sdc = find(Op::sparse_decode, Backend::cuda_sm90);
  EXPECT_EQ(sdc.h_q, "between 1 and 128 (h_kv 1)");
  EXPECT_EQ(sdc.s_q, "between 1 and 4");
  EXPECT_EQ(sdc.page_sizes, "at least 1");
  Capability dd = find(Op::dense_decode, Backend::cpu);
  EXPECT_EQ(dd.q_dtypes, "bf16: bfloat16; fp16: float16; fp8_e4m3: bfloat16 or float8_e4m3fn");
  EXPECT_EQ(dd.h_q, "at least 1, a multiple of h_kv (h_kv at least 1)");
  EXPECT_EQ(dd.topk, "-");
  Capability ms = find(Op::merge_states, Backend::cpu);
  EXPECT_EQ(ms.formats, "-");
  EXPECT_EQ(ms.page_sizes, "-");
}

TEST(CapabilitiesNames, OpsBackendsAndBuild) {
  EXPECT_STREQ(op_name(Op::sparse_decode), "sparse_decode");
  EXPECT_STREQ(op_name(Op::sparse_prefill), "sparse_prefill");
  EXPECT_STREQ(op_name(Op::dense_decode), "dense_decode");
  EXPECT_STREQ(op_name(Op::merge_states), "merge_states");
  EXPECT_STREQ(op_name(Op::write_cache), "write_cache");
  EXPECT_STREQ(op_name(Op::gather_cache), "gather_cache");
  EXPECT_STREQ(op_name(static_cast<Op>(50)), "?");
  EXPECT_STREQ(backend_name(Backend::cpu), "cpu");
  EXPECT_STREQ(backend_name(Backend::cuda_sm90), "cuda_sm90");
#if SMLA_WITH_CUDA
  EXPECT_TRUE(built_with_cuda());
#else
  EXPECT_FALSE(built_with_cuda());
  EXPECT_FALSE(cuda_device_available());
#endif
}

}  // namespace
}  // namespace smla

namespace smla {
namespace {

// A call on CUDA tensors is held to the capability table: what why_not() names, the call
// rejects before launching anything. Host memory marked as CUDA is never read on this path.
TEST(CapabilitiesEnforced, CudaSparseDecodeRejectsHeadsPastTheTable) {
  const int64_t b = 1, s_q = 1, h_q = 256, topk = 64;
  std::vector<uint16_t> q(b * s_q * h_q * 576, 0x3f80);
  std::vector<uint8_t> cache_bytes(2 * 64 * 656, 0);
  std::vector<int32_t> idx(b * s_q * topk, 0);
  std::vector<uint16_t> out(b * s_q * h_q * kDv, 0x7fc0);
  std::vector<float> lse(b * s_q * h_q, 7.0f);
  const auto out_before = test::snapshot(out), lse_before = test::snapshot(lse);
  const Device dev = cuda_device(0);
  SparseDecodeArgs a;
  a.q = make_view(q.data(), DType::bf16, {b, s_q, h_q, 576}, dev);
  a.cache.format = CacheFormat::fp8_ds_mla;
  a.cache.data = make_view(cache_bytes.data(), DType::u8, {2, 64, 656}, dev);
  a.indices = make_view(idx.data(), DType::i32, {b, s_q, topk}, dev);
  a.out = make_view(out.data(), DType::bf16, {b, s_q, h_q, kDv}, dev);
  a.lse = make_view(lse.data(), DType::f32, {b, s_q, h_q}, dev);
  KernelConfig k;
  k.backend = Backend::cuda_sm90;
  k.format = CacheFormat::fp8_ds_mla;
  k.h_q = 256;
  const auto reason = why_not(k);
  ASSERT_TRUE(reason.has_value());
  test::expect_error([&] { sparse_decode(a); }, {*reason});
  EXPECT_EQ(test::snapshot(out), out_before);
  EXPECT_EQ(test::snapshot(lse), lse_before);
}

}  // namespace
}  // namespace smla
