#include "cli/workloads.h"

#include <algorithm>
#include <cstring>

#include "smla/numeric.h"

namespace smla::cli {

Device device_of(Backend b) { return b == Backend::cpu ? kCPU : cuda_device(0); }

void Workload::make_outputs(DType out_dtype, const std::vector<int64_t>& prefix, bool max_logits) {
  std::vector<int64_t> out_shape = prefix;
  out_shape.push_back(kDv);
  for (Outputs& o : outs_) {
    o.out = Array::make(out_dtype, out_shape);
    o.lse = Array::make(DType::f32, prefix);
    if (max_logits) o.max_logits = Array::make(DType::f32, prefix);
  }
}

void Workload::upload() {
  for (Array* a : inputs_) a->upload();
  Outputs& o = outs_[1];
  o.out.allocate_device();
  o.lse.allocate_device();
  o.max_logits.allocate_device();
}

void Workload::poison(Backend b) {
  Outputs& o = outs_[b == Backend::cpu ? 0 : 1];
  for (Array* a : {&o.out, &o.lse, &o.max_logits}) {
    if (!a->present()) continue;
    (b == Backend::cpu ? a->host : a->dev).fill(0xff);
  }
}

void Workload::fetch(Backend b) {
  if (b == Backend::cpu) return;
  Outputs& o = outs_[1];
  o.out.download();
  o.lse.download();
  o.max_logits.download();
}

RowData Workload::output_row(Backend b, int64_t row) const {
  const Outputs& o = outputs(b);
  RowData r;
  r.out.resize(kDv);
  const int64_t at = row * kDv;
  for (int k = 0; k < kDv; ++k) {
    switch (o.out.dtype) {
      case DType::bf16: r.out[k] = bf16_bits_to_float(o.out.h<uint16_t>()[at + k]); break;
      case DType::f16: r.out[k] = fp16_bits_to_float(o.out.h<uint16_t>()[at + k]); break;
      default: r.out[k] = o.out.h<float>()[at + k]; break;
    }
  }
  r.lse = o.lse.h<float>()[row];
  if (o.max_logits.present()) {
    r.max_logit = o.max_logits.h<float>()[row];
    r.has_max_logit = true;
  }
  return r;
}

void write_random_rows(const PagedCache& cache, const std::vector<int64_t>& slots, uint64_t seed) {
  const int64_t d_latent = cache.d_qk() - kDRope;
  // Bounded staging: a GPU-sized cache is written a chunk of tokens at a time.
  const int64_t chunk = 16384;
  Array kv_c = Array::make(DType::bf16, {chunk, d_latent});
  Array k_pe = Array::make(DType::bf16, {chunk, kDRope});
  Array slot_mapping = Array::make(DType::i64, {chunk});
  const int64_t total = static_cast<int64_t>(slots.size());
  for (int64_t c0 = 0, k = 0; c0 < total; c0 += chunk, ++k) {
    const int64_t n = std::min(chunk, total - c0);
    fill_bf16(kv_c.h<uint16_t>(), n * d_latent, stream_seed(seed, 2 * k));
    fill_bf16(k_pe.h<uint16_t>(), n * kDRope, stream_seed(seed, 2 * k + 1));
    std::memcpy(slot_mapping.h<int64_t>(), slots.data() + c0, static_cast<size_t>(n) * sizeof(int64_t));
    WriteCacheArgs w;
    w.kv_c = kv_c.view(kCPU, n);
    w.k_pe = k_pe.view(kCPU, n);
    w.slot_mapping = slot_mapping.view(kCPU, n);
    w.cache = cache;
    write_cache(w);
  }
}

std::vector<int64_t> touched_slots(const int32_t* idx, int64_t n, int64_t num_slots) {
  std::vector<char> seen(static_cast<size_t>(std::max<int64_t>(num_slots, 0)), 0);
  for (int64_t j = 0; j < n; ++j)
    if (idx[j] >= 0 && idx[j] < num_slots) seen[static_cast<size_t>(idx[j])] = 1;
  std::vector<int64_t> out;
  for (int64_t s = 0; s < num_slots; ++s)
    if (seen[static_cast<size_t>(s)]) out.push_back(s);
  return out;
}

int64_t invalid_per_list(int64_t topk) { return std::clamp<int64_t>(topk / 256, 1, 8); }

void mix_invalid(int32_t* idx, int64_t lists, int64_t topk, int64_t count, Rng& rng) {
  count = std::min(count, topk);
  std::vector<int32_t> perm(static_cast<size_t>(topk));
  for (int64_t j = 0; j < topk; ++j) perm[static_cast<size_t>(j)] = static_cast<int32_t>(j);
  std::vector<int32_t> pos(static_cast<size_t>(count));
  for (int64_t l = 0; l < lists; ++l) {
    sample_distinct(rng, perm, count, pos.data());
    for (int32_t p : pos) idx[l * topk + p] = -1;
  }
}

std::vector<double> bf16_row(const Array& a, int64_t row, int64_t width) {
  std::vector<double> v(static_cast<size_t>(width));
  // `row` numbers the rows of the leading dimensions in order; their strides place it.
  int64_t at = 0;
  for (size_t k = a.shape.size() - 1; k-- > 0;) {
    at += (row % a.shape[k]) * a.stride[k];
    row /= a.shape[k];
  }
  const uint16_t* p = a.h<uint16_t>() + at;
  for (int64_t k = 0; k < width; ++k) v[static_cast<size_t>(k)] = bf16_bits_to_float(p[k]);
  return v;
}

}  // namespace smla::cli
