#include "cuda/attention/attention_launch.h"

#include <cub/block/block_scan.cuh>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "api/validate.h"
#include "cuda/attention/attention_dispatch.h"
#include "cuda/attention/attention_kernel.cuh"
#include "cuda/attention/combine_kernel.cuh"
#include "cuda/common/cuda_check.h"
#include "cuda/common/device_info.h"
#include "cuda/common/pdl.cuh"
#include "cuda/sparse_decode/config.h"  // SMLA_SD_TAIL_SPLIT
#include "cuda/sparse_decode/launch.h"
#include "metadata/index_math.h"
#include "smla/metadata.h"

namespace smla::cuda {

namespace {

constexpr int kPlanThreads = 256;
constexpr size_t kMaxSmemPerBlock = 232448;  // sm_90 opt-in limit (227 KB)
constexpr int64_t kMaxKeys = 0x7fffffff;  // lengths are already clamped by request_keys
static_assert(kSplitBlockKeys == kBlockN, "the inline schedule's blocks are the kernels'");
constexpr size_t kAlign = 256;
size_t align_up(size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

// A measurement knob's value: environment variable `var` as an integer, 0 when unset (callers
// read it once per process).
int env_int(const char* var) {
  const char* v = std::getenv(var);
  return v ? std::atoi(v) : 0;
}

// Sparse key lists without per-request lengths: every request has the same key count.
bool uniform_keys(const AttnParams& p) {
  return !p.dense && p.main.topk_length == nullptr && (!p.has_extra || p.extra.topk_length == nullptr);
}
int64_t uniform_key_count(const AttnParams& p) {
  return static_cast<int64_t>(std::max(p.main.topk, 0)) + (p.has_extra ? std::max(p.extra.topk, 0) : 0);
}

// The split-KV schedule of metadata.h (decode_split_schedule), computed from the lengths the
// attention kernel itself will see, with at least min_blocks key blocks per split
// (meta::split_per_unit_at_least). One CTA: requests are split into contiguous runs per thread.
// A one-warp version launched as a programmatic dependent measured 0.35-0.5% slower at b 64-128
// (PERF.md, seventy-first pass); batches of up to kInlineSplitRequests make the schedule inside
// the attention kernels instead (split_lookup.cuh inline_splits).
__global__ void __launch_bounds__(kPlanThreads) split_plan_kernel(const AttnParams p, int num_units, int min_blocks,
                                                                 int32_t* offsets) {
  pdl_launch_dependents();  // the attention kernel starts and waits (pdl_wait) for these offsets
  const int per = (p.b + kPlanThreads - 1) / kPlanThreads;
  const int r0 = threadIdx.x * per, r1 = min(r0 + per, p.b);
  auto blocks = [&](int r) { return meta::split_key_blocks(request_keys(p, r), kMaxKeys, kBlockN); };
  int64_t cost = 0;
  for (int r = r0; r < r1; ++r) cost += blocks(r) + 1;
  using Scan = cub::BlockScan<int64_t, kPlanThreads>;
  __shared__ typename Scan::TempStorage scan_tmp;
  __shared__ int64_t s_total;
  int64_t total, n = 0, before;
  Scan(scan_tmp).ExclusiveSum(cost, cost, total);
  if (threadIdx.x == 0) s_total = total;
  __syncthreads();
  const int64_t per_unit = meta::split_per_unit_at_least(s_total, num_units, min_blocks);
  for (int r = r0; r < r1; ++r) n += meta::split_count(blocks(r), per_unit);
  __syncthreads();
  Scan(scan_tmp).ExclusiveSum(n, before);
  for (int r = r0; r < r1; ++r) {
    offsets[r] = static_cast<int32_t>(before);
    before += meta::split_count(blocks(r), per_unit);
  }
  if (r0 < r1 && r1 == p.b) offsets[p.b] = static_cast<int32_t>(before);
}

template <bool F16, int D, int FMT>
void dispatch_ng(int ng, const AttnParams& p, dim3 grid, cudaStream_t stream) {
  switch (ng) {
    case 1: launch_attention_kernel<1, F16, D, FMT>(p, grid, stream); break;
    case 2: launch_attention_kernel<2, F16, D, FMT>(p, grid, stream); break;
    case 3: launch_attention_kernel<3, F16, D, FMT>(p, grid, stream); break;
    default: launch_attention_kernel<4, F16, D, FMT>(p, grid, stream); break;
  }
}

// The instantiation's format argument: packed formats have their own kernels.
int kernel_format(int format, bool f16) {
  const bool packed = format == static_cast<int>(CacheFormat::fp8_ds_mla) || format == static_cast<int>(CacheFormat::fp8_model1);
  return packed && !f16 ? format : kAnyFormat;
}

// The instantiation for (element type, d_qk, format); see instantiations/.
void dispatch(const AttentionPlan& plan, const AttnParams& p, dim3 grid, cudaStream_t stream) {
  constexpr int kDs = static_cast<int>(CacheFormat::fp8_ds_mla), kM1 = static_cast<int>(CacheFormat::fp8_model1);
  if (plan.f16) {
    if (p.d_qk == 576) dispatch_ng<true, 576, kAnyFormat>(plan.ng, p, grid, stream);
    else dispatch_ng<true, 512, kAnyFormat>(plan.ng, p, grid, stream);
  } else if (plan.format == kDs && p.d_qk == 576) {
    dispatch_ng<false, 576, kDs>(plan.ng, p, grid, stream);
  } else if (plan.format == kM1 && p.d_qk == 512) {
    dispatch_ng<false, 512, kM1>(plan.ng, p, grid, stream);
  } else if (p.d_qk == 576) {
    dispatch_ng<false, 576, kAnyFormat>(plan.ng, p, grid, stream);
  } else {
    dispatch_ng<false, 512, kAnyFormat>(plan.ng, p, grid, stream);
  }
}

int ctas_per_sm(int ng, int d_qk, bool f16, int format, int raw_stride) {
  const size_t smem = attention_smem_bytes(ng, d_qk, f16, kernel_format(format, f16), raw_stride);
  const DeviceInfo& d = current_device_info();
  int by_smem = static_cast<int>(d.smem_per_sm / (smem + 1024));
  int by_regs = 65536 / (attention_threads(ng) * 255);
  return std::max(1, std::min(by_smem, std::max(1, by_regs)));
}

// The combine's prefetch (combine_kernel.cuh, SMLA_COMBINE_PREFETCH): =1 wherever several warps
// merge a head, =2 (default) where the grid also fits one wave of the prefetching kernel on the
// current device (its registers allow fewer CTAs an SM), 0 nowhere.
constexpr int kCombinePre = SMLA_COMBINE_PREFETCH != 0 ? 4 : 0;
bool combine_prefetch(dim3 grid) {
  if constexpr (SMLA_COMBINE_PREFETCH == 0) {
    return false;
  } else if constexpr (SMLA_COMBINE_PREFETCH == 1) {
    return true;
  } else {
    // CTAs an SM: the kernel's own (one sm_90a binary); the SMs: the device's.
    static const int per_sm = [] {
      int n = 0;
      SMLA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
          &n, combine_splits_kernel<kCombineWarps, kCombinePre>, kCombineWarps * 32, 0));
      return n;
    }();
    const int64_t wave = static_cast<int64_t>(per_sm) * current_device_info().sm_count;
    return static_cast<int64_t>(grid.x) * grid.y * grid.z <= wave;
  }
}

// Measurement knob SMLA_PLAN_KERNEL=1 (read once per process): the schedule kernel for every
// batch; unset or 0, the kernels' own schedule up to kInlineSplitRequests requests (none in the
// SMLA_SPLIT_INLINE=0 build).
bool inline_schedule(int b) {
  static const int plan_kernel = env_int("SMLA_PLAN_KERNEL");
  return b <= kInlineSplitRequests && plan_kernel == 0;
}

}  // namespace

