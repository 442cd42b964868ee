#include "cuda/sparse_decode/launch.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "cuda/common/device_info.h"
#include "cuda/sparse_decode/config.h"
#include "metadata/index_math.h"
#include "smla/error.h"
#include "smla/formats.h"

namespace smla::cuda::sparse_decode_family {

template <int kRows, int kD, int kFmt, bool kLogits>
void launch_instance(const AttnParams& p, dim3 grid, bool pair, cudaStream_t stream);
void launch_ds32_roles(const AttnParams& p, dim3 grid, cudaStream_t stream);

namespace {

// Whether environment variable `var` is set to `value` (the A/B switches below; callers read it
// once per process).
bool env_is(const char* var, const char* value) {
  const char* v = std::getenv(var);
  return v != nullptr && std::strcmp(v, value) == 0;
}

// Rows the TMA unit or 16-byte cp.async can read: a 16-byte aligned base and stride.
bool aligned16(const void* base, int64_t stride) { return reinterpret_cast<uintptr_t>(base) % 16 == 0 && stride % 16 == 0; }

constexpr int kDs = static_cast<int>(CacheFormat::fp8_ds_mla);
constexpr int kM1 = static_cast<int>(CacheFormat::fp8_model1);
constexpr int kBf = static_cast<int>(CacheFormat::bf16);
constexpr int kE4 = static_cast<int>(CacheFormat::fp8_e4m3);

// kLogits: the kernels that also keep max_logits (sparse prefill from a packed cache).
template <int kD, int kFmt, bool kLogits = false>
void by_rows(const AttnParams& p, int rows, dim3 grid, cudaStream_t stream) {
  switch (rows) {
    case 16: launch_instance<16, kD, kFmt, kLogits>(p, grid, false, stream); break;
    case 32: launch_instance<32, kD, kFmt, kLogits>(p, grid, false, stream); break;
    default: {
      // Head tiles in pairs share the gathers of their token's keys: packed formats (bf16 rows
      // only in the measurement build kBf16Pairs), one KV head, an even tile count.
      const bool pairs_kernel = !bf16_rows(kFmt) || (kBf16Pairs && kFmt == kBf);
      const bool pair = pairs_kernel && p.h_kv == 1 && grid.y % kPairCtas == 0 && !unpaired_by_env();
      AttnParams q = p;
      // Pairs are clusters along grid.y, which the dense launch order (work.cuh) would split
      // (bf16 dense decode off the TMA path in the kBf16Pairs build).
      if (pair) q.dense_cta_order = false;
      launch_instance<64, kD, kFmt, kLogits>(q, grid, pair, stream);
    }
  }
}

// Whether a 32-row fp8_ds_mla decode launch takes its consumer warpgroups in roles (config.h
// kRawRoles, the kernel's kDs32Roles: WG0 every block's S^T and softmax, WG1 all of O^T one block
// behind, WG1's value words loaded first) instead of the halves (each warpgroup half of every
// block, meeting twice a block). The roles' consumers alone are ~10% faster, but WG0 carries each
// block's whole path. In the SMLA_SD_DS32_ROLES=1 + SMLA_SD_DS32_ROLES_EARLY_V=1 build, whose
// kernel this one is: b128 h32 85.3 -> 79.5 µs and s_q2 h32 164.3 -> 153.3 on an H200 (36 GB/s of
// memory an SM, the consumers the bound), 94.9 -> 97.9 on an H100 (25 GB/s an SM, the gathers the
// bound), and with splits (b <= 96 at 32 heads) slower on both (docs/PERF.md, forty-ninth and
// fifty-first passes). by_device (the default): an unsplit launch on a device with 30 GB/s an SM or
// more (the H200 table: b128 h32 85.0 -> 78.9 µs, fifty-third pass), or of more CTAs than SMs (one
// CTA an SM: beyond one wave) on any: on an H100 (2026-12-06, fifty-sixth pass, three reps, µs,
// halves -> roles) s_q2 h32 172.3-173.2 -> 165.8-166.1, b256 h32 172.4-172.9 -> 166.0-166.3, s_q2
// h24 170.7-170.9 -> 164.6-165.2, while one wave stayed faster in halves (b128 h32 88.6-89.0 ->
// 91.2-91.4; b64 h32, split, 56.6-56.9 -> 60.0-60.3); since the one-slot first fill (config.h
// kRawFirstFill) the two are within 1% at b128 h32 / h24 on H100s, either one ahead by the card.
bool ds32_decode_roles(const AttnParams& p, int rows, dim3 grid) {
  if (rows != 32 || p.main.format != kDs || p.max_logits != nullptr) return false;
  switch (ds32_by_env()) {
    case Ds32Choice::roles: return true;
    case Ds32Choice::halves: return false;
    case Ds32Choice::by_device: break;
  }
  const bool unsplit = p.split_offsets == nullptr && p.uniform_splits <= 1;
  const DeviceInfo& d = current_device_info();
  const int64_t ctas = static_cast<int64_t>(grid.x) * grid.y * grid.z;
  return unsplit && (d.mem_gbps_per_sm >= 30.0 || ctas > d.sm_count);
}

}  // namespace

int tile_rows(int h_q) { return h_q <= 16 ? 16 : (h_q <= 32 ? 32 : 64); }

bool takes(int format, int extra_format, bool has_extra, int d_qk) {
  if (has_extra && extra_format != format) return false;
  return (format == kDs && d_qk == 576) || (format == kM1 && d_qk == 512) || (format == kBf && (d_qk == 576 || d_qk == 512));
}

bool takes_dense(int q_kind, bool out_f16, int format, int h_kv, int row_elems, int d_qk, int64_t num_blocks,
                 int page_size, int h_q, const void* base, int64_t page_stride) {
  if (out_f16 || h_kv != 1 || row_elems != d_qk || num_blocks * page_size > 0x7fffffff) return false;
  if (format == kE4) {
    if (d_qk != 576 || !aligned16(base, page_stride)) return false;
    // 16/32-row raw-ring tiles take bf16 q; kE4m3Wide: 64-row tiles above 32 heads, bf16 or fp8 q
    return h_q <= 32 ? q_kind == 0 : kE4m3Wide && (q_kind == 0 || q_kind == 2);
  }
  return q_kind == 0 && format == kBf && (d_qk == 576 || d_qk == 512);
}

bool takes_prefill(const uint8_t* kv, int64_t row_stride_bytes, int d_qk) {
  return (d_qk == 576 || d_qk == 512) && aligned16(kv, row_stride_bytes);
}

// Dense decode on the TMA producer: pages a box never crosses (16, 32 or a multiple of 64
// tokens) and addresses the TMA unit takes (16-byte aligned base and page stride), unless
// SMLA_DENSE_DECODE_KERNEL=gather asks for the cp.async producer. Fills p.kv_map: boxes of 64
// bf16 columns in the 128-byte swizzle, or (e4m3, the FP8 tiles) 64 one-byte columns in the
// 64-byte swizzle.
// The driver's cuTensorMapEncodeTiled (through the runtime, so no link to libcuda), or null.
using Encode = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*, const cuuint64_t*,
                            const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                            CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
Encode tensor_map_encoder() {
  static const Encode encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      fn = nullptr;
    return reinterpret_cast<Encode>(fn);
  }();
  return encode;
}

