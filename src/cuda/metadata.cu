// Index and metadata utilities on the device: one thread per output element (one warp per
// row where a row is packed), each calling the same per-element formula as the CPU loop
// (metadata/index_math.h).
#include <cub/block/block_scan.cuh>

#include "cuda/common/cuda_check.h"
#include "cuda/cuda_backend.h"
#include "metadata/index_math.h"

namespace smla::cuda {

namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

// The scan form is defined for any query_start_loc, so no sortedness check is needed here;
// on sorted input it equals the CPU's binary search.
__global__ void req_id_kernel(const int32_t* qsl, int64_t b, int32_t* out, int64_t T) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t < T) out[t] = meta::req_of_token_scan(qsl, b, t);
}

__global__ void page_table_kernel(const int32_t* r2t, int64_t r2t_st, int64_t max_reqs, int64_t max_ctx,
                                  const int32_t* pool, const int32_t* lens, int page_size, int32_t* table,
                                  int64_t b, int64_t max_pages) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= b * max_pages) return;
  const int64_t i = e / max_pages, p = e % max_pages;
  const int64_t r = pool[i];
  const int32_t* row = meta::in_range(r, max_reqs) ? r2t + r * r2t_st : nullptr;
  const int64_t tok = row ? meta::page_first_token(p, lens[i], page_size, max_ctx) : -1;
  table[e] = tok < 0 ? -1 : meta::page_of_token_slot(row[tok], page_size);
}

__global__ void positions_to_slots_kernel(const int32_t* table, int64_t table_st, int64_t b, int64_t max_blocks,
                                          int page_size, const int32_t* req_id, const int32_t* pos, int64_t pos_st,
                                          int32_t* slots, int64_t T, int64_t k) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= T * k) return;
  const int64_t t = e / k, j = e % k;
  const int64_t r = req_id[t];
  const int32_t* row = meta::in_range(r, b) ? table + r * table_st : nullptr;
  slots[e] = meta::narrow_slot(meta::paged_slot(row, max_blocks, pos[t * pos_st + j], page_size));
}

__global__ void sliding_window_kernel(const int32_t* pos, int window, int32_t* out, int64_t T) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= T * window) return;
  out[e] = meta::window_entry(pos[e / window], window, e % window);
}

__global__ void compressed_slot_kernel(const int64_t* pos, const int32_t* req_id, const int32_t* table,
                                       int64_t table_st, int64_t b, int64_t max_blocks, int ratio, int spp,
                                       int64_t* out, int64_t T) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= T) return;
  const int64_t r = req_id[t];
  const int32_t* row = meta::in_range(r, b) ? table + r * table_st : nullptr;
  out[t] = meta::paged_slot(row, max_blocks, meta::compressed_state(pos[t], ratio), spp);
}

__global__ void dcp_kernel(const int32_t* in, int world, int interleave, int rank, int32_t* out, int64_t b) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < b) out[i] = static_cast<int32_t>(meta::dcp_local_len(in[i], world, interleave, rank));
}

// One CTA per request (grid-stride over requests); its rows one after the other, each in
// chunks of kTopkThreads x kTopkPerThread entries. A thread resolves its run of consecutive
// entries with all their loads in flight (positions, then block-table entries), and a block
// scan of the kept counts places each kept slot after those before it, so the row keeps its
// order. Every entry of the row is written (the -1 tail too) and topk_length[i] is a plain store
// of the rows' maximum (no atomics): nothing needs clearing before a launch or a graph replay.
constexpr int kTopkThreads = 256, kTopkPerThread = 8;