// The schedule kernel: one CTA of kPlanThreads, launched plainly.
void launch_split_plan(const AttnParams& p, cudaStream_t stream) {
  split_plan_kernel<<<1, kPlanThreads, 0, stream>>>(p, p.split_units, p.split_min_blocks,
                                                    const_cast<int32_t*>(p.split_offsets));
  SMLA_CUDA_CHECK(cudaGetLastError());
}

AttentionPlan plan_attention(int b, int s_q, int h_q, int h_kv, int d_qk, bool tokens_share_keys, bool f16,
                             bool allow_split, int raw_stride, int format) {
  AttentionPlan pl;
  s_q = std::max(s_q, 1);  // empty calls return before launching; keep the tiling arithmetic defined
  h_q = std::max(h_q, 1);
  pl.f16 = f16;
  pl.raw_stride = raw_stride;
  pl.format = format;
  const int hpk = h_q / std::max(h_kv, 1);
  // 64 rows per CTA unless the widest staged rows (bf16 at d_qk 576) leave no room for them.
  const int kMaxRows =
      attention_smem_bytes(4, d_qk, f16, kernel_format(format, f16), raw_stride) <= kMaxSmemPerBlock ? 64 : 48;
  pl.tokens_per_cta = tokens_share_keys ? std::min(s_q, kMaxRows) : 1;
  pl.token_groups = (s_q + pl.tokens_per_cta - 1) / pl.tokens_per_cta;
  int heads_cap = std::max(1, kMaxRows / pl.tokens_per_cta);
  pl.tiles_per_kv = (hpk + heads_cap - 1) / heads_cap;
  pl.heads_tile = (hpk + pl.tiles_per_kv - 1) / pl.tiles_per_kv;  // balanced tiles
  const int rows = pl.tokens_per_cta * pl.heads_tile;
  pl.ng = std::min(4, (rows + 15) / 16);
  pl.split = allow_split && b > 0;
  if (pl.split) {
    const int64_t ctas_per_split = static_cast<int64_t>(h_kv) * pl.tiles_per_kv * pl.token_groups;
    const int64_t slots = static_cast<int64_t>(current_device_info().sm_count) * ctas_per_sm(pl.ng, d_qk, f16, format, raw_stride);
    pl.num_units = static_cast<int>(std::max<int64_t>(1, slots / std::max<int64_t>(1, ctas_per_split)));
    pl.max_splits = max_total_splits(b, pl.num_units);
  }
  return pl;
}

