#include "cuda/sparse_decode/launch.h"

#include <cstdlib>
#include <cstring>

#include "cuda/sparse_decode/config.h"
#include "smla/error.h"
#include "smla/formats.h"

namespace smla::cuda::sparse_decode_family {

template <int kRows, int kD, int kFmt>
void launch_instance(const AttnParams& p, dim3 grid, bool pair, cudaStream_t stream);

namespace {

constexpr int kDs = static_cast<int>(CacheFormat::fp8_ds_mla);
constexpr int kM1 = static_cast<int>(CacheFormat::fp8_model1);
constexpr int kBf = static_cast<int>(CacheFormat::bf16);

template <int kD, int kFmt>
void by_rows(const AttnParams& p, int rows, dim3 grid, cudaStream_t stream) {
  switch (rows) {
    case 16: launch_instance<16, kD, kFmt>(p, grid, false, stream); break;
    case 32: launch_instance<32, kD, kFmt>(p, grid, false, stream); break;
    default: {
      // Head tiles in pairs share the gathers of their token's keys: packed formats (bf16 rows
      // go by cp.async, with nothing to share but the bytes), one KV head, an even tile count.
      const bool pair = kFmt != kBf && p.h_kv == 1 && grid.y % kPairCtas == 0 && !unpaired_by_env();
      launch_instance<64, kD, kFmt>(p, grid, pair, stream);
    }
  }
}

}  // namespace

int tile_rows(int h_q) { return h_q <= 16 ? 16 : (h_q <= 32 ? 32 : 64); }

bool takes(int format, int extra_format, bool has_extra, int d_qk) {
  if (has_extra && extra_format != format) return false;
  return (format == kDs && d_qk == 576) || (format == kM1 && d_qk == 512) || (format == kBf && (d_qk == 576 || d_qk == 512));
}

bool takes_dense(int q_kind, bool out_f16, int format, int h_kv, int row_elems, int d_qk, int64_t num_blocks,
                 int page_size) {
  return q_kind == 0 && !out_f16 && format == kBf && h_kv == 1 && row_elems == d_qk && (d_qk == 576 || d_qk == 512) &&
         num_blocks * page_size <= 0x7fffffff;
}

void launch(const AttnParams& p, int rows, dim3 grid, cudaStream_t stream) {
  const int fmt = p.main.format;
  if (fmt == kDs) by_rows<576, kDs>(p, rows, grid, stream);
  else if (fmt == kM1) by_rows<512, kM1>(p, rows, grid, stream);
  else if (p.d_qk == 576) by_rows<576, kBf>(p, rows, grid, stream);
  else by_rows<512, kBf>(p, rows, grid, stream);
}

namespace {
bool kernel_env_is(const char* value) {
  const char* v = std::getenv("SMLA_SPARSE_DECODE_KERNEL");
  return v != nullptr && std::strcmp(v, value) == 0;
}
}  // namespace

bool disabled_by_env() {
  static const bool off = kernel_env_is("generic");
  return off;
}

bool dense_disabled_by_env() {
  static const bool off = [] {
    const char* v = std::getenv("SMLA_DENSE_DECODE_KERNEL");
    return v != nullptr && std::strcmp(v, "generic") == 0;
  }();
  return off;
}

bool unpaired_by_env() {
  static const bool off = kernel_env_is("unpaired");
  return off;
}

PersistentChoice persistent_by_env() {
  static const PersistentChoice choice = kernel_env_is("persistent") ? PersistentChoice::always
                                         : kernel_env_is("one_unit") ? PersistentChoice::never
                                                                     : PersistentChoice::beyond_one_wave;
  return choice;
}

}  // namespace smla::cuda::sparse_decode_family
