#include "gpu/gpu_util.h"

#include <climits>

namespace smla::test {

TestCache make_cache(CacheFormat f, int64_t num_blocks, int page_size, int d_qk, int h_kv, float k_scale,
                     int scale_spread) {
  TestCache c;
  const bool packed = is_packed_format(f);
  const DType dt = packed ? DType::u8
                 : f == CacheFormat::bf16 ? DType::bf16
                 : f == CacheFormat::fp16 ? DType::f16 : DType::fp8_e4m3;
  const int64_t es = static_cast<int64_t>(dtype_size(dt));
  const int64_t row = packed ? bytes_per_token(f, d_qk) : d_qk;
  const int64_t page_elems = static_cast<int64_t>(page_size) * h_kv * row;
  const int64_t pad = 64 / es;  // keeps pages 16-byte aligned
  const int64_t stride = page_elems + pad;
  c.bytes.assign(static_cast<size_t>(num_blocks * stride * es + 64), 0xff);
  c.host.format = f;
  c.host.k_scale = k_scale;
  c.host.data = make_strided_view(c.bytes.data(), dt, {num_blocks, page_size, h_kv, row},
                                  {stride, h_kv * row, row, 1});
  if (h_kv == 1) {
    const int64_t T = num_blocks * page_size;
    auto kv_c = random_bf16(static_cast<size_t>(T * (d_qk - 64)));
    auto k_pe = random_bf16(static_cast<size_t>(T * 64));
    if (scale_spread > 0)
      for (int64_t t = 0; t < T; ++t) {
        const int e = uniform_int(0, 63) == 0 ? scale_spread : -static_cast<int>(uniform_int(0, scale_spread / 2));
        for (int64_t i = 0; i < d_qk - 64; ++i) {  // a power of two: exact in bf16
          uint16_t& v = kv_c[static_cast<size_t>(t * (d_qk - 64) + i)];
          v = float_to_bf16_bits(std::ldexp(bf16_bits_to_float(v), e));
        }
      }
    std::vector<int64_t> slots(T);
    for (int64_t i = 0; i < T; ++i) slots[i] = i;
    WriteCacheArgs w;
    w.kv_c = make_view(kv_c.data(), DType::bf16, {T, d_qk - 64});
    w.k_pe = make_view(k_pe.data(), DType::bf16, {T, 64});
    w.slot_mapping = make_view(slots.data(), DType::i64, {T});
    w.cache = c.host;
    write_cache(w);
  } else {
    // Multi-head element caches: random values straight into each head row.
    for (int64_t blk = 0; blk < num_blocks; ++blk)
      for (int64_t i = 0; i < page_elems; ++i) {
        float v = uniform(-1.f, 1.f);
        uint8_t* p = c.bytes.data() + (blk * stride + i) * es;
        if (dt == DType::bf16) { uint16_t b = float_to_bf16_bits(v); std::memcpy(p, &b, 2); }
        else if (dt == DType::f16) { uint16_t b = float_to_fp16_bits(v); std::memcpy(p, &b, 2); }
        else *p = float_to_e4m3(v / k_scale);
      }
  }
  c.dev_bytes = upload(c.bytes);
  c.dev = c.host;
  c.dev.data = on_device(c.host.data, c.dev_bytes);
  return c;
}

std::vector<float> bf16_vec_to_float(const std::vector<uint16_t>& v) { return bf16_to_float(v); }

std::vector<double> to_double(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

std::vector<int32_t> hostile_indices(size_t n, int64_t num_slots, double bad) {
  std::vector<int32_t> v(n);
  const int32_t hostile[] = {-1, INT_MIN, -7, static_cast<int32_t>(num_slots),
                             static_cast<int32_t>(num_slots + 12345), INT_MAX};
  for (size_t i = 0; i < n; ++i) {
    if (uniform(0.f, 1.f) < bad) v[i] = hostile[uniform_int(0, 5)];
    else if (i > 0 && uniform(0.f, 1.f) < 0.05) v[i] = v[uniform_int(0, static_cast<int64_t>(i) - 1)];  // duplicate
    else v[i] = static_cast<int32_t>(uniform_int(0, num_slots - 1));
  }
  return v;
}

bool any_nan_bf16(const std::vector<uint16_t>& v) {
  for (uint16_t x : v)
    if ((x & 0x7fff) > 0x7f80) return true;
  return false;
}

}  // namespace smla::test