namespace {
// Work units of a sparse-decode schedule whose splits take ctas_per_split CTAs (one CTA per SM).
int64_t sparse_decode_units(int b, int64_t ctas_per_split) {
  const int64_t slots = current_device_info().sm_count;
  return meta::split_units(b, std::max<int64_t>(1, slots / std::max<int64_t>(1, ctas_per_split)));
}

// Blocks a split of the schedule made from shapes (uniform key counts): at least min_blocks, then
// on 16-row fp8_ds_mla tiles, whose two warpgroups take alternate blocks, the even-chunk rule
// (meta::split_per_unit_alternating) within the workspace's max_splits and one wave of slots.
// launch_attention schedules by it, and narrow_floor's SMLA_SD_NARROW_TWO predicts with it.
// Measurement knob: SMLA_SPLIT_ODD_CHUNKS=1 keeps the odd chunks. Read once per process.
int64_t uniform_per_unit(int64_t b, int64_t blocks, int64_t units, int min_blocks, bool ds16, int64_t max_splits,
                         int64_t ctas_per_split, int64_t slots) {
  const int64_t per_unit = meta::split_per_unit_at_least(b * (blocks + 1), units, min_blocks);
  static const bool odd = env_int("SMLA_SPLIT_ODD_CHUNKS") == 1;
  constexpr int kDs = static_cast<int>(CacheFormat::fp8_ds_mla);
  if (odd || !ds16 || sparse_decode_family::kRawWgs<16, kDs> != 2) return per_unit;
  return meta::split_per_unit_alternating(per_unit, blocks, b, max_splits, ctas_per_split, slots);
}

// The floor of key blocks a split (2, 1) where 16-row tiles beat 64-row ones for h_q > 32 at this
// size, else 0. fp8_ds_mla: where the 64-row schedule would cut every request into one-block
// splits, each CTA spends most of its time starting and storing 128 KB of float32 partials;
// 16-row tiles over 2+ blocks a split (a quarter of the partials a CTA) measured faster
// (twenty-eighth pass, topk 2048, µs, 64 -> 16 rows: b1 h128 18.4 -> 16.9, b2 h128 24.2 -> 21.2,
// b1 s_q2 h128 24.0 -> 21.2, b1 h64 17.4 -> 15.0, b2 h64 18.8 -> 17.6, b3 h64 22.9 -> 18.6, b4
// h64 24.5 -> 19.3; b4 h128, two-block splits at 64 rows, level then, b8 +12%), and after the
// narrow tiles' later passes also where 64-row splits would be of two blocks (below).
// fp8_model1 (V4, 128 + 512 / 1024 keys): 16-row tiles only where their own schedule makes
// one-block splits on at most one wave of CTAs; with the floor of 2 it lost 1-46% at b 1-12.
// Same call (twenty-ninth pass, µs, 64-row -> this rule): b1 h64 15.6 -> 13.8, b2 h64 16.3 ->
// 14.8, b3 h64 16.7 -> 15.3, b1 s_q2 h64 16.2 -> 14.7, b1 h64 +1024 16.3 -> 15.0, b1 h128 +512
// 16.2 -> 14.6; b4 h64, b2 s_q2 h64, b2 h64 +1024, h128 +1024 (two-block splits, or more than a
// wave) keep 64-row tiles. A cap of 80 CTAs instead of a wave left b3 h64 (120 CTAs) at 16.7.
// SMLA_SD_NARROW_MODEL1=n (measurement knob, read once per process) sets the cap (0: off).
int narrow_floor(int b, int s_q, int h_q, int format, int64_t keys) {
  if (h_q <= 32 || keys <= 0) return 0;
  const int64_t blocks = meta::split_key_blocks(keys, kMaxKeys, kBlockN), total = static_cast<int64_t>(b) * (blocks + 1);
  auto per_unit = [&](int64_t rows) {  // the schedule's blocks a split on tiles of `rows`
    return meta::split_per_unit(total, sparse_decode_units(b, (h_q + rows - 1) / rows * s_q));
  };
  if (format == static_cast<int>(CacheFormat::fp8_ds_mla)) {
    if (per_unit(64) == 1) return 2;
    // Also where 64-row splits would be of two blocks, if the 16-row launch (its uniform
    // schedule, chunks as launch_attention makes them) is one wave. On an H200 (sixty-eighth
    // pass, SMLA_SD_ROWS=16 against 64 rows): b3 h128 24.4 -> 21.6 µs, b4 h128 25.7 -> 22.9, b2
    // s_q2 h128 25.7 -> 22.8, b8 h64 26.1 -> 23.2; beyond one wave far slower (b6 h128 29.5 ->
    // 45.1, b6 h64 24.7 -> 27.5). On an H100 (sixty-ninth pass, 33 shapes at topk 256-2048, b
    // 1-32, h 48-128, s_q 1-4) 12-37% faster on every shape it moves.
    // Measurement knob: SMLA_SD_NARROW_TWO=0 keeps 64-row tiles there. Read once per process.
    static const bool two = [] {
      const char* v = std::getenv("SMLA_SD_NARROW_TWO");
      return !v || std::atoi(v) != 0;
    }();
    if (!two || per_unit(64) != 2) return 0;
    const int64_t cps = (h_q + 15) / 16 * static_cast<int64_t>(s_q), units = sparse_decode_units(b, cps);
    const int64_t slots = current_device_info().sm_count;
    const int64_t p16 = uniform_per_unit(b, blocks, units, 2, true, max_total_splits(b, static_cast<int>(units)), cps, slots);
    return static_cast<int64_t>(b) * meta::split_count(blocks, p16) * cps <= slots ? 2 : 0;
  }
  static const int64_t model1_cap = [] {
    const char* v = std::getenv("SMLA_SD_NARROW_MODEL1");
    return v ? std::atoll(v) : static_cast<int64_t>(current_device_info().sm_count);
  }();
  if (format == static_cast<int>(CacheFormat::fp8_model1) && model1_cap > 0 && per_unit(16) == 1 &&
      (h_q + 15) / 16 * s_q * static_cast<int64_t>(b) * blocks <= model1_cap)
    return 1;
  return 0;
}
}  // namespace