__global__ void __launch_bounds__(kTopkThreads)
    dcp_topk_kernel(const int32_t* __restrict__ pos, int64_t pos_st0, int64_t pos_st1,
                    const int32_t* __restrict__ table, int64_t table_st, int64_t max_blocks, int page_size, int world,
                    int interleave, int rank, int32_t* __restrict__ slots, int32_t* __restrict__ counts,
                    int32_t* __restrict__ topk_length, int64_t b, int64_t s_q, int64_t k) {
  using Scan = cub::BlockScan<int32_t, kTopkThreads>;
  __shared__ typename Scan::TempStorage tmp;
  constexpr int64_t kChunk = int64_t{kTopkThreads} * kTopkPerThread;
  for (int64_t i = blockIdx.x; i < b; i += gridDim.x) {
    const int32_t* row = table + i * table_st;
    int64_t longest = 0;  // the same in every thread
    for (int64_t j = 0; j < s_q; ++j) {
      const int32_t* p = pos + i * pos_st0 + j * pos_st1;
      int32_t* out = slots + (i * s_q + j) * k;
      int64_t kept = 0;  // the same in every thread
      for (int64_t c = 0; c < k; c += kChunk) {
        const int64_t e0 = c + static_cast<int64_t>(threadIdx.x) * kTopkPerThread;
        int32_t v[kTopkPerThread];
#pragma unroll
        for (int u = 0; u < kTopkPerThread; ++u) v[u] = e0 + u < k ? p[e0 + u] : -1;
        int32_t n = 0;
#pragma unroll
        for (int u = 0; u < kTopkPerThread; ++u) {
          v[u] = e0 + u < k ? meta::dcp_rank_slot(row, max_blocks, v[u], page_size, world, interleave, rank) : -1;
          n += v[u] >= 0;
        }
        int32_t before, total;
        Scan(tmp).ExclusiveSum(n, before, total);
        int64_t o = kept + before;
#pragma unroll
        for (int u = 0; u < kTopkPerThread; ++u)
          if (v[u] >= 0) out[o++] = v[u];
        kept += total;
        __syncthreads();  // tmp is reused by the next scan
      }
      for (int64_t e = kept + threadIdx.x; e < k; e += kTopkThreads) out[e] = -1;
      if (threadIdx.x == 0) counts[i * s_q + j] = static_cast<int32_t>(kept);
      longest = max(longest, kept);
    }
    if (threadIdx.x == 0 && topk_length != nullptr) topk_length[i] = static_cast<int32_t>(longest);
  }
}

// One CTA: per-thread runs of requests, two block scans (total cost, then split counts).
__global__ void __launch_bounds__(kThreads) split_schedule_kernel(const int32_t* len, int64_t b, SplitSchedulePlan plan,
                                                                  int32_t* offsets) {
  using Scan = cub::BlockScan<int64_t, kThreads>;
  __shared__ typename Scan::TempStorage tmp;
  __shared__ int64_t s_total;
  const int64_t per = (b + kThreads - 1) / kThreads;
  const int64_t r0 = threadIdx.x * per, r1 = min(r0 + per, b);
  int64_t cost = 0;
  for (int64_t r = r0; r < r1; ++r) cost += meta::split_key_blocks(len[r], plan.max_keys, plan.block_n) + 1;
  int64_t total;
  Scan(tmp).ExclusiveSum(cost, cost, total);
  if (threadIdx.x == 0) s_total = total;
  __syncthreads();
  const int64_t per_unit = meta::split_per_unit(s_total, plan.num_units);
  int64_t n = 0;
  for (int64_t r = r0; r < r1; ++r) n += meta::split_count(meta::split_key_blocks(len[r], plan.max_keys, plan.block_n), per_unit);
  int64_t before;
  Scan(tmp).ExclusiveSum(n, before);
  if (threadIdx.x == 0) offsets[0] = 0;
  for (int64_t r = r0; r < r1; ++r) {
    before += meta::split_count(meta::split_key_blocks(len[r], plan.max_keys, plan.block_n), per_unit);
    offsets[r + 1] = static_cast<int32_t>(before);
  }
}

}  // namespace

void req_id_per_token(const TensorView& qsl, const TensorView& out, const Exec& exec) {
  const int64_t T = out.shape[0];
  if (T == 0) return;
  req_id_kernel<<<blocks_for(T), kThreads, 0, as_stream(exec.stream)>>>(qsl.ptr<const int32_t>(), qsl.shape[0] - 1,
                                                                         out.ptr<int32_t>(), T);
  SMLA_CUDA_CHECK_LAUNCH();
}

void page_table_from_req_to_token(const TensorView& r2t, const TensorView& pool, const TensorView& lens, int page_size,
                                  const TensorView& table, const Exec& exec) {
  const int64_t n = table.shape[0] * table.shape[1];
  if (n == 0) return;
  page_table_kernel<<<blocks_for(n), kThreads, 0, as_stream(exec.stream)>>>(
      r2t.ptr<const int32_t>(), r2t.stride[0], r2t.shape[0], r2t.shape[1], pool.ptr<const int32_t>(),
      lens.ptr<const int32_t>(), page_size, table.ptr<int32_t>(), table.shape[0], table.shape[1]);
  SMLA_CUDA_CHECK_LAUNCH();
}

