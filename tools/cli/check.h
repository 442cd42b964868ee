// Judging a result (SPEC §6) on sampled rows, against a float64 recomputation written here
// independently of the library (its own cache decoding and softmax), or against another
// backend's result.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/random.h"
#include "smla/formats.h"

namespace smla::cli {

// One row (query token x head) of an attention result.
struct RowData {
  std::vector<double> out;  // d_v values
  double lse = 0;
  double max_logit = 0;
  bool has_max_logit = false;
};

// The float64 key row of `slot` in a host paged cache (0 <= slot < num_slots), decoded from
// the byte layouts of SPEC §2; dst holds cache.d_qk() values.
void decode_key_row(const PagedCache& cache, int64_t slot, int head, double* dst);

// SPEC §3 for one row: `keys` holds n rows of d_qk values (a key listed twice counts twice),
// the value of a key is its first kDv values; sink nullptr = none.
RowData attend_f64(const std::vector<double>& q, const std::vector<double>& keys, int d_qk, double scale,
                   const double* sink);

// SPEC §6 over every row added: out relative L2 <= 1e-2 and |err| <= 2e-2 max|ref| + 1e-3,
// no NaN; lse and max_logits |err| <= 1e-4 |ref| + 1e-5 with infinities matching.
class Comparison {
 public:
  void add(const RowData& got, const RowData& ref);
  void merge(const Comparison& o);
  bool ok() const { return rows_ > 0 && failure().empty(); }
  // Why the comparison fails; empty when it passes.
  std::string failure() const;
  double max_out_err() const { return max_err_; }
  double max_lse_err() const { return max_lse_err_; }
  double rel_l2() const;
  int rows() const { return rows_; }

 private:
  int rows_ = 0;
  double max_err_ = 0, max_ref_ = 0, sum_err2_ = 0, sum_ref2_ = 0;
  double max_lse_err_ = 0;
  bool out_nan_ = false, lse_bad_ = false;
  std::string lse_what_;
};

// `count` distinct row numbers of [0, total), always holding the first and the last row.
std::vector<int64_t> sample_rows(int64_t total, int count, Rng& rng);

}  // namespace smla::cli