AttentionPlan plan_sparse_decode(int b, int s_q, int h_q, int format, int64_t keys) {
  AttentionPlan pl;
  s_q = std::max(s_q, 1);
  h_q = std::max(h_q, 1);
  pl.family = AttentionPlan::Family::sparse_decode;
  pl.format = format;
  pl.rows = sparse_decode_family::tile_rows(h_q);
  // Measurement knob: SMLA_SD_ROWS=16 or 32 runs more heads on narrower tiles, 64 keeps 64-row
  // tiles above 32 heads (narrow_floor off). Read once per process.
  static const int rows_env = env_int("SMLA_SD_ROWS");
  if (rows_env == 16 || rows_env == 32) {
    pl.rows = std::min(pl.rows, rows_env);
  } else if (const int narrow = rows_env == 64 ? 0 : narrow_floor(b, s_q, h_q, format, keys); narrow > 0) {
    pl.rows = 16;
    // fp8_ds_mla b1 h64: one-block splits on 128 CTAs 18.0 µs, two-block ones on 64 15.0
    pl.min_split_blocks = narrow;
  }
  pl.tokens_per_cta = 1;
  pl.token_groups = s_q;
  pl.tiles_per_kv = (h_q + pl.rows - 1) / pl.rows;
  pl.heads_tile = (h_q + pl.tiles_per_kv - 1) / pl.tiles_per_kv;  // balanced tiles (h_q 96: 2 x 48)
  pl.split = b > 0;
  if (pl.split) {
    pl.num_units = static_cast<int>(sparse_decode_units(b, static_cast<int64_t>(pl.tiles_per_kv) * pl.token_groups));
    // Measurement knob (bench/sparse_decode_variants.sh): SMLA_SPLIT_UNITS=n schedules splits
    // for n work units instead (fewer units, fewer and longer splits). Read once per process.
    static const int units_env = env_int("SMLA_SPLIT_UNITS");
    if (units_env > 0) pl.num_units = units_env;
    pl.max_splits = max_total_splits(b, pl.num_units);
  }
  return pl;
}

