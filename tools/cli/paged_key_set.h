// One sparse key set as a serving engine holds it (SPEC §7), shared by the sparse_decode and
// the paged sparse_prefill workloads: a paged cache whose pages are handed to requests through
// one random permutation of the whole cache, and index lists of slots into it.
#pragma once

#include <cstdint>
#include <vector>

#include "cli/array.h"
#include "cli/perf_count.h"
#include "cli/random.h"
#include "smla/formats.h"

namespace smla::cli {

// Padding that makes q and the index lists non-contiguous views, as an engine's are (q is a
// slice of a larger projection, index rows come from a wider top-k buffer).
constexpr int64_t kQHeadPad = 64;  // elements after each q head row
constexpr int64_t kIndexPad = 16;  // entries after each index list

struct PagedKeySetSpec {
  CacheFormat format = CacheFormat::fp8_ds_mla;
  int d_qk = 576;
  int page = 64;
  int64_t requests = 1;
  int64_t region = 0;  // positions per request, rounded up to whole pages
  // Index lists [lists..., topk]; consecutive groups of lists_per_request belong to one request.
  std::vector<int64_t> lists;
  int64_t lists_per_request = 1;
  int topk = 0;
  // Keys of list t of a request: the last topk positions up to region - lists_per_request + t
  // (V4's sliding window), else topk distinct random positions of the request.
  bool window = false;
  const char* region_flag = "seqlen";  // the flag that sets region, for the errors
};

struct PagedKeySet {
  CacheFormat format = CacheFormat::fp8_ds_mla;
  int d_qk = 576;
  int page = 64;
  int64_t region = 0;
  int topk = 0;
  int64_t stride = 0;  // entries between consecutive index lists
  Array cache, indices;

  int64_t num_slots() const { return cache.shape[0] * page; }
  const int32_t* list(int64_t l) const { return indices.h<int32_t>() + l * stride; }
  // The first `lists` lists, for the SPEC §7 counts.
  KeySet key_set(int64_t lists) const;
  // Appends the float64 rows of list l's valid slots to `keys` (d_qk values each).
  void gather(int64_t list, std::vector<double>& keys) const;
};

// Builds the set: the cache filled with NaN bytes, then only the slots some list names written
// with random rows (a kernel that reads any other slot shows it); a few entries of every list -1.
// Throws UsageError when topk (or the window) does not fit the region.
PagedKeySet make_paged_key_set(const PagedKeySetSpec& s, Rng& rng, uint64_t seed);

}  // namespace smla::cli
