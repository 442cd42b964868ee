// Index utilities of SPEC §4.6: validation on the host, then the CUDA kernels or the host
// loops below. Both evaluate the formulas of index_math.h per element.
#include <algorithm>

#include "api/dispatch.h"
#include "api/validate.h"
#include "metadata/host_common.h"
#include "metadata/index_math.h"
#include "smla/metadata.h"

namespace smla {

namespace {
using detail::kAny;

void req_id_per_token_host(const TensorView& qsl_t, const TensorView& out) {
  const int32_t* qsl = qsl_t.ptr<const int32_t>();
  int32_t* o = out.ptr<int32_t>();
  int64_t b = qsl_t.size(0) - 1;
  bool sorted = meta::non_decreasing(qsl, b + 1);
  meta::for_each_row(out.size(0), sorted ? 8 : b + 1, [&](int64_t t) {
    o[t] = sorted ? meta::req_of_token_sorted(qsl, b, t) : meta::req_of_token_scan(qsl, b, t);
  });
}

void page_table_host(const TensorView& r2t, const TensorView& pool, const TensorView& lens, int page_size,
                     const TensorView& table) {
  const int64_t max_reqs = r2t.size(0), max_ctx = r2t.size(1), max_pages = table.size(1);
  const int32_t* pool_p = pool.ptr<const int32_t>();
  const int32_t* lens_p = lens.ptr<const int32_t>();
  meta::for_each_row(table.size(0), max_pages, [&](int64_t i) {
    int64_t r = pool_p[i];
    const int32_t* row = meta::in_range(r, max_reqs) ? r2t.ptr<const int32_t>() + r * r2t.stride[0] : nullptr;
    int32_t* out = table.ptr<int32_t>() + i * max_pages;
    for (int64_t p = 0; p < max_pages; ++p) {
      int64_t tok = row ? meta::page_first_token(p, lens_p[i], page_size, max_ctx) : -1;
      out[p] = tok < 0 ? -1 : meta::page_of_token_slot(row[tok], page_size);
    }
  });
}

void positions_to_slots_host(const TensorView& table, int page_size, const TensorView& req_id,
                             const TensorView& positions, const TensorView& slots) {
  const int64_t b = table.size(0), max_blocks = table.size(1), k = positions.size(1);
  const int32_t* req_p = req_id.ptr<const int32_t>();
  meta::for_each_row(positions.size(0), k, [&](int64_t t) {
    int64_t r = req_p[t];
    const int32_t* row = meta::in_range(r, b) ? table.ptr<const int32_t>() + r * table.stride[0] : nullptr;
    const int32_t* pos = positions.ptr<const int32_t>() + t * positions.stride[0];
    int32_t* out = slots.ptr<int32_t>() + t * k;
    for (int64_t j = 0; j < k; ++j)
      out[j] = meta::narrow_slot(meta::paged_slot(row, max_blocks, pos[j], page_size));
  });
}

void sliding_window_host(const TensorView& positions, int window, const TensorView& out) {
  const int32_t* pos = positions.ptr<const int32_t>();
  meta::for_each_row(positions.size(0), window, [&](int64_t t) {
    int32_t* o = out.ptr<int32_t>() + t * window;
    for (int64_t j = 0; j < window; ++j) o[j] = meta::window_entry(pos[t], window, j);
  });
}

void compressed_slot_mapping_host(const TensorView& positions, const TensorView& req_id, const TensorView& table,
                                  int ratio, int states_per_page, const TensorView& out) {
  const int64_t b = table.size(0), max_blocks = table.size(1);
  const int64_t* pos = positions.ptr<const int64_t>();
  const int32_t* req_p = req_id.ptr<const int32_t>();
  int64_t* o = out.ptr<int64_t>();
  meta::for_each_row(positions.size(0), 1, [&](int64_t t) {
    int64_t r = req_p[t];
    const int32_t* row = meta::in_range(r, b) ? table.ptr<const int32_t>() + r * table.stride[0] : nullptr;
    o[t] = meta::paged_slot(row, max_blocks, meta::compressed_state(pos[t], ratio), states_per_page);
  });
}

}  // namespace

void req_id_per_token(const TensorView& query_start_loc, const TensorView& out,
                      [[maybe_unused]] const Exec& exec) {
  meta::check_index_tensor("query_start_loc", query_start_loc, DType::i32, {kAny}, "query_start_loc",
                           query_start_loc, false);
  detail::check_value("query_start_loc", query_start_loc.size(0) >= 1, "int32 of shape (b+1,) with b >= 0",
                      describe(query_start_loc));
  meta::check_index_tensor("out", out, DType::i32, {kAny}, "query_start_loc", query_start_loc, true);
  detail::check_no_alias("out", out, "query_start_loc", query_start_loc);
  if (detail::on_cuda(query_start_loc)) {
    SMLA_RUN_CUDA(cuda::req_id_per_token(query_start_loc, out, exec));
  } else {
    req_id_per_token_host(query_start_loc, out);
  }
}

void page_table_from_req_to_token(const TensorView& req_to_token, const TensorView& req_pool_indices,
                                  const TensorView& seq_lens, int page_size, const TensorView& block_table,
                                  [[maybe_unused]] const Exec& exec) {
  const char* ref = "req_to_token";
  meta::check_index_tensor("req_to_token", req_to_token, DType::i32, {kAny, kAny}, ref, req_to_token, false);
  meta::check_index_tensor("req_pool_indices", req_pool_indices, DType::i32, {kAny}, ref, req_to_token, false);
  meta::check_index_tensor("seq_lens", seq_lens, DType::i32, {kAny}, ref, req_to_token, false);
  // One entry per request in both: a mismatch is reported against the shorter of the two.
  const int64_t b = std::max(req_pool_indices.size(0), seq_lens.size(0));
  meta::check_index_tensor("req_pool_indices", req_pool_indices, DType::i32, {b}, ref, req_to_token, false);
  meta::check_index_tensor("seq_lens", seq_lens, DType::i32, {b}, ref, req_to_token, false);
  meta::check_index_tensor("block_table", block_table, DType::i32, {b, kAny}, ref, req_to_token, true);
  meta::check_at_least("page_size", page_size, 1);
  detail::check_no_alias("block_table", block_table, "req_to_token", req_to_token);
  detail::check_no_alias("block_table", block_table, "req_pool_indices", req_pool_indices);
  detail::check_no_alias("block_table", block_table, "seq_lens", seq_lens);
  if (detail::on_cuda(req_to_token)) {
    SMLA_RUN_CUDA(cuda::page_table_from_req_to_token(req_to_token, req_pool_indices, seq_lens, page_size,
                                                     block_table, exec));
  } else {
    page_table_host(req_to_token, req_pool_indices, seq_lens, page_size, block_table);
  }
}

void positions_to_slots(const TensorView& block_table, int page_size, const TensorView& req_id,
                        const TensorView& positions, const TensorView& slots,
                        [[maybe_unused]] const Exec& exec) {
  const char* ref = "block_table";
  meta::check_index_tensor("block_table", block_table, DType::i32, {kAny, kAny}, ref, block_table, false);
  meta::check_at_least("page_size", page_size, 1);
  meta::check_index_tensor("req_id", req_id, DType::i32, {kAny}, ref, block_table, false);
  meta::check_index_tensor("positions", positions, DType::i32, {kAny, kAny}, ref, block_table, false);
  // One row per token in both: a mismatch is reported against the shorter of the two.
  const int64_t T = std::max(req_id.size(0), positions.size(0));
  meta::check_index_tensor("req_id", req_id, DType::i32, {T}, ref, block_table, false);
  meta::check_index_tensor("positions", positions, DType::i32, {T, kAny}, ref, block_table, false);
  meta::check_index_tensor("slots", slots, DType::i32, {T, positions.size(1)}, ref, block_table, true);
  detail::check_no_alias("slots", slots, "block_table", block_table);
  detail::check_no_alias("slots", slots, "req_id", req_id);
  detail::check_no_alias("slots", slots, "positions", positions);
  if (detail::on_cuda(block_table)) {
    SMLA_RUN_CUDA(cuda::positions_to_slots(block_table, page_size, req_id, positions, slots, exec));
  } else {
    positions_to_slots_host(block_table, page_size, req_id, positions, slots);
  }
}

void sliding_window_indices(const TensorView& positions, int window, const TensorView& out,
                            [[maybe_unused]] const Exec& exec) {
  meta::check_index_tensor("positions", positions, DType::i32, {kAny}, "positions", positions, false);
  meta::check_at_least("window", window, 1);
  meta::check_index_tensor("out", out, DType::i32, {positions.size(0), window}, "positions", positions, true);
  detail::check_no_alias("out", out, "positions", positions);
  if (detail::on_cuda(positions)) {
    SMLA_RUN_CUDA(cuda::sliding_window_indices(positions, window, out, exec));
  } else {
    sliding_window_host(positions, window, out);
  }
}

void compressed_slot_mapping(const TensorView& positions, const TensorView& req_id, const TensorView& block_table,
                             int compress_ratio, int states_per_page, const TensorView& out,
                             [[maybe_unused]] const Exec& exec) {
  const char* ref = "positions";
  meta::check_index_tensor("positions", positions, DType::i64, {kAny}, ref, positions, false);
  const int64_t T = positions.size(0);
  meta::check_index_tensor("req_id", req_id, DType::i32, {T}, ref, positions, false);
  meta::check_index_tensor("block_table", block_table, DType::i32, {kAny, kAny}, ref, positions, false);
  meta::check_at_least("compress_ratio", compress_ratio, 1);
  meta::check_at_least("states_per_page", states_per_page, 1);
  meta::check_index_tensor("out", out, DType::i64, {T}, ref, positions, true);
  detail::check_no_alias("out", out, "positions", positions);
  detail::check_no_alias("out", out, "req_id", req_id);
  detail::check_no_alias("out", out, "block_table", block_table);
  if (detail::on_cuda(positions)) {
    SMLA_RUN_CUDA(cuda::compressed_slot_mapping(positions, req_id, block_table, compress_ratio, states_per_page,
                                                out, exec));
  } else {
    compressed_slot_mapping_host(positions, req_id, block_table, compress_ratio, states_per_page, out);
  }
}

}  // namespace smla