int staged_row_bytes(const KeySetParams& ks) { return (key_row_bytes(ks) + 15) / 16 * 16; }

size_t attention_workspace_bytes(const AttentionPlan& plan, int b, int s_q, int h_q) {
  if (!plan.split) return 0;
  const size_t rows = static_cast<size_t>(plan.max_splits) * s_q * h_q;
  return align_up((b + 1) * sizeof(int32_t)) + align_up(rows * sizeof(float)) + rows * kDv * sizeof(float);
}

void launch_attention(AttnParams p, const AttentionPlan& plan, const Workspace& ws, cudaStream_t stream) {
  if (p.b == 0 || p.s_q == 0 || p.h_q == 0) return;
  p.tokens_per_cta = plan.tokens_per_cta;
  p.heads_tile = plan.heads_tile;
  p.tiles_per_kv = plan.tiles_per_kv;
  p.raw_stride = plan.raw_stride;
  dim3 grid(p.b, p.h_kv * plan.tiles_per_kv, plan.token_groups);
  if (plan.split) {
    detail::check_workspace(ws, attention_workspace_bytes(plan, p.b, p.s_q, p.h_q), "*_workspace_size");
    auto* base = static_cast<uint8_t*>(ws.data);
    const size_t rows = static_cast<size_t>(plan.max_splits) * p.s_q * p.h_q;
    p.split_offsets = reinterpret_cast<int32_t*>(base);
    p.part_lse = reinterpret_cast<float*>(base + align_up((p.b + 1) * sizeof(int32_t)));
    p.part_o = reinterpret_cast<float*>(base + align_up((p.b + 1) * sizeof(int32_t)) + align_up(rows * sizeof(float)));
  }
  int combine_warps_per_head = 1;
  if (plan.split) {
    const int64_t sms = current_device_info().sm_count;
    // Few heads in all: one warp a head would give the combine fewer than four CTAs (four heads
    // each) an SM; four warps a head measured faster there at any split count (sixty-eighth pass,
    // an H100: b32 h16, 4 splits, 35.1 -> 33.5 µs; b2 h128 at 7 splits 20.3 -> 19.2; b16 h128,
    // 2048 heads, level).
    const bool few_heads = static_cast<int64_t>(p.b) * p.s_q * p.h_q < 16 * sms;
    if (uniform_keys(p)) {
      // Every request has the same key count: the schedule follows from shapes (no schedule
      // kernel); one split each means no partials and no combine.
      const int64_t blocks = meta::split_key_blocks(uniform_key_count(p), kMaxKeys, kBlockN);
      const bool ds16 = plan.family == AttentionPlan::Family::sparse_decode && plan.rows == 16 &&
                        plan.format == static_cast<int>(CacheFormat::fp8_ds_mla);
      const int64_t n = meta::split_count(blocks, uniform_per_unit(p.b, blocks, plan.num_units, plan.min_split_blocks, ds16,
                                                                   plan.max_splits, static_cast<int64_t>(grid.y) * grid.z, sms));
      p.split_offsets = nullptr;
      if (n > 1) {
        p.uniform_splits = static_cast<int>(n);
        grid.x = static_cast<unsigned>(static_cast<int64_t>(p.b) * n);  // <= b + num_units (split_schedule.cpp)
        combine_warps_per_head = n >= 8 || few_heads ? kCombineWarps : 1;
      }
    } else {
      // Dense decode on the family's kernels: 4 key blocks a split at least. Small batches would
      // otherwise cut each request into num_units splits of 1-2 blocks, whose fp32 partials (2 KB
      // a head) cost more than the keys they spread (bf16 b1 h128 L8192: 64 splits 37.0 µs, 32
      // splits 28.7, 15 splits 35.5; the sparse kernels' one-block splits measured best).
      const int min_blocks = std::max(plan.family == AttentionPlan::Family::sparse_decode && p.dense ? 4 : 1, plan.min_split_blocks);
      // Up to 32 requests the kernels make it themselves, a warp each (split_lookup.cuh
      // inline_splits), and write it for the combine, but for persistent CTAs (sparse_decode
      // instantiate.cuh launch_tiles); beyond, the schedule kernel makes it.
      p.split_units = plan.num_units;
      p.split_min_blocks = min_blocks;
      p.split_inline = inline_schedule(p.b);
      if (!p.split_inline) launch_split_plan(p, stream);
      grid.x = static_cast<unsigned>(plan.max_splits);
      // The device makes this schedule, but its splits sum to at most max_splits = b + num_units:
      // requests that average 8 splits or more (small batches) merge each head with several warps,
      // as uniform ones do at n >= 8 (dense b1 h128, 64 splits: one warp per head took 44 µs).
      combine_warps_per_head = plan.max_splits >= 8 * static_cast<int64_t>(p.b) || few_heads ? kCombineWarps : 1;
    }
  }
  // Measurement knob: SMLA_COMBINE_WARPS=1 or 4 forces the warps per head. Read once per process.
  static const int combine_env = env_int("SMLA_COMBINE_WARPS");
  if (combine_env == 1 || combine_env == kCombineWarps) combine_warps_per_head = combine_env;
  // Timing-only measurement knob (wrong results): SMLA_MEASURE_SKIP=1 launches no attention
  // kernel, 2 no combine, 3 neither, so that a small call's time splits into its launches.
  // Read once per process.
  static const int skip_env = env_int("SMLA_MEASURE_SKIP");
  if (!(skip_env & 1)) {
    if (plan.family == AttentionPlan::Family::sparse_decode) sparse_decode_family::launch(p, plan.rows, grid, stream);
    else dispatch(plan, p, grid, stream);
  }
  if ((p.split_offsets != nullptr || p.uniform_splits > 0) && !(skip_env & 2)) {
    const unsigned heads_z = static_cast<unsigned>((p.h_q * combine_warps_per_head + kCombineWarps - 1) / kCombineWarps);
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(p.b, p.s_q, heads_z);
    cfg.blockDim = dim3(kCombineWarps * 32);
    cfg.stream = stream;
    cudaLaunchAttribute pdl = pdl_attribute();  // its launch hides behind the attention kernel's tail
    cfg.attrs = &pdl;
    cfg.numAttrs = 1;
    if (combine_warps_per_head == 1) {
      SMLA_CUDA_CHECK(cudaLaunchKernelEx(&cfg, combine_splits_kernel<1>, p));
    } else if (combine_prefetch(cfg.gridDim)) {
      SMLA_CUDA_CHECK(cudaLaunchKernelEx(&cfg, combine_splits_kernel<kCombineWarps, kCombinePre>, p));
    } else {
      SMLA_CUDA_CHECK(cudaLaunchKernelEx(&cfg, combine_splits_kernel<kCombineWarps>, p));
    }
  }
}

