// Split-KV schedule for decode (SPEC §4.6): how many splits each request's keys get so that
// the whole batch fills `num_units` work units, bounded by max_total_splits whatever the
// lengths.
#include <climits>
#include <vector>

#include "api/dispatch.h"
#include "api/validate.h"
#include "metadata/host_common.h"
#include "metadata/index_math.h"
#include "smla/metadata.h"

namespace smla {

namespace {

void split_schedule_host(const TensorView& lengths, const SplitSchedulePlan& plan, const TensorView& offsets) {
  const int64_t b = lengths.size(0);
  const int32_t* len = lengths.ptr<const int32_t>();
  int32_t* off = offsets.ptr<int32_t>();
  std::vector<int64_t> blocks(static_cast<size_t>(b));
  int64_t total = 0;
  for (int64_t i = 0; i < b; ++i) {
    blocks[i] = meta::split_key_blocks(len[i], plan.max_keys, plan.block_n);
    total += blocks[i] + 1;
  }
  const int64_t per_unit = meta::split_per_unit(total, plan.num_units);
  int64_t acc = 0;
  off[0] = 0;
  for (int64_t i = 0; i < b; ++i) {
    acc += meta::split_count(blocks[i], per_unit);
    off[i + 1] = static_cast<int32_t>(acc);  // acc <= b + num_units, checked to fit int32
  }
}

}  // namespace

int64_t max_total_splits(int64_t batch, int num_units) {
  meta::check_at_least("batch", batch, 0);
  meta::check_at_least("num_units", num_units, 1);
  return batch + num_units;
}

void decode_split_schedule(const TensorView& lengths, const SplitSchedulePlan& plan, const TensorView& split_offsets,
                           [[maybe_unused]] const Exec& exec) {
  meta::check_index_tensor("lengths", lengths, DType::i32, {detail::kAny}, "lengths", lengths, false);
  const int64_t b = lengths.size(0);
  meta::check_index_tensor("split_offsets", split_offsets, DType::i32, {b + 1}, "lengths", lengths, true);
  meta::check_at_least("plan.num_units", plan.num_units, 1);
  meta::check_at_least("plan.block_n", plan.block_n, 1);
  meta::check_at_least("plan.max_keys", plan.max_keys, 0);
  // The offsets are int32: the largest possible split count must fit.
  detail::check_value("plan.num_units", b + plan.num_units <= INT32_MAX,
                      "at most 2147483647 - b = " + std::to_string(INT32_MAX - b), std::to_string(plan.num_units));
  detail::check_no_alias("split_offsets", split_offsets, "lengths", lengths);
  if (detail::on_cuda(lengths)) {
    SMLA_RUN_CUDA(cuda::decode_split_schedule(lengths, plan, split_offsets, exec));
  } else {
    split_schedule_host(lengths, plan, split_offsets);
  }
}

}  // namespace smla
