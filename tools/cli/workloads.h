// The inputs of one call of an operation, built on the host (caches filled through
// smla::write_cache from random bf16 rows), mirrored to the device on demand, with the
// outputs of each backend kept apart so the two can be compared.
//
// A workload has `units` (requests for decode, query tokens for prefill, merged tokens for
// merge_states) of `rows_per_unit` attention rows each; a backend may run on the first units
// only (the CPU on a small slice of a GPU-sized batch), and rows are numbered across units.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "cli/array.h"
#include "cli/check.h"
#include "cli/perf_count.h"
#include "smla/capabilities.h"
#include "smla/ops.h"

namespace smla::cli {

Device device_of(Backend b);

class Workload {
 public:
  virtual ~Workload() = default;

  virtual Op op() const = 0;
  // A one-line description with `units` in place of the full count, e.g.
  // "b=2 s_q=1 h_q=128 topk=2048 fp8_ds_mla p64".
  virtual std::string shape(int64_t units) const = 0;
  virtual KernelConfig kernel_config(Backend b) const = 0;
  int64_t units() const { return units_; }
  int64_t rows_per_unit() const { return rows_per_unit_; }

  // Copies every input to the device and allocates the device outputs.
  void upload();
  virtual size_t workspace_size(Backend b, int64_t units) const = 0;
  virtual void launch(Backend b, int64_t units, const Exec& exec) const = 0;
  // Outputs of backend b set to NaN (all bits set), so a row never written shows.
  void poison(Backend b);
  // Device outputs to their host copy (nothing to do for the CPU).
  void fetch(Backend b);

  virtual PerfCount count(int64_t units) const = 0;
  // Float64 recomputation of row `row` from the host inputs (SPEC §3), independent of smla.
  virtual RowData reference_row(int64_t row) const = 0;
  // Row `row` of backend b's result (after fetch).
  RowData output_row(Backend b, int64_t row) const;

 protected:
  struct Outputs {
    Array out, lse, max_logits;
  };
  // Output arrays for both backends: out [prefix..., kDv] of out_dtype, lse (and max_logits)
  // [prefix...]; prefix[0] counts units.
  void make_outputs(DType out_dtype, const std::vector<int64_t>& prefix, bool max_logits);
  const Outputs& outputs(Backend b) const { return outs_[b == Backend::cpu ? 0 : 1]; }
  void add_input(Array* a) { inputs_.push_back(a); }

  int64_t units_ = 0;
  int64_t rows_per_unit_ = 0;

 private:
  Outputs outs_[2];
  std::vector<Array*> inputs_;
};

// V3.2 / V4 sparse decode, inputs as a serving engine has them (SPEC §7): request i has
// `region` positions whose pages come from a random permutation of the whole cache (b * region
// slots). Main keys: `topk` distinct positions of the request, or with `window` the positions
// [pos - topk + 1, pos] of query token t at pos = region - s_q + t (V4's sliding window;
// negative positions are -1), mapped to slots through the request's pages. Extra keys
// (extra_topk > 0): the same from a second cache of the same format, region extra_region per
// request. A few entries of every list are -1. q and the index lists are non-contiguous views;
// only slots some list names are written, every other slot holds NaN bytes.
struct SparseDecodeSpec {
  int64_t b = 2;
  int s_q = 1;
  int h_q = 128;
  int topk = 2048;
  CacheFormat format = CacheFormat::fp8_ds_mla;
  int d_qk = 576;  // bf16 caches only; packed formats imply theirs
  int page = 64;
  int64_t region = 32768;
  bool window = false;
  int extra_topk = 0;
  int extra_page = 64;
  int64_t extra_region = 8192;
  bool sink = false;
  bool lengths = false;  // pass topk_length (each request's full topk, both sets), as engines that send it do
};

// Sparse prefill on a bf16 kv [s_kv, d_qk]: each query token's `topk` distinct rows, a few -1.
// With page > 0 (make_sparse_prefill_paged) the keys come from a paged cache of `format` instead:
// one prompt of s_kv positions whose pages are a random permutation of the cache, each token's
// topk distinct positions mapped to slots, q and the index lists non-contiguous views, unnamed
// slots NaN bytes, as for sparse decode.
struct SparsePrefillSpec {
  int64_t s_q = 8;
  int h_q = 128;
  int d_qk = 576;  // the format's own for packed formats
  int topk = 2048;
  int64_t s_kv = 8192;
  bool sink = false;
  bool lengths = false;  // pass topk_length (every token's full topk), as engines that send it do
  CacheFormat format = CacheFormat::bf16;
  int page = 0;  // 0: the unpaged bf16 kv
};

// Dense decode: every request `seqlen` tokens, its pages a random permutation of the cache.
struct DenseDecodeSpec {
  int64_t b = 2;
  int s_q = 1;
  int h_q = 128;
  int d_qk = 576;
  CacheFormat format = CacheFormat::bf16;
  int page = 64;
  int64_t seqlen = 4096;
  bool causal = true;
  bool sink = false;
  bool q_fp8 = false;  // fp8_e4m3 q with a per-tensor q_scale (an fp8_e4m3 cache only)
};

// merge_states of `parts` float32 partial results of `tokens` x `h` rows; about one partial
// lse in 16 is -inf (an empty split).
struct MergeStatesSpec {
  int64_t tokens = 128;
  int h = 128;
  int parts = 4;
  bool sink = false;
};

// Each throws UsageError for a spec that cannot be built (e.g. topk above the region).
std::unique_ptr<Workload> make_sparse_decode(const SparseDecodeSpec& s, uint64_t seed);
std::unique_ptr<Workload> make_sparse_prefill(const SparsePrefillSpec& s, uint64_t seed);
std::unique_ptr<Workload> make_sparse_prefill_paged(const SparsePrefillSpec& s, uint64_t seed);
std::unique_ptr<Workload> make_dense_decode(const DenseDecodeSpec& s, uint64_t seed);
std::unique_ptr<Workload> make_merge_states(const MergeStatesSpec& s, uint64_t seed);

// ---- shared by the workload builders ----

// Writes random bf16 rows (|x| <= 1) into `slots` of a host cache through smla::write_cache.
void write_random_rows(const PagedCache& cache, const std::vector<int64_t>& slots, uint64_t seed);
// Every distinct valid slot (0 <= idx < num_slots) of an int32 index array, ascending.
std::vector<int64_t> touched_slots(const int32_t* idx, int64_t n, int64_t num_slots);
// `count` random entries of each `topk`-long list set to -1 (distinct positions).
void mix_invalid(int32_t* idx, int64_t lists, int64_t topk, int64_t count, Rng& rng);
// How many -1 entries a list of `topk` gets: a few, at least one.
int64_t invalid_per_list(int64_t topk);
// bf16 row `row` (counted over the leading dimensions) of a [.., width] bf16 array whose last
// dimension is packed and whose outer strides are free, as doubles.
std::vector<double> bf16_row(const Array& a, int64_t row, int64_t width);

}  // namespace smla::cli