namespace {

sparse_decode_family::TailSplit prefill_tail(const AttnParams& p, const AttentionPlan& plan) {
  AttnParams q = p;
  q.heads_tile = plan.heads_tile;
  return sparse_decode_family::prefill_tail_split(
      q, plan.rows, dim3(p.b, p.h_kv * plan.tiles_per_kv, plan.token_groups));
}

// Partial rows of a tail split: one per part, token and head of the tail's one head tile.
size_t tail_rows(const sparse_decode_family::TailSplit& t, const AttnParams& p, const AttentionPlan& plan) {
  return static_cast<size_t>(t.units) * t.parts * p.s_q * plan.heads_tile;
}

// Its workspace: part_lse, part_max, part_o (0: no split).
size_t tail_bytes(const sparse_decode_family::TailSplit& t, const AttnParams& p, const AttentionPlan& plan) {
  if (t.parts < 2) return 0;
  const size_t rows = tail_rows(t, p, plan);
  return 2 * align_up(rows * sizeof(float)) + rows * kDv * sizeof(float);
}

}  // namespace

size_t prefill_tail_workspace_bytes(const AttnParams& p, const AttentionPlan& plan) {
  return tail_bytes(prefill_tail(p, plan), p, plan);
}

void launch_prefill(AttnParams p, const AttentionPlan& plan, const Workspace& ws, cudaStream_t stream) {
  const sparse_decode_family::TailSplit t = prefill_tail(p, plan);
  const size_t need = tail_bytes(t, p, plan);
  // A workspace too small (or none: callers that skip the size query) keeps the kernel unsplit.
  const bool split = need > 0 && ws.data != nullptr && ws.bytes >= need && reinterpret_cast<uintptr_t>(ws.data) % 16 == 0;
  if (split) {
    const size_t rows = tail_rows(t, p, plan);
    auto* base = static_cast<uint8_t*>(ws.data);
    p.part_lse = reinterpret_cast<float*>(base);
    p.part_max = reinterpret_cast<float*>(base + align_up(rows * sizeof(float)));
    p.part_o = reinterpret_cast<float*>(base + 2 * align_up(rows * sizeof(float)));
    p.tail_parts = t.parts;
    p.heads_tile = plan.heads_tile;  // (launch_attention sets it too; the combine below reads it)
    p.comb_h0 = t.head0;
  }
  launch_attention(p, plan, ws, stream);
  if (!split) return;
#if SMLA_SD_TAIL_SPLIT == 1
  // The tail's units are tokens first_token .. of one head tile, each split `parts` ways: merged
  // as a batch of those tokens (out, lse and max_logits from the first), heads from head0.
  AttnParams c = p;
  c.b = t.units;
  c.uniform_splits = t.parts;
  c.out = static_cast<uint16_t*>(p.out) + static_cast<int64_t>(t.first_token) * p.o_sb;
  c.lse = p.lse + static_cast<int64_t>(t.first_token) * p.l_sb;
  if (p.max_logits != nullptr) c.max_logits = p.max_logits + static_cast<int64_t>(t.first_token) * p.m_sb;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(t.units), static_cast<unsigned>(p.s_q),
                     static_cast<unsigned>((plan.heads_tile + kCombineWarps - 1) / kCombineWarps));
  cfg.blockDim = dim3(kCombineWarps * 32);
  cfg.stream = stream;
  cudaLaunchAttribute pdl = pdl_attribute();
  cfg.attrs = &pdl;
  cfg.numAttrs = 1;
  SMLA_CUDA_CHECK(cudaLaunchKernelEx(&cfg, combine_splits_kernel<1, 0, true>, c));
#endif
}

}  // namespace smla::cuda
