#include "cli/paged_key_set.h"

#include <algorithm>
#include <string>

#include "cli/args.h"
#include "cli/check.h"
#include "cli/workloads.h"

namespace smla::cli {

PagedKeySet make_paged_key_set(const PagedKeySetSpec& s, Rng& rng, uint64_t seed) {
  PagedKeySet k;
  k.format = s.format;
  k.d_qk = s.d_qk;
  k.page = s.page;
  k.region = (s.region + s.page - 1) / s.page * s.page;
  k.topk = s.topk;
  k.stride = s.topk + kIndexPad;
  const std::string flag = std::string("--") + s.region_flag;
  if (s.window && s.lists_per_request > k.region)
    throw UsageError("the sliding window needs s_q <= " + std::string(s.region_flag) + " (tokens per request)");
  if (!s.window && s.topk > k.region)
    throw UsageError("topk " + std::to_string(s.topk) + " needs at least that many tokens per request, got " +
                     std::to_string(k.region) + " (raise " + flag + ")");

  // Like a serving cache after hours of traffic: request i's positions map to slots through a
  // block table that is a random permutation of the whole cache.
  const int64_t pages_per_req = k.region / s.page, num_pages = s.requests * pages_per_req;
  k.cache = make_cache_array(s.format, s.d_qk, num_pages, s.page, false);
  k.cache.host.fill(0xff);
  std::vector<int32_t> all(static_cast<size_t>(num_pages)), table(all.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int32_t>(i);
  sample_distinct(rng, all, num_pages, table.data());
  auto slot = [&](int64_t req, int64_t pos) -> int32_t {
    return static_cast<int32_t>(table[static_cast<size_t>(req * pages_per_req + pos / s.page)] * int64_t(s.page) +
                                pos % s.page);
  };

  // [lists..., topk], each list `stride` entries after the previous one.
  std::vector<int64_t> shape = s.lists, stride(s.lists.size() + 1, 1);
  shape.push_back(s.topk);
  int64_t n_lists = 1;
  for (size_t d = s.lists.size(); d-- > 0;) {
    stride[d] = n_lists * k.stride;
    n_lists *= s.lists[d];
  }
  k.indices = Array::make_strided(DType::i32, shape, stride, static_cast<size_t>(n_lists * k.stride) * 4);
  int32_t* idx = k.indices.h<int32_t>();
  std::fill(idx, idx + n_lists * k.stride, -1);
  std::vector<int32_t> perm(static_cast<size_t>(k.region)), pos(static_cast<size_t>(s.topk));
  for (int64_t p = 0; p < k.region; ++p) perm[static_cast<size_t>(p)] = static_cast<int32_t>(p);
  const int64_t per_req = s.lists_per_request;
  for (int64_t i = 0; i < n_lists / per_req; ++i) {
    for (int64_t t = 0; t < per_req; ++t) {
      int32_t* list = idx + (i * per_req + t) * k.stride;
      if (s.window) {
        const int64_t at = k.region - per_req + t;
        for (int j = 0; j < s.topk; ++j) {
          const int64_t p = at - s.topk + 1 + j;
          list[j] = p >= 0 ? slot(i, p) : -1;
        }
      } else {
        sample_distinct(rng, perm, s.topk, pos.data());
        for (int j = 0; j < s.topk; ++j) list[j] = slot(i, pos[static_cast<size_t>(j)]);
      }
      mix_invalid(list, 1, s.topk, invalid_per_list(s.topk), rng);
    }
  }
  write_random_rows(paged_cache(k.cache, k.format, kCPU), touched_slots(idx, n_lists * k.stride, k.num_slots()),
                    seed);
  return k;
}

KeySet PagedKeySet::key_set(int64_t lists) const {
  KeySet ks;
  ks.indices = indices.h<int32_t>();
  ks.lists = lists;
  ks.topk = topk;
  ks.stride = stride;
  ks.num_slots = num_slots();
  ks.bytes_per_token = bytes_per_token(format, d_qk);
  return ks;
}

void PagedKeySet::gather(int64_t l, std::vector<double>& keys) const {
  const PagedCache c = paged_cache(cache, format, kCPU);
  const int32_t* idx = list(l);
  for (int j = 0; j < topk; ++j) {
    if (idx[j] < 0 || idx[j] >= num_slots()) continue;
    const size_t at = keys.size();
    keys.resize(at + static_cast<size_t>(d_qk));
    decode_key_row(c, idx[j], 0, keys.data() + at);
  }
}

}  // namespace smla::cli
