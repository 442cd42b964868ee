// Tool check: does compute-sanitizer racecheck model a named barrier (bar.sync id, 256) shared by
// two warpgroups of a 384-thread CTA whose third warpgroup exits early, as the raw-ring tiles'
// epilogue merge uses it (docs/PERF.md, eleventh pass, 8)? Five kernels, each a write / barrier /
// read exchange that is race-free by PTX semantics. On the H200 (2026-12-01): A-D and E's
// k_own<1> report 0 hazards; k_own<2>, where warpgroup 0 passes its own barrier twice and
// warpgroup 1 once before the shared one (as an odd block count gives the raw-ring tiles),
// reports 1024 hazards: the tool mis-models that pattern, which is the raw-ring merge's.
// F-H (2026-12-04): D's hand-off repeated (four rounds, a full barrier between them), as the
// bf16-row consumers hand P and its rescale factors over block after block: F (bar.sync) and G
// (barrier.sync, the unaligned form named_bar_sync uses) write / arrive / sync / read; H reads /
// arrives, the other warpgroup syncs / writes (a write after read). On the H200 (2026-12-04) each
// reports 3 hazards, one per round after the first: the tool mis-models a repeated arrive / sync
// hand-off, race-free by PTX's rules (docs/PERF.md, thirty-eighth pass, item 2).
// Build and run on the GPU machine:
//   nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -lineinfo bench/micro/racecheck_named_barriers.cu \
//     -o racecheck_named_barriers && compute-sanitizer --tool racecheck ./racecheck_named_barriers
#include <cstdio>
__device__ __forceinline__ void bsync(int id, int n) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory"); }
__device__ __forceinline__ void barrive(int id, int n) { asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(n) : "memory"); }
// A: both warpgroups bar.sync 3, 256; warpgroup 2 exits at entry.
__global__ void k_a(float* out) {
  __shared__ float s[256];
  if (threadIdx.x >= 256) return;
  s[threadIdx.x] = threadIdx.x;
  bsync(3, 256);
  out[blockIdx.x * 256 + threadIdx.x] = s[(threadIdx.x + 128) % 256];
}
// B (kOwn0 = 1) and E (kOwn0 = 2): as A, after a per-warpgroup exchange on predicated immediate
// barriers 4 / 12, which warpgroup 0 passes kOwn0 times and warpgroup 1 once (the raw-ring
// tiles' consumer warpgroups take alternate blocks, so an odd block count gives them different
// numbers of their own barriers before the merge).
template <int kOwn0>
__global__ void k_own(float* out) {
  __shared__ float s[256], t[256];
  if (threadIdx.x >= 256) return;
  const int wg = threadIdx.x >> 7;
  t[threadIdx.x] = threadIdx.x;
  for (int i = 0; i < (wg ? 1 : kOwn0); ++i) {
    if (wg) asm volatile("bar.sync 12, 128;" ::: "memory");
    else asm volatile("bar.sync 4, 128;" ::: "memory");
  }
  float x = t[(threadIdx.x & 128) | ((threadIdx.x + 1) & 127)];
  s[threadIdx.x] = x;
  bsync(3, 256);
  out[blockIdx.x * 256 + threadIdx.x] = s[(threadIdx.x + 128) % 256];
}
// C: as A with warpgroup 2 alive (it skips the exchange and waits at nothing).
__global__ void k_c(float* out) {
  __shared__ float s[256];
  if (threadIdx.x < 256) {
    s[threadIdx.x] = threadIdx.x;
    bsync(3, 256);
    out[blockIdx.x * 256 + threadIdx.x] = s[(threadIdx.x + 128) % 256];
  }
}
// D: warpgroup 0 writes and bar.arrive 1, 256; warpgroup 1 bar.sync 1, 256 and reads.
__global__ void k_d(float* out) {
  __shared__ float s[128];
  if (threadIdx.x >= 256) return;
  if (threadIdx.x < 128) {
    s[threadIdx.x] = threadIdx.x;
    barrive(1, 256);
  } else {
    bsync(1, 256);
    out[blockIdx.x * 256 + threadIdx.x] = s[(threadIdx.x + 1) & 127];
  }
}
// F, G (kMode 0 / 1): warpgroup 1 writes and arrives, warpgroup 0 syncs and reads, four rounds.
// H (kMode 2): warpgroup 0 reads and arrives, warpgroup 1 syncs and then writes.
template <int kMode>
__global__ void k_rounds(float* out) {
  __shared__ float s[128];
  const int t = threadIdx.x;
  if (t >= 256) return;
  if (t < 128) s[t] = 1.f;
  asm volatile("bar.sync 2, 256;" ::: "memory");
  for (int it = 0; it < 4; ++it) {
    if (kMode == 2) {
      if (t < 128) {
        out[blockIdx.x * 256 + t] += s[t];
        barrive(1, 256);
      } else {
        bsync(1, 256);
        s[t - 128] = it;
      }
    } else if (t < 128) {
      if (kMode == 0) bsync(1, 256);
      else asm volatile("barrier.sync 1, 256;" ::: "memory");
      out[blockIdx.x * 256 + t] += s[t];
    } else {
      s[t - 128] = it;
      barrive(1, 256);
    }
    asm volatile("bar.sync 2, 256;" ::: "memory");  // the round's end, both warpgroups
  }
}
int main() {
  float* out;
  cudaMalloc(&out, 4 * 256 * sizeof(float));
  k_a<<<4, 384>>>(out);
  k_own<1><<<4, 384>>>(out);  // B
  k_c<<<4, 384>>>(out);
  k_d<<<4, 384>>>(out);
  k_own<2><<<4, 384>>>(out);  // E
  k_rounds<0><<<4, 384>>>(out);  // F
  k_rounds<1><<<4, 384>>>(out);  // G
  k_rounds<2><<<4, 384>>>(out);  // H
  printf("done: %s\n", cudaGetErrorString(cudaDeviceSynchronize()));
  return 0;
}