void positions_to_slots(const TensorView& table, int page_size, const TensorView& req_id, const TensorView& positions,
                        const TensorView& slots, const Exec& exec) {
  const int64_t n = positions.shape[0] * positions.shape[1];
  if (n == 0) return;
  positions_to_slots_kernel<<<blocks_for(n), kThreads, 0, as_stream(exec.stream)>>>(
      table.ptr<const int32_t>(), table.stride[0], table.shape[0], table.shape[1], page_size,
      req_id.ptr<const int32_t>(), positions.ptr<const int32_t>(), positions.stride[0], slots.ptr<int32_t>(),
      positions.shape[0], positions.shape[1]);
  SMLA_CUDA_CHECK_LAUNCH();
}

void sliding_window_indices(const TensorView& positions, int window, const TensorView& out, const Exec& exec) {
  const int64_t n = positions.shape[0] * window;
  if (n == 0) return;
  sliding_window_kernel<<<blocks_for(n), kThreads, 0, as_stream(exec.stream)>>>(positions.ptr<const int32_t>(), window,
                                                                                 out.ptr<int32_t>(), positions.shape[0]);
  SMLA_CUDA_CHECK_LAUNCH();
}

void compressed_slot_mapping(const TensorView& positions, const TensorView& req_id, const TensorView& table,
                             int ratio, int spp, const TensorView& out, const Exec& exec) {
  const int64_t T = positions.shape[0];
  if (T == 0) return;
  compressed_slot_kernel<<<blocks_for(T), kThreads, 0, as_stream(exec.stream)>>>(
      positions.ptr<const int64_t>(), req_id.ptr<const int32_t>(), table.ptr<const int32_t>(), table.stride[0],
      table.shape[0], table.shape[1], ratio, spp, out.ptr<int64_t>(), T);
  SMLA_CUDA_CHECK_LAUNCH();
}

void dcp_local_seqlens(const TensorView& seqlens, DcpLayout d, int rank, const TensorView& out, const Exec& exec) {
  const int64_t b = seqlens.shape[0];
  if (b == 0) return;
  dcp_kernel<<<blocks_for(b), kThreads, 0, as_stream(exec.stream)>>>(seqlens.ptr<const int32_t>(), d.world,
                                                                      d.interleave, rank, out.ptr<int32_t>(), b);
  SMLA_CUDA_CHECK_LAUNCH();
}

void dcp_local_topk(const TensorView& positions, const TensorView& block_table, int page_size, DcpLayout d, int rank,
                    const TensorView& slots, const TensorView& counts, const TensorView& topk_length,
                    const Exec& exec) {
  const int64_t b = positions.shape[0], s_q = positions.shape[1], k = positions.shape[2];
  if (b == 0) return;
  // b is bounded only by memory, so the grid strides.
  const unsigned grid = static_cast<unsigned>(meta::min64(b, int64_t{1} << 16));
  dcp_topk_kernel<<<grid, kTopkThreads, 0, as_stream(exec.stream)>>>(
      positions.ptr<const int32_t>(), positions.stride[0], positions.stride[1], block_table.ptr<const int32_t>(),
      block_table.stride[0], block_table.shape[1], page_size, d.world, d.interleave, rank, slots.ptr<int32_t>(),
      counts.ptr<int32_t>(), topk_length.present() ? topk_length.ptr<int32_t>() : nullptr, b, s_q, k);
  SMLA_CUDA_CHECK_LAUNCH();
}

void decode_split_schedule(const TensorView& lengths, const SplitSchedulePlan& plan, const TensorView& split_offsets,
                           const Exec& exec) {
  split_schedule_kernel<<<1, kThreads, 0, as_stream(exec.stream)>>>(lengths.ptr<const int32_t>(), lengths.shape[0],
                                                                     plan, split_offsets.ptr<int32_t>());
  SMLA_CUDA_CHECK_LAUNCH();
}

}  // namespace smla::cuda
