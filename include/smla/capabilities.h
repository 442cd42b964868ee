// What each kernel family supports (SPEC §4.7), and why a configuration is not supported.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "smla/formats.h"
#include "smla/tensor.h"

namespace smla {

enum class Op { sparse_decode, sparse_prefill, dense_decode, merge_states, write_cache, gather_cache };
enum class Backend { cpu, cuda_sm90 };

const char* op_name(Op op);
const char* backend_name(Backend b);

struct KernelConfig {
  Op op = Op::sparse_decode;
  Backend backend = Backend::cpu;
  CacheFormat format = CacheFormat::bf16;
  DType q_dtype = DType::bf16;
  int d_qk = 576;
  int h_q = 128;
  int h_kv = 1;
  int page_size = 64;
  int topk = 2048;  // sparse ops; ignored by dense_decode
  int s_q = 1;
};

// Why a configuration is not supported: the parameter, what is required, what was given, and
// the whole sentence ("h_q must be between 1 and 128 for cuda_sm90 sparse_decode, got 256").
struct Unsupported {
  std::string argument;
  std::string expected;
  std::string given;
  std::string sentence;
};
std::optional<Unsupported> check_support(const KernelConfig& config);

// Nothing when supported; otherwise check_support's sentence.
std::optional<std::string> why_not(const KernelConfig& config);

struct Capability {
  Op op;
  Backend backend;
  std::string architectures;  // "any x86-64/arm64 CPU", "sm_90a (H100, H200)"
  std::string q_dtypes;
  std::string formats;
  std::string d_qk;
  std::string h_q;
  std::string page_sizes;
  std::string topk;
  std::string s_q;
};
std::vector<Capability> capabilities();

// Whether this build holds the CUDA kernels, and whether a usable sm_90 device is present.
bool built_with_cuda();
bool cuda_device_available();

}  // namespace smla
