// write_cache and gather_cache (SPEC §4.5): host validation, then the backend the cache lives on.
#include <string>

#include "api/dispatch.h"
#include "api/validate.h"
#include "reference/reference.h"
#include "smla/ops.h"

namespace smla {

namespace {

using detail::kAny;

// Writers and readers address one row per slot, so a cache with several kv heads has no
// single row to write or gather.
void check_cache(const PagedCache& c) {
  detail::check_paged_cache("cache", c, {CacheFormat::bf16, CacheFormat::fp16, CacheFormat::fp8_e4m3,
                                         CacheFormat::fp8_ds_mla, CacheFormat::fp8_model1});
  detail::check_value("cache", c.h_kv() == 1, "a cache with h_kv = 1 (dim 2)", describe(c.data));
}

// Rows of a [T, ...] tensor, or kAny when it has none to count (its own check reports it).
int64_t leading_rows(const TensorView& t) { return t.present() && t.ndim >= 1 ? t.shape[0] : kAny; }

void validate(const WriteCacheArgs& a) {
  check_cache(a.cache);
  detail::check_tensor("slot_mapping", a.slot_mapping, {DType::i64}, {kAny});
  detail::check_inner_contiguous("slot_mapping", a.slot_mapping, 1);
  // The token count T is kv_c's, unless kv_c alone disagrees with k_pe and slot_mapping: the
  // error then names the one tensor out of step, not one that holds the count the others agree on.
  const int64_t kv_rows = leading_rows(a.kv_c), pe_rows = leading_rows(a.k_pe), slots = a.slot_mapping.shape[0];
  const int64_t T = kv_rows != pe_rows && pe_rows == slots ? pe_rows : kv_rows;
  detail::check_tensor("kv_c", a.kv_c, {DType::bf16}, {T, latent_dim(a.cache.format, a.cache.d_qk())});
  detail::check_inner_contiguous("kv_c", a.kv_c, 1);
  detail::check_tensor("k_pe", a.k_pe, {DType::bf16}, {T, kDRope});
  detail::check_inner_contiguous("k_pe", a.k_pe, 1);
  detail::check_value("slot_mapping", slots == T,
                      "int64 of shape (" + std::to_string(T) + ",) (one slot per row of kv_c and k_pe)",
                      describe(a.slot_mapping));

  const Device dev = a.cache.data.device;
  detail::check_same_device("kv_c", a.kv_c, "cache", dev);
  detail::check_same_device("k_pe", a.k_pe, "cache", dev);
  detail::check_same_device("slot_mapping", a.slot_mapping, "cache", dev);
  if (detail::on_cuda(a.cache.data)) {
    detail::check_cache_aligned("cache", a.cache);
    detail::check_aligned("kv_c", a.kv_c, 16);
    detail::check_aligned("k_pe", a.k_pe, 16);
  }
  detail::check_no_alias("cache", a.cache.data, "kv_c", a.kv_c);
  detail::check_no_alias("cache", a.cache.data, "k_pe", a.k_pe);
  detail::check_no_alias("cache", a.cache.data, "slot_mapping", a.slot_mapping);
}

void validate(const GatherCacheArgs& a) {
  check_cache(a.cache);
  detail::check_tensor("slots", a.slots, {DType::i32, DType::i64}, {kAny});
  detail::check_inner_contiguous("slots", a.slots, 1);
  const int64_t N = a.slots.shape[0];
  detail::check_tensor("out", a.out, {DType::bf16}, {N, a.cache.d_qk()});
  detail::check_inner_contiguous("out", a.out, 1);

  const Device dev = a.cache.data.device;
  detail::check_same_device("slots", a.slots, "cache", dev);
  detail::check_same_device("out", a.out, "cache", dev);
  if (detail::on_cuda(a.cache.data)) {
    detail::check_cache_aligned("cache", a.cache);
    detail::check_aligned("out", a.out, 16);
  }
  detail::check_outputs_distinct({{"out", &a.out}}, {{"cache", &a.cache.data}, {"slots", &a.slots}});
}

}  // namespace

void write_cache(const WriteCacheArgs& a, const Exec& exec) {
  (void)exec;  // only the CUDA backend takes a stream
  validate(a);
  if (detail::on_cuda(a.cache.data)) {
    SMLA_RUN_CUDA(cuda::write_cache(a, exec));
  } else {
    ref::write_cache(a);
  }
}

void gather_cache(const GatherCacheArgs& a, const Exec& exec) {
  (void)exec;
  validate(a);
  if (detail::on_cuda(a.cache.data)) {
    SMLA_RUN_CUDA(cuda::gather_cache(a, exec));
  } else {
    ref::gather_cache(a);
  }
}

}  // namespace smla