bool dense_tma_map(AttnParams& p, bool e4m3 = false) {
  static const bool gather = env_is("SMLA_DENSE_DECODE_KERNEL", "gather");
  const int ps = p.main.page_size;
  if (!p.dense || gather || !(ps == 16 || ps == 32 || ps % 64 == 0) || !aligned16(p.main.base, p.main.page_stride))
    return false;
  const Encode encode = tensor_map_encoder();
  if (encode == nullptr) return false;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(p.d_qk), static_cast<cuuint64_t>(ps),
                              static_cast<cuuint64_t>(p.main.num_blocks)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(p.d_qk) * (e4m3 ? 1 : 2), static_cast<cuuint64_t>(p.main.page_stride)};
  const cuuint32_t box[3] = {64, static_cast<cuuint32_t>(ps < 64 ? ps : 64), 1};
  const cuuint32_t unit[3] = {1, 1, 1};
  return encode(&p.kv_map, e4m3 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3,
                const_cast<uint8_t*>(p.main.base), dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
                e4m3 ? CU_TENSOR_MAP_SWIZZLE_64B : CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// A bf16 tensor of p's (d values, h_q heads, s_q tokens, b requests) shape whose strides are
// sh, st, sb values, for the TMA unit: boxes of 64 values x 64 heads in the 128-byte swizzle;
// heads past h_q read as zeros and are not written. Only where a box holds one head tile (64
// heads a tile, or one tile) and one token, and the TMA unit takes the address and strides
// (16-byte multiples).
static bool head_tile_map(CUtensorMap* map, const void* base, int d, int64_t sh, int64_t st, int64_t sb,
                          const AttnParams& p, CUtensorMapL2promotion promotion) {
  // A dimension of one (sparse prefill's s_q, b = 1) takes the packed stride: its own is never
  // used, and may be anything (prefill leaves q_st 0).
  sh *= 2;
  st = p.s_q == 1 ? sh * p.h_q : st * 2;
  sb = p.b == 1 ? st * p.s_q : sb * 2;
  if (base == nullptr || p.tokens_per_cta != 1 || (p.heads_tile != 64 && p.h_q > p.heads_tile)) return false;
  if (reinterpret_cast<uintptr_t>(base) % 16 != 0 || sh <= 0 || st <= 0 || sb <= 0 || sh % 16 || st % 16 || sb % 16)
    return false;
  const Encode encode = tensor_map_encoder();
  if (encode == nullptr) return false;
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(d), static_cast<cuuint64_t>(p.h_q), static_cast<cuuint64_t>(p.s_q),
                              static_cast<cuuint64_t>(p.b)};
  const cuuint64_t strides[3] = {static_cast<cuuint64_t>(sh), static_cast<cuuint64_t>(st), static_cast<cuuint64_t>(sb)};
  const cuuint32_t box[4] = {64, 64, 1, 1};
  const cuuint32_t unit[4] = {1, 1, 1, 1};
  return encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, const_cast<void*>(base), dims, strides, box, unit,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, promotion,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// config.h SMLA_SD_Q_TMA: q (bf16 only) for the 64-row CTAs' Q load by the TMA unit
// (kernel.cuh load_q_tma; built by launch_kernel for the instances that read it, kLoadsQByTma:
// one-unit CTAs; with 2, the default, also persistent ones but the fp8_ds_mla pairs'; with 3
// paged prefill's); else the kernel's cp.async writes the same layout.
bool q_tma_map(AttnParams& p) {
  return p.q_kind == 0 && head_tile_map(&p.q_map, p.q, p.d_qk, p.q_sh, p.q_st, p.q_sb, p, CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
}

// config.h kBf16PersistEnds: out (bf16) for the TMA unit's stores of O; where it cannot be built
// the kernel stores O from registers.
bool o_tma_map(AttnParams& p) {
  return head_tile_map(&p.o_map, p.out, kDv, p.o_sh, p.o_st, p.o_sb, p, CU_TENSOR_MAP_L2_PROMOTION_NONE);
}

void launch(const AttnParams& p_in, int rows, dim3 grid, cudaStream_t stream) {
  AttnParams p = p_in;
  const int fmt = p.main.format;
  // Dense decode, two waves or more: split-major launch order (work.cuh, dense_cta_position).
  // Under two waves, grid order (b = 1 h128, 134 CTAs, measured 48.7 -> 65.7 µs with the
  // split-major order, which gains 15-19% at b = 128).
  p.dense_cta_order =
      p.dense && static_cast<int64_t>(grid.x) * grid.y * grid.z >= 2 * static_cast<int64_t>(current_device_info().sm_count);
  if (fmt == kE4) {  // dense decode: 16/32-row tiles, and with kE4m3Wide 64-row ones (takes_dense)
    if constexpr (kE4m3Fp8) {  // fp8 q above 32 heads on FP8 tensor cores (consumer_fp8.cuh)
      if (rows == 64 && p.q_kind == 2 && p.d_qk == 576 && dense_tma_map(p, true)) {
        launch_instance<64, 576, kDenseE4m3Fp8, false>(p, grid, false, stream);
        return;
      }
    }
    if (rows == 16) launch_instance<16, 576, kE4, false>(p, grid, false, stream);
    else if (rows == 32) launch_instance<32, 576, kE4, false>(p, grid, false, stream);
    else if constexpr (kE4m3Wide) {
      // Pairs are clusters along grid.y, which the dense launch order (work.cuh) would split.
      p.dense_cta_order = false;
      by_rows<576, kE4>(p, rows, grid, stream);
    }
    return;
  }
  if (dense_tma_map(p)) {
    if (p.d_qk == 576) by_rows<576, kDenseTma>(p, rows, grid, stream);
    else by_rows<512, kDenseTma>(p, rows, grid, stream);
    return;
  }
  // Sparse prefill from a packed cache also writes max_logits (its own kernels, so that the
  // decode kernels carry none of it).
  const bool logits = p.max_logits != nullptr;
  if (ds32_decode_roles(p, rows, grid)) return launch_ds32_roles(p, grid, stream);
  if (fmt == kDs) logits ? by_rows<576, kDs, true>(p, rows, grid, stream) : by_rows<576, kDs>(p, rows, grid, stream);
  else if (fmt == kM1) logits ? by_rows<512, kM1, true>(p, rows, grid, stream) : by_rows<512, kM1>(p, rows, grid, stream);
  else if (p.d_qk == 576) by_rows<576, kBf>(p, rows, grid, stream);
  else by_rows<512, kBf>(p, rows, grid, stream);
}


bool disabled_by_env() {
  static const bool off = env_is("SMLA_SPARSE_DECODE_KERNEL", "generic");
  return off;
}

bool dense_disabled_by_env() {
  static const bool off = env_is("SMLA_DENSE_DECODE_KERNEL", "generic");
  return off;
}

bool prefill_disabled_by_env() {
  static const bool off = env_is("SMLA_SPARSE_PREFILL_KERNEL", "generic");
  return off;
}

bool unpaired_by_env() {
  static const bool off = env_is("SMLA_SPARSE_DECODE_KERNEL", "unpaired");
  return off;
}

PersistentChoice persistent_by_env() {
  static const PersistentChoice choice =
      env_is("SMLA_SPARSE_DECODE_KERNEL", "persistent") ? PersistentChoice::always
      : env_is("SMLA_SPARSE_DECODE_KERNEL", "one_unit") ? PersistentChoice::never
                                                        : PersistentChoice::beyond_one_wave;
  return choice;
}

Ds32Choice ds32_by_env() {
  static const Ds32Choice choice = env_is("SMLA_SD_DS32_DECODE", "roles")    ? Ds32Choice::roles
                                   : env_is("SMLA_SD_DS32_DECODE", "halves") ? Ds32Choice::halves
                                                                             : Ds32Choice::by_device;
  return choice;
}

TailSplit prefill_tail_split(const AttnParams& p, int rows, dim3 grid) {
  TailSplit t;
  if (!kTailMerge || rows != 64 || p.dense || p.main.format != static_cast<int>(CacheFormat::bf16) ||
      !has_persistent(rows, p.main.format) || !kPersistEnds<static_cast<int>(CacheFormat::bf16)> || grid.z != 1)
    return t;
  // The launch's choice (instantiate.cuh launch_tiles): persistent beyond one wave of units (one
  // wave or less: no tail, tail_split_parts gives 0).
  const int64_t units = static_cast<int64_t>(grid.x) * grid.y;
  const int64_t slots = current_device_info().sm_count;
  if (persistent_by_env() == PersistentChoice::never) return t;
  const int64_t parts = meta::tail_split_parts(units, slots, grid.x, meta::ceil_div(p.main.topk, kKeys));
  if (parts == 0) return t;
  // The last round's units (the kernel's walk, meta::tail_walk_whole): tokens grid.x - tail .. of
  // tile grid.y - 1.
  const int64_t tail = units - meta::tail_walk_whole(units, slots);
  t.parts = static_cast<int>(parts);
  t.units = static_cast<int>(tail);
  t.first_token = static_cast<int>(grid.x - tail);
  t.head0 = static_cast<int>(grid.y - 1) * p.heads_tile;
  return t;
}

}  // namespace smla::cuda::sparse_decode_family
