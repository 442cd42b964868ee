// Compile-time shape of the warp-specialized sparse-decode kernel: thread roles, register
// budgets and the shared-memory plan. docs/design/sparse_decode_sm90.md has the cycle budget.
#pragma once

#include <cstddef>
#include <cstdint>

#include "smla/formats.h"

namespace smla::cuda::sparse_decode_family {

// Measurement builds only (-DSMLA_SD_VARIANT=n; 0 is the shipped kernel): 3 no fp8 conversion,
// 4 no gathers (the conversion kept; swizzled bf16 tiles: every copy a zero-fill, the tile still written),
// 7 the consumers only release tiles (producer speed), 8 the producer hands over every tile at
// once, neither loading nor storing (consumer speed), 9 both 4 and 7 (the producer's loop
// without gathers).
#ifndef SMLA_SD_VARIANT
#define SMLA_SD_VARIANT 0
#endif
inline constexpr int kVariant = SMLA_SD_VARIANT;
inline constexpr bool kNoGathers = kVariant == 4 || kVariant == 9;
inline constexpr bool kConsumersIdle = kVariant == 7 || kVariant == 9;
inline constexpr bool kProducerIdle = kVariant == 8;
// Switches that take one piece out of the producer's loop, to combine with variant 9 (each
// wrong results): SMLA_SD_NO_CONVERT=1 stores raw bytes (as variant 3), SMLA_SD_NO_TILE_STORES=1
// converts but stores nothing (swizzled bf16 tiles: no copies issued, the waits and hand-overs kept),
// SMLA_SD_NO_INDEX_LOADS=1 uses the key's position as its slot. SMLA_SD_NO_PEER_STORES=1: a pair's
// producers write their round into their own K tile only (the peer's half of each tile left as it
// was; its valid words still sent), the cost of the st.async rows alone; =2 they send the rows by
// plain remote stores that the peer does not wait for (racy), the cost of that wait alone.
#ifndef SMLA_SD_NO_CONVERT
#define SMLA_SD_NO_CONVERT 0
#endif
#ifndef SMLA_SD_NO_TILE_STORES
#define SMLA_SD_NO_TILE_STORES 0
#endif
#ifndef SMLA_SD_NO_INDEX_LOADS
#define SMLA_SD_NO_INDEX_LOADS 0
#endif
#ifndef SMLA_SD_NO_PEER_STORES
#define SMLA_SD_NO_PEER_STORES 0
#endif
inline constexpr bool kNoConvert = kVariant == 3 || SMLA_SD_NO_CONVERT != 0;
inline constexpr bool kNoTileStores = SMLA_SD_NO_TILE_STORES != 0;
inline constexpr bool kNoIndexLoads = SMLA_SD_NO_INDEX_LOADS != 0;
inline constexpr bool kNoPeerStores = SMLA_SD_NO_PEER_STORES != 0;

inline constexpr int kKeys = 64;              // keys per block (one K tile)
inline constexpr int kStages = 2;             // K tiles in flight between producer and consumers
inline constexpr int kConsumerThreads = 256;  // two consumer warpgroups (64-row CTAs)
// 16/32-row CTAs: one consumer warpgroup on wgmma with the keys in M (S^T = K Q^T,
// consumer_narrow_wgmma.cuh).
constexpr int consumer_threads(int rows) { return rows == 64 ? kConsumerThreads : 128; }
// Producer warpgroups: one in a 64-row CTA (384 threads, so it can hold two 32-key rounds of
// loads in 152 registers), two in a 16/32-row CTA (one round each).
constexpr int producer_threads(int rows) { return rows == 64 ? 128 : 256; }
constexpr int cta_threads(int rows) { return consumer_threads(rows) + producer_threads(rows); }

// Register budgets (setmaxnreg). A CTA's register pool is what it was launched with (65536 /
// threads, rounded down to 8: 168 per thread at the 384 threads of every CTA here), and a warpgroup that
// asks for more than the others released waits forever. 64-row CTAs: WG0 holds S (32), O[:,
// 0:256] (128) and P; WG1 O[:, 256:512]; the producer two 32-key rounds of loads (88). From
// ptxas: WG1 needs 160 (below, ptxas ignores every setmaxnreg, C7507); WG0 at 184 serializes
// its wgmmas (C7512). 16/32-row CTAs (384 threads): the consumer warpgroup holds O^T (64 or 128
// registers) and S^T (at 200, the 32-row fp8_model1 kernel spilled); a producer thread two
// rounds of loads (its round of block kb + 1 is loaded before block kb is stored).
inline constexpr int kRegsWg0 = 192, kRegsWg1 = 160, kRegsProducerWide = 152;
inline constexpr int kRegsConsumerNarrow = 216, kRegsProducerNarrow = 144;
inline constexpr int kNarrowAhead = 1;
constexpr int launch_regs(int threads) { return 65536 / threads / 8 * 8; }
static_assert(kRegsWg0 + kRegsWg1 + kRegsProducerWide <= 3 * launch_regs(cta_threads(64)), "64-row register budget");
static_assert((consumer_threads(16) / 128) * kRegsConsumerNarrow + 2 * kRegsProducerNarrow <=
                  (cta_threads(16) / 128) * launch_regs(cta_threads(16)),
              "narrow register budget");

// Named barriers among the consumer warpgroups (0 is __syncthreads).
inline constexpr int kBarPReady = 1;   // WG0 -> WG1: P and the row rescale factors are in shared memory
inline constexpr int kBarPFree = 2;    // WG1 -> WG0: WG1 has read them
inline constexpr int kBarFinal = 3;    // WG0 -> WG1: final row factors
inline constexpr int kBarMerge = 4;    // narrow CTAs: the per-block head maxima, the final sums
inline constexpr int kBarQReady = 5;   // consumers: Q is in shared memory
inline constexpr int kBarRawFree = 6;  // kNarrowBulk producers: every one has read a raw block
inline constexpr int kBarPairRows = 7; // kBf16Pairs producers: every one's rows of a block are in
inline constexpr int kBarAltReady = 8;  // kAlt: + block parity; the block's owner -> the other: P, m
inline constexpr int kBarAltPRead = 10; // kAlt: + warpgroup; its four warps have read P
inline constexpr int kBarSeeS0 = 8;     // kSeesaw: WG0 -> WG1: P0, M and a0 of an even block
inline constexpr int kBarSeeS1 = 9;     // kSeesaw: WG1 -> WG0: P1, M and a1 of an odd block
inline constexpr int kBarSeeQ = 11;     // kSeesawStagger: WG0 -> WG1: WG0's QK^T is done
inline constexpr int kBarFp8POwn = kBarMerge;  // kDenseE4m3Fp8 (no narrow merge there): WG0's P is in
inline constexpr int kBarStagedOut = kBarMerge;  // persistent 64-row CTAs: both warpgroups' staged rows have left
inline constexpr int kBarOutTile = 8;   // + warpgroup; kBf16PersistEnds: its rows of O are in the K tile (kAlt, kSeesaw: other kernels)

// Which keys of a block are real: one 32-bit ballot per (32-key round, producer warp) whose low
// byte holds that warp's eight keys (32 bits so that a peer CTA's producer can st.async it).
inline constexpr int kValidBytes = 2 * 4 * 4;

// Two 64-row CTAs of a cluster that read the same keys (two head tiles of one token) share the
// gathers: each gathers and dequantizes one 32-key round of every block and writes it into both
// K tiles (st.async into the peer's). Consumers release a tile in both CTAs.
inline constexpr int kPairCtas = 2;
// A pair's producer thread holds one key of a block: it issues the loads of block kb + 1 before
// it stores block kb (SMLA_SD_PAIR_AHEAD=0: after; a measurement build).
#ifndef SMLA_SD_PAIR_AHEAD
#define SMLA_SD_PAIR_AHEAD 1
#endif
inline constexpr int kPairAhead = SMLA_SD_PAIR_AHEAD;
// (An unpaired 64-row CTA's producer thread holds two keys of a block and no block ahead. Round
// r's loads of block kb + 1 issued as soon as round r of block kb was stored, so that round 0's
// rows travel while round 1 is converted, measured slower (same-call A/B, 2026-12-02): V3.2 b128
// h64 140.7 -> 146.0 µs (143.7 with the L2 prefetch one block nearer), V4 h64 54.0 -> 55.1, V4
// s_q2 h64 95.9 -> 99.7, dense fp8 h64 411 -> 430; the producer alone (variant 7) 117.7 ->
// 118.6. Its pace is not the loads' latency; removed.)
// Pairs: the producers arrive on "full" without the proxy fence, whose MEMBAR.ALL.CTA also
// waits for their st.async copies to the peer and the next block's loads; each consumer thread
// fences after its wait instead, before its wgmmas (b128 s_q2 h128 414.0 -> 399.7 µs, s_q1 h128
// 214.1 -> 207.7). SMLA_SD_PAIR_CONSUMER_FENCE=0 (a measurement build): the producers fence.
#ifndef SMLA_SD_PAIR_CONSUMER_FENCE
#define SMLA_SD_PAIR_CONSUMER_FENCE 1
#endif
inline constexpr bool kPairConsumerFence = SMLA_SD_PAIR_CONSUMER_FENCE != 0;
// L2 line prefetch of the rows two blocks ahead of the loads, except in 16-row tiles (b128 h16
// 97.3 -> 93.7 µs without it; h32 +6%, h64 +9%, s_q2 h128 +4% without it). Measurement builds:
// SMLA_SD_PREFETCH=0 none, =1 in every tile.
#ifndef SMLA_SD_PREFETCH
#define SMLA_SD_PREFETCH 2
#endif
template <int kRows>
inline constexpr bool kPrefetch = SMLA_SD_PREFETCH == 1 || (SMLA_SD_PREFETCH == 2 && kRows != 16);
// A lane's two L2 lines of a row by one prefetch and the same register plus 512 (gather.cuh,
// prefetch_l2_line_and_512), in unpaired fp8_ds_mla producers. ncu of V3.2 b128 h64
// (2026-12-02): 23% of the unpaired producer's stall samples sat on the two instructions after
// its first prefetch, which rebuilt the second line's address in the first's registers and so
// waited for the load/store unit to take the first prefetch. Same-call A/B (µs, two reps):
// V3.2 b128 h64 125.0 -> 123.8, s_q2 h64 240.2 -> 237.7; the pairs within 0.4% (s_q2 h128
// 365.5 -> 366.7, h128 188.5 -> 189.2, V4 s_q2 h128 215.1 -> 214.6, V4 h128 112.7 -> 113.1) and
// fp8_model1's unpaired V4 h64 46.9 -> 47.2, so only there. SMLA_SD_PREFETCH_PAIRED=1 (a
// measurement build): in every packed producer; 0: none.
#ifndef SMLA_SD_PREFETCH_PAIRED
#define SMLA_SD_PREFETCH_PAIRED 2
#endif
template <int kFmt, bool kPeer>
inline constexpr bool kPrefetchPaired =
    SMLA_SD_PREFETCH_PAIRED == 1 ||
    (SMLA_SD_PREFETCH_PAIRED == 2 && !kPeer && kFmt == static_cast<int>(CacheFormat::fp8_ds_mla));
// SMLA_SD_INDEX_ROWS (default 2): make_work keeps the token's two index rows as pointers
// (Work::idx_main, idx_extra), so a key's index load is a select, an add and the load. Without
// them each load rebuilds its row's address from the request and token strides (~25
// instructions of the unpaired producer's ~576 a block and warp in the SASS of V3.2 b128 h64),
// which ptxas recomputes rather than hold the 64-bit products. 2: only the kernels that serve
// sparse decode alone (fp8_ds_mla, fp8_model1: load_key_index<kDenseToo = false>); 1 (a
// measurement build): every kernel; 0: none. Same-call A/B of 1 against 0 (2026-12-02, µs,
// --seed 7, two reps): V3.2 b128 h32 89.2 / 89.3 -> 88.0 / 88.3, V4 s_q2 h128 211.4 / 211.5 ->
// 210.8 / 210.6, V4 h128 111.6 / 112.0 -> 111.4 / 111.4; h64, h16, s_q2 h128 and paged prefill
// h128 level (123.2 / 123.2 -> 123.2 / 123.1, 69.0 / 69.3 -> 69.3 / 69.1, 364.8 / 364.8 -> 365.3 /
// 365.7, 5541 -> 5534). The dense-serving kernels were not timed with it, so they keep the
// old load (2 leaves their SASS as it was).
#ifndef SMLA_SD_INDEX_ROWS
#define SMLA_SD_INDEX_ROWS 2
#endif
inline constexpr bool kIndexRows = SMLA_SD_INDEX_ROWS != 0;
// Whether a kernel's load_key_index reads the index rows kept in Work.
template <bool kDenseToo>
inline constexpr bool kIndexRowsIn = SMLA_SD_INDEX_ROWS == 1 || (SMLA_SD_INDEX_ROWS == 2 && !kDenseToo);
// SMLA_SD_WORK_NO_INIT=1 (a measurement build): Work's index-row members without their
// initializers, as e6c9089 shipped them. The fp8_ds_mla pair kernels compile 16 instructions
// shorter and ran 4.5-7.5% slower (2026-12-02: V3.2 b128 s_q2 h128 394.3 µs against 369.4, h128
// 203.9 against 189.6, paged prefill h128 5897 against 5645): kept to compare the two in ncu.
#ifndef SMLA_SD_WORK_NO_INIT
#define SMLA_SD_WORK_NO_INIT 0
#endif

// 64-row tiles: online softmax with lazy rescaling (online_softmax.cuh, update_max_lazy): O is
// rescaled only when a row's maximum grows by more than a factor 2^8 (V4 b128 s_q2 h128: 247.7
// -> 243.6 µs; V3.2 rows within 1%; 32-row tiles measured 2.4% slower with it, so they keep
// rescaling at every new maximum). SMLA_SD_LAZY_RESCALE=0: at every new maximum.
#ifndef SMLA_SD_LAZY_RESCALE
#define SMLA_SD_LAZY_RESCALE 1
#endif
inline constexpr bool kLazyRescale = SMLA_SD_LAZY_RESCALE != 0;

// 64-row consumers on swizzled tiles (dense decode by the TMA unit, bf16 rows, prefill) and the
// FP8 tiles: the block's valid-key words are read from shared memory before its QK^T is
// issued, so the load's latency (long while the producers' traffic fills the shared-memory
// pipe; 7% of WG0's samples in the FP8 tiles' profile) hides behind the MMAs. Same call: dense
// bf16 s_q2 h128 924.8 -> 914.4 µs, h128 486.8 -> 482.2, prefill d576 5774 -> 5746, FP8 tiles
// 1031 -> 1012; the packed sparse tiles level to slower (V3.2 h64 140.4 -> 141.9), so they read
// it after the QK^T wait as before. SMLA_SD_MASK_EARLY=0: after the wait everywhere.
#ifndef SMLA_SD_MASK_EARLY
#define SMLA_SD_MASK_EARLY 1
#endif
inline constexpr bool kMaskEarly = SMLA_SD_MASK_EARLY != 0;

// Persistent CTAs: 64-row tiles of the packed formats also have a persistent kernel (pairs as
// persistent clusters), at most one CTA per SM, each walking work units blockIdx.x, + gridDim.x,
// ...: the producer gathers the next unit's first blocks while the consumers finish the current
// one, and the K tiles' stages and phases continue across units. The launch takes it when the
// units exceed one wave (instantiate.cuh): b128 s_q2 h128 431.4 -> 414.6 µs, s_q1 h128 221.4 ->
// 214.0, V4 s_q2 h128 243.9 -> 233.8; in one wave it was 2-4% slower (h64 143.3 -> 146.3, b = 1
// 21.0 -> 21.8), so one-wave grids keep the one-unit kernel.

// 16/32-row CTAs of fp8_ds_mla gather rows with cp.async.bulk (the TMA unit, one copy per
// 656-byte row) into a ring of two raw blocks, and the producers convert from there into one K
// tile (two do not fit beside the ring). The microbenchmark bench/micro/gather_bulk_vs_ldg.cu
// gathers at 3.6 TB/s this way against 1.9 with 16-byte loads; one K tile makes a block's
// stores wait for the previous block's P V. With the switches below, against the 16-byte-load
// producer (SMLA_SD_NARROW_BULK=0, a measurement build): b128 h16 93.7 -> 81.1 µs, h32 111.2 ->
// 97.9, s_q2 h16 180.2 -> 153.8. Handing the tile over in two column halves (each with its own
// barriers, the first half stored while P V still reads the second) measured slower: h16 84.9
// -> 88.9.
#ifndef SMLA_SD_NARROW_BULK
#define SMLA_SD_NARROW_BULK 1
#endif
// Raw blocks in flight. Three fit in 16-row CTAs but measured no faster (h16 81.1 -> 83.4 µs,
// s_q2 h16 153.8 -> 155.6).
inline constexpr int kRawSlots = 2;
// A raw slot is reissued as soon as every producer has converted it into registers, before the
// producer waits for the K tile, in 32-row CTAs only: h32 104.0 -> 101.3 µs, h20 102.2 -> 99.6,
// but h16 85.0 -> 91.0, s_q2 h16 162.6 -> 175.2 (there it delays the K tile's stores, which the
// consumer waits on). SMLA_SD_BULK_EARLY_FREE=0: never, =1: in every narrow CTA.
#ifndef SMLA_SD_BULK_EARLY_FREE
#define SMLA_SD_BULK_EARLY_FREE 2
#endif
template <int kRows>
inline constexpr bool kBulkEarlyFree = SMLA_SD_BULK_EARLY_FREE == 1 || (SMLA_SD_BULK_EARLY_FREE == 2 && kRows == 32);
// The row copies are issued by lanes 0..7 of every producer warp (eight each) rather than by
// all lanes of the first two warps: a warp issues cp.async.bulk one lane at a time (uniform
// operands), and every warp's tile stores wait behind its issues. h16 84.0 -> 81.1 µs, h32
// 101.1 -> 97.9, s_q2 h16 160.4 -> 153.8 (SMLA_SD_BULK_SPREAD=0: the first two warps).
#ifndef SMLA_SD_BULK_SPREAD
#define SMLA_SD_BULK_SPREAD 1
#endif
inline constexpr bool kBulkSpread = SMLA_SD_BULK_SPREAD != 0;
// (One mbarrier.arrive.expect_tx per producer warp for its warp's copied bytes, 8 arrivals per
// raw block instead of 64, measured slower: h16 79.7 -> 83.3 µs, h32 97.0 -> 100.3, s_q2 h16
// 152.9 -> 160.2; removed.)
// The K tile's proxy fence is made by each consumer thread after its wait on "full" (as in
// pairs), not by the producers before they arrive: h16 79.7 -> 79.8 µs, h32 97.0 -> 95.9, s_q2
// h16 152.9 -> 149.9 (same-seed A/B). SMLA_SD_NARROW_CONSUMER_FENCE=0 (a measurement build):
// the producers fence.
#ifndef SMLA_SD_NARROW_CONSUMER_FENCE
#define SMLA_SD_NARROW_CONSUMER_FENCE 1
#endif
inline constexpr bool kNarrowConsumerFence = SMLA_SD_NARROW_CONSUMER_FENCE != 0;
// Dense decode of an fp8_e4m3 cache (h_q <= 32, d_qk 576) runs only this way (no 64-row tiles
// and no 16-byte-load producer for it).
template <int kRows, int kFmt>
inline constexpr bool kNarrowBulk =
    kRows < 64 && ((SMLA_SD_NARROW_BULK != 0 && kFmt == static_cast<int>(CacheFormat::fp8_ds_mla)) ||
                   kFmt == static_cast<int>(CacheFormat::fp8_e4m3));
// The raw ring's plan (Smem's kRaw): two raw blocks beside one K tile (a block's stores wait for
// the consumers' work on the block before). Measurement builds SMLA_SD_E4M3_RAW_SLOTS=1 (fp8_e4m3)
// and SMLA_SD_DS_RAW_SLOTS=1 (16-row fp8_ds_mla): one raw block beside two K tiles, the next
// block's copies issued once every producer has converted the current one. Measured slower, the
// copies' latency no longer hidden (same-seed A/B, 2026-12-01): dense fp8 b128 h16 L8k 326.9 ->
// 360.3 µs (h32 396.4 -> 394.8), sparse V3.2 h16 79.1 -> 98.5, s_q2 h16 151.5 -> 183.3.
#ifndef SMLA_SD_E4M3_RAW_SLOTS
#define SMLA_SD_E4M3_RAW_SLOTS 2
#endif
#ifndef SMLA_SD_DS_RAW_SLOTS
#define SMLA_SD_DS_RAW_SLOTS 2
#endif
template <int kRows, int kFmt>
constexpr int raw_slots() {
  if constexpr (!kNarrowBulk<kRows, kFmt>) return 0;
  if constexpr (kFmt == static_cast<int>(CacheFormat::fp8_e4m3)) return SMLA_SD_E4M3_RAW_SLOTS;
  return kRows == 16 ? SMLA_SD_DS_RAW_SLOTS : kRawSlots;
}
// 16/32-row tiles of an fp8_e4m3 cache (dense decode) keep no bf16 K tile: the producers only
// copy rows (cp.async.bulk) into a ring of kRawRing raw blocks, and the consumer warpgroup
// converts each e4m3 row from the ring straight into wgmma A fragments (e4m3 -> f16 exact, one
// cvt per two values) for S^T = K Q^T and O^T = V^T P^T, with Q and P^T in f16
// (consumer_narrow_raw.cuh); a block's slot is refilled once its P V completed. Against the
// bulk producer's one K tile (same-seed A/B, 2026-12-01): b128 h16 L8k 325.7 -> 268.9 µs, h32
// 396.9 -> 340.9, s_q2 h16 619.9 -> 490.1, h8 L32k 1219 -> 941; b1 h16 51.9 -> 55.4.
// SMLA_SD_RAW_CONSUMER=0 (a measurement build): the narrow bulk producer and its K tile.
// (The conversion on the integer pipes instead of cvt, prmt with sign replication + shift +
// mask with 2^-8 folded into the scales, measured within 2% either way and turns NaN bytes into
// finite values: removed.)
#ifndef SMLA_SD_RAW_CONSUMER
#define SMLA_SD_RAW_CONSUMER 1
#endif
// 16-row tiles of sparse fp8_ds_mla decode run on the same ring (consumer_narrow_raw_ds.cuh),
// with two consumer warpgroups (below): S^T in four partial sums, one per 128-column scale tile,
// and the bf16 RoPE part through its own bf16 wgmma, folded with each key's scales; P V through
// four P^T tiles (P x scale, bf16) against bf16 values, each 64-row tile of O^T inside one scale
// tile. Against the narrow bulk producer's one K tile (same-seed A/B, 2026-12-01): b128 h16
// 79.4 -> 75.0 µs, s_q2 h16 152.1 -> 137.9, b32 h16 33.0 -> 36.4; with one consumer warpgroup
// it was slower (h16 90.6, s_q2 h16 172.5). (32-row tiles: the four partial sums beside O^T
// exceed the consumer's registers.) SMLA_SD_DS_RAW_CONSUMER=0 (a measurement build): the bulk
// producer's K tile.
#ifndef SMLA_SD_DS_RAW_CONSUMER
#define SMLA_SD_DS_RAW_CONSUMER 1
#endif
// 32-row tiles of fp8_ds_mla run on the ring with the value columns split between the two
// consumer warpgroups (consumer_narrow_raw_ds32.cuh): both take every block; warpgroup cw
// computes the partial S^T of scale tiles 2 cw and 2 cw + 1 (and half of the RoPE columns), the
// two partial sums meet through shared memory, each runs the same softmax and adds P V for the
// 256 value columns of its scale tiles (O^T: 64 registers). Against the bulk producer's K tile
// (same-call A/B, 2026-12-01): b128 h32 96.6 -> 92.0 µs, s_q2 h32 185.0 -> 176.1, h24 94.7 ->
// 91.1, b1 h32 18.3 -> 18.1, but b32 h32 40.4 -> 41.4. Both warpgroups run every block's
// softmax and wait for each other once per block, so each consumer warp issues ~1080
// instructions per block for all 32 blocks (the 16-row tile: ~1240 for half of them): the
// consumers, not the gathers, set the pace (h16 alone: 52 µs of its 69). SMLA_SD_DS_RAW32=0
// (a measurement build): the bulk producer's K tile.
#ifndef SMLA_SD_DS_RAW32
#define SMLA_SD_DS_RAW32 1
#endif
template <int kRows, int kFmt>
inline constexpr bool kRawConsumer =
    (SMLA_SD_RAW_CONSUMER != 0 && kRows < 64 && kFmt == static_cast<int>(CacheFormat::fp8_e4m3)) ||
    (SMLA_SD_DS_RAW_CONSUMER != 0 && kRows == 16 && kFmt == static_cast<int>(CacheFormat::fp8_ds_mla)) ||
    (SMLA_SD_DS_RAW32 != 0 && kRows == 32 && kFmt == static_cast<int>(CacheFormat::fp8_ds_mla));
// Measurement build SMLA_SD_DS32_ROLES=1: the 32-row fp8_ds_mla tiles' two consumer warpgroups
// in roles instead of halves (consumer_narrow_raw_ds32_roles.cuh): WG0 takes every block's whole
// S^T (all four scale tiles and the RoPE part, 32 heads), its softmax and P^T of all four tiles;
// WG1 holds all of O^T (128 registers) and runs every block's P V one block behind, so neither
// waits for the other's half of a block (the halves wait for each other twice a block). One set
// of P^T tiles (WG0 writes block i + 1's once WG1's P V of block i drained), no exchange buffer,
// SMLA_SD_DS32_ROLES_RING slots (three; four in the forty-ninth pass's A/Bs below). Same-call A/Bs on
// an H100 (2026-12-05, µs, docs/PERF.md forty-ninth pass): the consumers alone (variant
// SMLA_SD_RAW_NO_COPY=1) 10-11% faster, b128 h32 80.3 -> 71.9, s_q2 h32 152.5 -> 137.6, h24
// 78.8 -> 70.7; but the kernel slower in decode, b128 h32 94.9 -> 98.2, s_q2 h32 175.5 -> 177.1,
// h24 94.0 -> 97.3, b8 h32 25.7 -> 27.6, b1 h32 17.0 -> 19.8 (ncu, b128 h32, the early-V build:
// WG0's one warp a scheduler carries the block's critical path, ~1100 instructions a block, 21%
// of its samples waiting on instruction fetch; WG1 waits for it 32% of its time); faster in the
// paged prefill's 32-row kernels, s_q4096 h32 topk2048 2385 -> 2231 (SMLA_SD_DS32_ROLES_PREFILL
// below). On an H200, where h32 is consumer-bound (2026-12-05, fifty-first pass, µs, halves ->
// roles -> roles with EARLY_V): b128 h32 85.3 -> 80.0 -> 79.5, s_q2 h32 164.3 -> 154.1 -> 153.3,
// h24 84.6 -> 80.1 -> 78.7, b64 s_q2 h32 85.3 -> 79.5 (early V), but b8 h32 23.9 -> 29.8 -> 30.5,
// b1 h32 16.8 -> 21.4 -> 22.6, b64 h32 55.2 -> 57.9, b96 100.9 -> 103.4 (split launches). The
// default build holds the EARLY_V build's decode kernel as the kernel argument kDs32Roles (the same
// SASS), which launch.cu ds32_decode_roles takes for unsplit launches on bandwidth-rich devices.
#ifndef SMLA_SD_DS32_ROLES
#define SMLA_SD_DS32_ROLES 0
#endif
// SMLA_SD_DS32_ROLES_RING: the roles' slots (default 3). Same call on an H200 (2026-12-06, µs,
// 90 replays, docs/PERF.md fifty-fourth pass, four slots -> three): b128 h32 79.38 / 79.14 /
// 79.26 -> 78.05 / 77.95 / 77.86, s_q2 h32 152.9 -> 150.5, h24 80.0 -> 77.4, b256 h32 153.2 ->
// 150.6; on an H100 (roles forced) b128 h32 97.5 -> 95.1. Why three slots are faster than four
// is not measured. =2 on H100s (2026-12-06, roles forced, same calls, us, three -> two slots):
// b128 h32 94.82 / 94.94 -> 92.66 / 92.59, h24 94.24 / 93.92 -> 92.32 / 92.21; on a third card
// b128 h32 90.69 -> 89.41, topk 1024 55.28 -> 54.02, but s_q2 h32 165.5 -> 167.6 and b256 h32
// 165.3 -> 167.6 (two waves). On an H200 (2026-12-06, the sixty-first pass, three -> two slots)
// 35% slower: b128 h32 77.0 -> 103.9, s_q2 h32 148.1 -> 201.2, h24 75.7 -> 103.1.
// WG1 computing a third of S^T for WG0 (a measurement build of the fifty-third pass, three slots)
// took 79.4 / 79.4 / 79.5 in that call and was removed.
#ifndef SMLA_SD_DS32_ROLES_RING
#define SMLA_SD_DS32_ROLES_RING 3
#endif
// =2: WG0 hands over P itself and WG1 makes the four P^T tiles (and tracks the tiles' scale
// exponents), ~1100 -> 858 instructions a block in WG0's loop, ~590 -> 822 in WG1's: level with =1
// (b128 h32 98.4, consumers alone 71.4).
inline constexpr bool kRolesPByWg1 = SMLA_SD_DS32_ROLES == 2;
// kDs32Roles (a kernel template argument, launch.cu ds32_decode_roles): the decode kernel that
// takes the roles at run time, as this switch's build has them with SMLA_SD_DS32_ROLES_EARLY_V=1.
template <int kRows, int kFmt, bool kDs32Roles = false>
inline constexpr bool kRawRoles = (SMLA_SD_DS32_ROLES != 0 || kDs32Roles) && kRawConsumer<kRows, kFmt> && kRows == 32 &&
                                  kFmt == static_cast<int>(CacheFormat::fp8_ds_mla);
// Raw-ring tiles whose consumer warpgroups split the value columns (and share one softmax state).
template <int kRows, int kFmt, bool kDs32Roles = false>
inline constexpr bool kRawSplitDv = kRawConsumer<kRows, kFmt> && kRows == 32 &&
                                    kFmt == static_cast<int>(CacheFormat::fp8_ds_mla) && !kRawRoles<kRows, kFmt, kDs32Roles>;
// SMLA_SD_DS32_ROLES_PREFILL (default 1): the roles, WG1's value words loaded first, in the
// 32-row fp8_ds_mla kernels that return max_logits (sparse prefill from the paged cache at h_q
// 17-32) only, on the split tiles' shared-memory plan (three slots; RolesHand in xchg; the four
// P^T tiles where the split keeps two a warpgroup), so that decode keeps its kernels. There the
// halves run the whole softmax each (the split softmax is decode's, kDs32Split). Same call on an
// H100 (2026-12-05, three reps, µs): s_q4096 topk2048 s_kv32768 h32 2409 -> 2212 (-8.2%), h24
// 2375 -> 2198 (-7.4%), the same error; GPU suite 39 / 39 and memcheck of the paged prefill's
// binade case on that build. =0 (a measurement build): the halves.
#ifndef SMLA_SD_DS32_ROLES_PREFILL
#define SMLA_SD_DS32_ROLES_PREFILL 1
#endif
template <int kRows, int kFmt, bool kMaxLogits>
inline constexpr bool kRolesOnSplitPlan = SMLA_SD_DS32_ROLES_PREFILL != 0 && kMaxLogits && kRawSplitDv<kRows, kFmt>;
// The 16-row fp8_ds_mla raw consumer converts values to bf16 on the integer pipes (a
// sign-replicating prmt, a shift and a mask per pair: exact, the value times 2^-120, subnormals
// included) instead of e4m3 -> f16 -> f32 -> bf16; P^T carries 2^60 more and O^T is multiplied
// by 2^60 before the epilogue. A NaN byte reads as a finite value there, but the same byte is
// also a key column, whose exact conversion makes the logit NaN. Same-seed A/B (2026-12-01):
// b128 h16 75.2 -> 72.7 µs, s_q2 h16 138.0 -> 129.5, b32 h16 37.0 -> 36.1.
// SMLA_SD_DS_INT_V=0 (a measurement build): the float conversion.
#ifndef SMLA_SD_DS_INT_V
#define SMLA_SD_DS_INT_V 1
#endif
inline constexpr bool kDsIntV = SMLA_SD_DS_INT_V != 0;
// kDsIntV: the factor P^T takes and O^T takes at the end (values enter as V . 2^-120).
inline constexpr float kDsIntVFactor = 1.152921504606846976e18f;  // 2^60
// The 16-row fp8_ds_mla raw consumer takes values into P V as f16 (a prmt per two pairs and one
// exact cvt per pair, against prmt + shift + mask per pair to bf16): P^T_t = P . scale_t .
// 2^(133 - E_t) in f16, E_t the largest scale exponent of tile t so far over the warpgroup's
// keys (each block's through the softmax's maxima buffer); when it grows, that tile's O^T is
// rescaled with the heads' factors, and the epilogue divides it out. P^T then keeps 11 bits
// instead of bf16's 8. ~110 fewer instructions per block and warp, yet level in time (same-call
// A/B, 2026-12-01: b128 h16 69.9 -> 69.8 µs, s_q2 h16 121.1 -> 120.7, b32 h16 34.9 -> 34.6, b1
// h16 15.1 -> 15.0); max |out error| of the sampled rows 1.42e-4 -> 1.23e-4, s_q2 1.70e-4 ->
// 1.19e-4. A measurement build (SMLA_SD_DS_F16_V=1), off: the build measured and tested then
// also multiplied O^T tiles whose block exponent was below the running one by 2^(E - e) whenever
// the block rescaled O^T, which the tests' caches (every scale in one binade) never showed; the
// fix (the factor 1 there) and the test of caches whose scales span binades
// (GpuSparseDecode.ScalesAcrossBinades, GpuSparsePrefill.FromPagedCacheScalesAcrossBinades) have
// not run on a device yet. Off: bf16 values (kDsIntV).
#ifndef SMLA_SD_DS_F16_V
#define SMLA_SD_DS_F16_V 0
#endif
inline constexpr bool kDsF16V = SMLA_SD_DS_F16_V != 0;
// The same f16 values in the 32-row fp8_ds_mla tiles (consumer_narrow_raw_ds32.cuh; each
// warpgroup's two scale tiles, their block maxima through RingSmem::heads, which these tiles'
// epilogue does not use). h32 is bound by these consumers (consumers alone 82.8 of 88.3 µs,
// 2026-12-02); the conversion to bf16 on the integer pipes took ~150 of their ~1000 instructions
// a block and warp, f16 ~100 (SASS). Same-call A/B against bf16 values (2026-12-02, two reps):
// b128 h32 88.4 -> 87.5 µs, h24 87.2 -> 86.3, paged prefill s_q4096 h32 topk2048 2529 -> 2444;
// s_q2 h32, b8 and b1 h32 level; max |out error| of the sampled rows 1.28e-4 -> 1.23e-4, s_q2
// 1.56e-4 -> 1.24e-4, prefill 1.61e-4 -> 1.21e-4. SMLA_SD_DS32_F16_V=0 (a measurement build):
// bf16 values (kDsIntV).
#ifndef SMLA_SD_DS32_F16_V
#define SMLA_SD_DS32_F16_V 1
#endif
inline constexpr bool kDs32F16V = SMLA_SD_DS32_F16_V != 0;
// The 32-row fp8_ds_mla tiles' two warpgroups split the softmax by heads instead of both running
// it for all 32 (consumer_narrow_raw_ds32.cuh): each sends the other only the partial S^T of the
// other's 16 heads, runs the softmax of its own, writes P^T of all four scale tiles for them
// (two into the other's tiles) and its heads' row factors (RingSmem::heads), and after one
// barrier over both rescales O^T with all 32; the final states meet before the epilogue. ncu of
// h32 (2026-12-02): ~190 of a consumer warp's ~1000 instructions a block were the softmax, which
// both warpgroups ran. Same-call A/Bs against both warpgroups running it (2026-12-03, two reps
// each, µs): b128 h32 87.8 -> 86.5, s_q2 h32 168.0 -> 165.4, b8 and b1 h32 level; in sparse
// prefill (s_q4096 h32 topk2048) 2441 -> 2528, so the prefill kernels (kMaxLogits) keep both.
// With one body per warpgroup (the warpgroup index a constant: twice the code; the measurement
// build SMLA_SD_DS32_CW_CONST, removed after it) the split was slower at small batches (b8 h32
// 24.8 -> 26.5, b1 17.0 -> 18.1), and those bodies alone 3-5% slower everywhere (b128 h32 87.6
// -> 90.7).
// SMLA_SD_DS32_SPLIT_SOFTMAX: 0 both warpgroups run the whole softmax; 1 the split in sparse
// decode (default); 2 also in sparse prefill (a measurement build).
#ifndef SMLA_SD_DS32_SPLIT_SOFTMAX
#define SMLA_SD_DS32_SPLIT_SOFTMAX 1
#endif
template <bool kMaxLogits>
inline constexpr bool kDs32Split = SMLA_SD_DS32_SPLIT_SOFTMAX == 2 || (SMLA_SD_DS32_SPLIT_SOFTMAX == 1 && !kMaxLogits);
// kRawConsumer tiles have two consumer warpgroups that take alternate blocks (warpgroup cw:
// blocks cw, cw + 2, ...; each with its own softmax state, P^T tiles, maxima buffer and named
// barriers; the two states merge in the epilogue) and one copy-only producer warpgroup (lanes
// 0..15 of its four warps own a row each). One warpgroup ran a block's conversions and small
// wgmmas one after another (~2.1 µs per 64-key block of the fp8_e4m3 cache); two overlap them.
// Against one consumer warpgroup (same-seed A/B, 2026-12-01): dense fp8 b128 h16 L8k 267.4 ->
// 209.1 µs, h32 338.3 -> 274.7, s_q2 h16 487.2 -> 365.2, b1 h16 55.3 -> 53.5.
// SMLA_SD_RAW_DUAL=0 (a measurement build): one consumer warpgroup, two producer warpgroups.
#ifndef SMLA_SD_RAW_DUAL
#define SMLA_SD_RAW_DUAL 1
#endif
// Measurement build SMLA_SD_RAW_WGS=3: three consumer warpgroups in 16-row raw-ring tiles (blocks
// cw, cw + 3, ...; a 512-thread CTA, SMLA_SD_RAW_WGS_REGS registers each, the producer warpgroup
// the rest). No pipe of the two-warpgroup kernel is saturated (ncu, dense fp8 h16: ALU 52%,
// tensor 22%, issue slots 49%), yet a third warpgroup measured level or slower (same-seed A/B,
// 2026-12-01, at 152 / 160 registers: dense fp8 h16 L8k 191.8 -> 196.8 / 194.4 µs, with five
// slots 196.6; at 160 that kernel neither spills nor serializes). The fp8_ds_mla kernel's
// numbers (sparse V3.2 h16 69.3 -> 70.6 / 70.5) do not count: at both budgets ptxas serializes
// its wgmmas (C7512, insufficient registers). Its rings of four and five slots are not multiples
// of three, so those builds could read rows before they landed; RingSmem now refuses them
// (a three-warpgroup build needs three or six slots: SMLA_SD_RAW_RING16=3). Those builds' epilogue
// also left each tile's last head unstored (narrow_store_rows: 2048 pieces over 384 threads; fixed
// 2026-12-06, when a run on an H100 failed the sparse-decode tests with it), so none of their
// figures is of correct results. The fixed build's fp8_ds_mla kernel (three slots, 160 registers,
// still serialized) ran as a run-time variant for b = 1's splits of three blocks, one a warpgroup,
// on an H200 (2026-12-06, PERF.md sixtieth pass): slower everywhere (b1 h128 16.4 -> 17.7 µs,
// b1 h64 three-block splits 15.8 -> 17.2, b128 h16 66.3 -> 69.1), tests passed; removed.
#ifndef SMLA_SD_RAW_WGS
#define SMLA_SD_RAW_WGS 2
#endif
template <int kRows, int kFmt>
inline constexpr int kRawWgs = SMLA_SD_RAW_DUAL == 0 || !kRawConsumer<kRows, kFmt> ? 1
                               : (SMLA_SD_RAW_WGS == 3 && kRows == 16 ? 3 : 2);
template <int kRows, int kFmt>
constexpr int raw_consumer_threads() { return 128 * kRawWgs<kRows, kFmt>; }
// Unpaired 64-row CTAs of the packed formats (fp8_ds_mla, fp8_model1, fp8_e4m3 above 32 heads)
// have two producer warpgroups, one 32-key round of every block each, at 80 registers (512
// threads; WG0 and WG1 keep 192 and 160). ncu of V3.2 b128 h64 with one producer warpgroup
// (2026-12-02): its one warp per scheduler issued ~1360 instructions a block (56% of them the
// conversion) at ~0.2 a cycle, stalled on its own dependency chains ("selected" 23%, "wait" 20%,
// long scoreboard 25% of its samples); a second producer warp per scheduler issues in its gaps.
// Same-call A/B (2026-12-02), one producer warpgroup / two in one-unit kernels / two in the
// persistent ones too: V3.2 b128 h64 140.0 / 135.5 / 135.1 µs, s_q2 h64 269.1 / 268.8 / 238.1,
// V4 h64 53.8 / 52.5 / 52.5, V4 s_q2 h64 96.0 / 96.2 / 91.4, dense fp8 h64 410.9 / 410.3 / 408.3,
// b1 h64 level. ptxas: the persistent fp8_ds_mla kernel spills 364 bytes, nearly all in the
// consumer warpgroups' per-unit start (before their first wgmma, none in a block loop), a few
// words in the producer; fp8_model1's none.
// SMLA_SD_WIDE_PRODUCERS=1 (a measurement build): one producer warpgroup, two rounds a thread;
// =2: two in one-unit kernels only. Sparse prefill's kernels from a paged packed cache (kLogits)
// take two as well.
#ifndef SMLA_SD_WIDE_PRODUCERS
#define SMLA_SD_WIDE_PRODUCERS 3
#endif
// The packed producer of 64-row tiles dequantizes on the bf16 route (fp8.cuh: four instructions
// a value pair instead of six, the same bits) wherever a warp's rows allow it: fp8_model1's UE8M0
// scales up to 2^7, fp8_e4m3, fp8_ds_mla when the scales are bf16 values (powers of two, as SPEC
// §2's writers store them; vLLM's V3.2 writer's amax / 448 takes the float32 route). Only in the
// kernels where it measured faster (same-call A/B, 2026-12-02, float32 route -> bf16 route
// everywhere): unpaired one-unit kernels (V3.2 b128 h64 134.8 -> 132.4 µs, V4 h64 52.4 -> 51.6)
// and fp8_e4m3 (dense h64 405.6 -> 389.7, fp8 q s_q2 h128 1345 -> 1334). Slower in pairs (V4
// s_q2 h128 225.5 -> 232.5, V4 h128 120.4 -> 123.3, V3.2 s_q2 h128 398 -> 400.5) and persistent
// kernels (V3.2 s_q2 h64 236.5 -> 257.5, paged prefill h64 3416 -> 3681): not profiled.
// SMLA_SD_BF16_ROUTE=0 (a measurement build): the float32 route everywhere; =2: everywhere.
#ifndef SMLA_SD_BF16_ROUTE
#define SMLA_SD_BF16_ROUTE 1
#endif
template <int kRows, int kFmt, bool kPair, bool kPersist>
inline constexpr bool kBf16Route =
    SMLA_SD_BF16_ROUTE == 2 ||
    (SMLA_SD_BF16_ROUTE == 1 && kRows == 64 && (kFmt == static_cast<int>(CacheFormat::fp8_e4m3) || (!kPair && !kPersist)));
// Blocks of key indices a producer lane holds (producer.cuh, IndexQueue). With 4 the L2 prefetch
// of a pair's producer (kAhead 1, block kb + 3) reads an index loaded one block earlier: ncu of
// the pair kernel (2026-12-02) put 11% of the producer's stall samples on the queue's registers.
// Pairs hold 6 (the prefetch's index loaded three blocks earlier, the rows' five). Same-call
// A/Bs (2026-12-02, µs, V3.2 b128 s_q2 h128 / V4 s_q2 h128): against 260ee65's pairs (depth 4,
// its hand-written rotation) 397.2 -> 375.2 and 226.2 -> 221.5; against this code at depth 4
// only 380.5 -> 378.0 and 228.6 -> 224.1, so most of the first gain is how ptxas schedules the
// rotation's loop, not the depth. Depth 5 379.8, 7 375.9, 8 400.9 (no spills: scheduling again);
// a prefetch distance of 2 374.4, of 4 (depth 7) 377.5. Unpaired CTAs (two rounds a lane, no
// block ahead) hold 4: 6 measured slower there (V3.2 h64 132.4 -> 134.3, s_q2 h64 236.5 -> 239.5).
// SMLA_SD_PAIR_QUEUE (a measurement build): the pairs' depth; SMLA_SD_PAIR_PREFETCH: how many
// blocks ahead of the one being stored a pair's producer prefetches rows into L2 (at most
// depth - 1). On V4 (2026-12-02, same call, two reps, µs; default V4 s_q2 h128 211.4 / 211.5,
// V4 h128 111.6 / 112.0): distance 2 217.5 / 218.7 and 114.5 / 114.8; depth 7 with distance 4
// 212.0 / 212.5 and 112.0 / 112.0. The V3.2 pairs level with both.
#ifndef SMLA_SD_PAIR_QUEUE
#define SMLA_SD_PAIR_QUEUE 6
#endif
#ifndef SMLA_SD_PAIR_PREFETCH
#define SMLA_SD_PAIR_PREFETCH 3
#endif
// (The pair producer's L2 prefetch and index load after its hand-over instead of before its
// wait, measured 2026-12-02: V3.2 s_q2 h128 375.8 -> 408.8 µs, V4 +6%; removed.)
// SMLA_SD_WIDE_QUEUE / SMLA_SD_WIDE_PREFETCH: the same two for unpaired 64-row CTAs (defaults
// 4 / 1). Measured 2026-12-02 with the cp.async Q (µs, V3.2 h64 / s_q2 h64 / V4 h64 against
// 132.6 / 237.7 / 51.8 at 4 / 2): 5 / 3 132.6 / 265.6 / 53.1, 6 / 3 132.4 / 242.6 / 52.8,
// prefetch 1 133.8 / 235.9 / 50.8. With Q by the TMA unit (same call, prefetch 2 -> 1): V3.2 h64
// 120.4 -> 120.1, s_q2 h64 232.5 -> 231.3, V4 h64 45.46 -> 43.54, V4 s_q2 h64 81.66 -> 79.49,
// b64 h64 73.9 -> 73.5, b1 h64 17.47 -> 17.25; a second call: paged prefill fp8_ds_mla h64
// 3517 -> 3437, fp8_model1 h64 level. The dense fp8_e4m3 cache's unpaired CTAs, not timed
// with it, keep 2 (kWidePrefetchOf).
#ifndef SMLA_SD_WIDE_QUEUE
#define SMLA_SD_WIDE_QUEUE 4
#endif
#ifndef SMLA_SD_WIDE_PREFETCH
#define SMLA_SD_WIDE_PREFETCH 1
#endif
// SMLA_SD_Q_CP_ASYNC (default 1; 0 is the measurement build of the old load): the consumers' Q
// load (kernel.cuh load_q, bf16 q) as one rolled loop of 16-byte cp.async instead of 18 unrolled
// loads and swizzled stores a thread, ~800 instructions a warpgroup that run once per unit. Same-
// call A/B of the form in every kernel (2026-12-02, µs): one-unit CTAs faster (V3.2 b1 h64
// 19.42 -> 18.56, b1 h128 20.81 -> 20.45, b8 h128 33.96 -> 33.28, b128 h64 132.7 -> 130.7, V4 h64
// 51.9 -> 50.5), the persistent and dense ones slower (V3.2 s_q2 h128 376.6 -> 402.8, s_q2 h64
// +0.9%, dense bf16 b1 h128 27.98 -> 28.56): only kStagedEnds kernels take it.
#ifndef SMLA_SD_Q_CP_ASYNC
#define SMLA_SD_Q_CP_ASYNC 1
#endif
inline constexpr bool kQCpAsync = SMLA_SD_Q_CP_ASYNC != 0;
// SMLA_SD_EPILOGUE_STAGED (default 1; 0 is the measurement build of the old stores): one-unit
// 64-row CTAs of unsplit work write O's bf16 rows (16-byte aligned: the API requires it) through
// shared memory and one bulk copy a row (epilogue.cuh, store_rows_staged) instead of 32 narrow
// stores a thread. Same-call A/B (2026-12-02, µs) of the first form, which staged float32 split
// partials too: V3.2 b128 h64 132.7 -> 125.8, V4 h64 51.9 -> 47.5 (the kernel's tail: 5-7 µs of
// 64 KB a CTA), b8 h128 33.96 -> 33.42, but b1 h64 19.42 -> 20.09, b1 h128 20.81 -> 21.27 and
// dense bf16 b1 h128 27.98 -> 29.65 (one or two blocks a CTA, then 128 KB of partials): partials
// keep the register stores, and only kStagedEnds kernels stage.
#ifndef SMLA_SD_EPILOGUE_STAGED
#define SMLA_SD_EPILOGUE_STAGED 1
#endif
inline constexpr bool kStagedEpilogue = SMLA_SD_EPILOGUE_STAGED != 0;
// Staged bf16 rows: 256 words of bf16 pairs and 4 more, so that a warp's 32-bit stores of its
// rows g and g + 8 (four lanes a row) fall in distinct banks.
inline constexpr int kStageRowWords = 260;
// SMLA_SD_FIRST_BLOCK_ALONE (default 1; 0 is the measurement build of the old order): the
// unpaired 64-row sparse-decode CTA's first block alone (kFirstAlone): its producer asks for that
// block's rows alone and stores them before it loads or prefetches any other block. At b = 128
// every CTA asked for three blocks at once at its start, and the first block was in 11-13 µs
// after entry at V3.2 h64 (timeline, twenty-second pass); alone, 9-10.4 µs. Same-call A/B
// (2026-12-02, µs): V3.2 b128 h64 132.7 -> 124.5, V4 h64 51.9 -> 49.8. A first form in every
// packed producer made the persistent rows slower (V3.2 s_q2 h128 378.8 -> 457.7, h128 196.6 ->
// 236.7, s_q2 h64 238.6 -> 274.5: the persistent pair kernel spilled 56 bytes) and b1 h128 (one-
// unit pairs) 20.7 -> 23.1: pairs, dense caches, prefill and persistent CTAs keep the old order.
// With the two switches above (same call, µs; all three / this one off / staging off / all off):
// V3.2 b128 h64 125.4 / 129.6 / 127.1 / 133.2, V4 h64 47.1 / 46.2 / 50.5 / 51.9, b64 h64 78.0 /
// 79.9 / 77.6 / 80.5, b1 h64 19.2 / 18.4 / 19.2 / 19.5: kept for the V3.2 rows.
#ifndef SMLA_SD_FIRST_BLOCK_ALONE
#define SMLA_SD_FIRST_BLOCK_ALONE 1
#endif
inline constexpr bool kFirstBlockAlone = SMLA_SD_FIRST_BLOCK_ALONE != 0;
// The narrow tiles' epilogue (narrow_softmax.cuh narrow_epilogue) ends each head's row with the
// MUFU unit's approximations, branch-free (epilogue.cuh finish_row_fast), and merges the consumer
// warpgroups' states with ex2.approx.ftz: in SASS every head's end was ~190 instructions of
// log2f's polynomial, a division's slow-path check and call, and exp2f's subnormal fix-ups, one
// head after another. A b = 1 h128 CTA took ~1.3 µs from both warpgroups' states to O^T in shared
// memory (timeline, 2026-12-02), a kernel of one block ~10 µs in all (topk 64, 2026-12-05).
// With it the epilogue came to read the tile's O^T rows out of shared memory eight 16-byte pieces
// a thread at a time before storing them (the loop before waited for each read before its store:
// ~0.9 µs from O^T in shared memory to stored in that timeline); that read-back is now every
// build's. The 16-row fp8_ds_mla kernel has 3472 -> 3072 instructions, the 32-row 4192 -> 3520.
// Same-call A/B on one H100 (2026-12-05, µs, exact and the old read-back -> fast and batched; GPU
// suite 39 / 39 and memcheck clean on it):
// V3.2 b1 h128 17.15 -> 16.88 (and 17.17 -> 16.72), b1 h64 15.16 -> 14.85, b2 h128 21.47 ->
// 21.17, b1 h32 17.68 -> 17.22, b128 h16 91.97 -> 91.40, h32 98.30 -> 97.46, s_q2 h16 162.35 ->
// 161.67, V4 b128 h32 49.84 -> 49.39; b8 h128, V4 b1 and dense fp8 level. Default since then.
// SMLA_SD_NARROW_FAST_END=0 (a measurement build): the exact library functions (batched read-back).
#ifndef SMLA_SD_NARROW_FAST_END
#define SMLA_SD_NARROW_FAST_END 1
#endif
inline constexpr bool kNarrowFastEnd = SMLA_SD_NARROW_FAST_END != 0;
// SMLA_SD_NARROW_ROLLED_STORES=mask, a narrow tile's end (narrow_softmax.cuh), run once a CTA: 1,
// its rows of O leave by one rolled loop (narrow_store_rows: a round of eight reads, then their
// stores, the destination's address made once and stepped) where the unrolled loop recomputed each
// piece's 64-bit address for both destinations (the raw-ring tiles and the roles; the packed
// producer's narrow wgmma tiles keep the unrolled loop, consumer_narrow_wgmma.cuh); 2 (with the
// fast row end), each head's lse slot and sink read from addresses made once (narrow_epilogue).
// 4 (with 1 and 2): each head's end (its sums, lse, sink, the factor of its row) by one thread a
// head, O^T written unscaled and scaled in the rolled stores, where every thread ended its four or
// eight heads itself (narrow_end_by_head_threads; the roles kernel 5880 -> 5408 instructions).
// 3 since the sixty-sixth pass: the roles kernel 7304 -> 5880 SASS instructions, and on an H100
// (same call, roles forced, µs) b128 h32 87.36 / 87.28 -> 86.16 / 85.95, s_q2 h32 161.4 -> 158.5,
// b1 h128 16.72 / 16.70 -> 16.45 / 16.48, b2 h128 20.90 -> 20.75, b128 h16 85.70 -> 85.54; its
// WG1 from its last P V to the end of its epilogue 4.5 -> 2.5 µs at b128 h32, 6.1 -> 3.6 at b16
// h32 (roles marks 18-21: the store loop 2.3 -> 0.6 and 4.0 -> 1.4 µs). 7 (default) since the
// sixty-seventh pass (another H100, same call, roles forced, 3 -> 7, µs): b128 h32 86.99 / 87.09
// -> 86.30 / 86.51, s_q2 h32 159.0 -> 157.5, b1 h128 16.56 / 16.51 -> 16.22 / 16.16, b2 h128
// 20.86 -> 20.45, h16 level; WG1's epilogue 2448 -> 2048 ns (O^T into shared memory 1200 -> 624,
// the stores 624 -> 832). Without the fast row end (a measurement build) the default is 3. 0:
// the unrolled loop and per-head addresses (a measurement build).
#ifndef SMLA_SD_NARROW_ROLLED_STORES
#define SMLA_SD_NARROW_ROLLED_STORES (SMLA_SD_NARROW_FAST_END ? 7 : 3)
#endif
static_assert((SMLA_SD_NARROW_ROLLED_STORES & ~7) == 0, "SMLA_SD_NARROW_ROLLED_STORES: bits 1, 2 and 4");
inline constexpr bool kNarrowRolledStores = (SMLA_SD_NARROW_ROLLED_STORES & 1) != 0;
inline constexpr bool kNarrowHeadOuts = (SMLA_SD_NARROW_ROLLED_STORES & 2) != 0 && kNarrowFastEnd;
inline constexpr bool kNarrowHeadThreads = (SMLA_SD_NARROW_ROLLED_STORES & 4) != 0;
static_assert(!kNarrowHeadThreads || (kNarrowRolledStores && kNarrowHeadOuts), "bit 4 takes bits 1 and 2 and the fast row end");
// A narrow wgmma kernel's consumer and producer registers (setmaxnreg). With the batched read-back
// above the 32-row fp8_model1 consumer fits 200 (with the loop before it spilled 44 bytes there),
// and its producers take the 8 released: at 144 ptxas spilled 8 bytes inside their loop (make
// spills), at 152 none, with either row end.
template <int kRows, int kFmt>
inline constexpr int kRegsConsumerNarrowOf =
    kRows == 32 && kFmt == static_cast<int>(CacheFormat::fp8_model1) ? 200 : kRegsConsumerNarrow;
template <int kRows, int kFmt>
inline constexpr int kRegsProducerNarrowOf =
    (cta_threads(kRows) / 128 * launch_regs(cta_threads(kRows)) - kRegsConsumerNarrowOf<kRows, kFmt>) / 2;
static_assert(kRegsProducerNarrowOf<16, 0> == kRegsProducerNarrow, "the default narrow budget is config.h's");
// The same row end in the 64-row consumers (consumer_wide.cuh, consumer_alt.cuh,
// consumer_fp8.cuh: two rows a thread, once a unit). SMLA_SD_WIDE_FAST_END=1: a measurement build,
// level in a same-call A/B on an H100 (2026-12-05, µs: prefill d512 h64 620.7 -> 619.2, d512 h128
// 2218 -> 2215, V3.2 b128 h64 123.9 -> 123.9, dense bf16 h128 506 -> 504), so not the default.
#ifndef SMLA_SD_WIDE_FAST_END
#define SMLA_SD_WIDE_FAST_END 0
#endif
inline constexpr bool kWideFastEnd = SMLA_SD_WIDE_FAST_END != 0;
// SMLA_SD_RAW_PREFETCH=D (a measurement build; 0 default, none): the raw ring's producer lanes
// also prefetch their row of block i + D into L2 (prefetch.global.L2, every 128-byte line of it)
// after issuing block i's copy, so that more of the gathers are in flight than the ring's slots
// hold. A topk sweep of b128 h16 (2026-12-05, µs: topk 512 30.0, 1024 44.9, 2048 68.1, 4096
// 112.8) costs ~1.4 µs a block at the margin but ~1.9 a block inside a 32-block run (timeline,
// 2026-12-01), the pace of two slots in flight against a loaded DRAM latency of ~3.5 µs.
// Measured slower (same call on an H100, 2026-12-05, µs, D = 0 / 2 / 4 / 8): b128 h16 91.9 / 98.8
// / 123.5 / 135.5, h32 98.3 / 102.7 / 133.1 / 144.7, dense fp8 h16 231.9 / 230.3 / 269.0 / 379.5:
// the prefetches compete with the ring's own copies. (The TMA unit's cp.async.bulk.prefetch.L2
// of the rows was far slower still: producer_raw_ring.cuh.)
#ifndef SMLA_SD_RAW_PREFETCH
#define SMLA_SD_RAW_PREFETCH 0
#endif
inline constexpr int kRawPrefetch = SMLA_SD_RAW_PREFETCH;
// SMLA_SD_ROWS_EVICT_FIRST (default 4): the bulk row copies of the 16/32-row decode tiles (raw
// ring and kNarrowBulk; not prefill from the paged cache, whose rows other queries' CTAs read
// again) carry an L2 evict_first policy (gather.cuh), so the rows, read once, replace each other
// in L2 rather than the lines earlier work left there. 4: a sparse gather's rows only where the
// grid is one wave (no more CTAs than SMs: these tiles run one CTA an SM), the dense walk's runs
// of rows always; 1: every copy; 2: every copy and the dense page walk's boxes
// (dense_page_walk.cuh); 3: every copy of a unit's first half of blocks; 0: none (1-3 are
// measurement builds). On an H200 (bench/micro/l2_dirty_lines.cu, 128 CTAs gathering 656-byte
// rows into a 4-slot ring, 32 blocks each): 54.4 -> 50.1 µs after a flush that leaves L2 clean,
// 61.3 -> 57.8 after the benchmarks' memset flush, whose dirty lines cost ~7 µs of write-backs
// without the policy; a fraction of 0.5 or 0.25 of the lines gains nothing. On an H100 the same
// gather in one wave 86.1 -> 83.2 after the memset, in two waves (256 CTAs) 149.6 -> 154.6: the
// second wave loses. Same-call A/Bs with 1 (2026-12-05, two H200s, µs): V3.2 b128 h16 67.5 ->
// 64.8 and 69.0 -> 66.5, h32 85.2 -> 84.3, dense fp8 h16 178.8 -> 176.8 and 179.3 -> 175.2, b1 /
// b8 h128 and V4 h32 level, s_q2 h16 (two waves) 118.6 -> 119.1 and 120.3 -> 121.5; on an H100 with
// 0 / 1 / 4: h16 91.5 / 89.0 / 88.9, h32 97.5 / 94.7 / 94.8, s_q2 h16 161.7 / 162.6 / 161.8, and
// 3 slower than 0 on every row. With 2, dense bf16 h16 level to -1%, h128 478.8 -> 480.1. The
// packed 64-row producers' loads with the policy (their lines come in by plain L2 prefetches
// first) were level on six rows.
#ifndef SMLA_SD_ROWS_EVICT_FIRST
#define SMLA_SD_ROWS_EVICT_FIRST 4
#endif
inline constexpr bool kRowsEvictFirst = SMLA_SD_ROWS_EVICT_FIRST >= 1;
inline constexpr bool kBoxesEvictFirst = SMLA_SD_ROWS_EVICT_FIRST == 2;
inline constexpr bool kRowsEvictFirstHalf = SMLA_SD_ROWS_EVICT_FIRST == 3;
inline constexpr bool kRowsEvictFirstOneWave = SMLA_SD_ROWS_EVICT_FIRST == 4;
// SMLA_SD_LANE_OPAQUE (measurement build): the one-unit unpaired 64-row fp8_ds_mla producer
// takes its lane's fields from a shuffled thread index (producer.cuh ProducerLane), which ptxas
// keeps in registers where it re-read the index with four S2R a block (~7% of the kernel's stall
// samples, ncu of f3d98e8). Its persistent sibling would spill (20 bytes), so it keeps S2R.
#ifndef SMLA_SD_LANE_OPAQUE
#define SMLA_SD_LANE_OPAQUE 0
#endif
template <int kFmt, bool kAloneFirst>
inline constexpr bool kLaneOpaque =
    SMLA_SD_LANE_OPAQUE != 0 && kAloneFirst && kFmt == static_cast<int>(CacheFormat::fp8_ds_mla);
inline constexpr int kIndexQueue = 4;
inline constexpr int kPairIndexQueue = SMLA_SD_PAIR_QUEUE;
inline constexpr int kPairPrefetch = SMLA_SD_PAIR_PREFETCH;
inline constexpr int kWideIndexQueue = SMLA_SD_WIDE_QUEUE;
// SMLA_SD_CONVERT_EARLY=n (a measurement build, default 0): a pair's producer dequantizes the first
// n 64-byte latent chunks of its row into registers before it waits for the consumers to free the
// stage, then stores them and converts the rest (producer.cuh store_and_hand_over); n >= the
// row's chunks (8 fp8_ds_mla, 7 fp8_model1) converts the whole row first.
// SMLA_SD_CONVERT_EARLY_WIDE=n: the same for the unpaired 64-row producers (n chunks of each of
// their two rows). Now most of the conversion runs after that wait (SASS: in the fp8_ds_mla
// persistent pair kernel 25 of a block's 384 FMUL / F2FP / HADD2 before it), so a stage freed late
// is filled late by the conversion's length. That kernel's builds that ran 4% (Q by the TMA unit)
// and 7.5% (SMLA_SD_WORK_NO_INIT) slower put less of it before the wait (2, 6; twenty-seventh
// pass). ptxas places the conversion, not the source order: where it stays after the wait
// in these builds is in PERF.md (twenty-seventh pass, item 4). Spill instructions (SASS, 2026-12-02): none in the fp8_model1 pair
// kernels at n = 2 and 4 (at 6 only the persistent one is free, at 8 neither) nor in its unpaired
// ones at _WIDE = 2 (persistent) and 4; the fp8_ds_mla one-unit pair is free at 2 (39 at 4), its
// persistent pair spills in the consumers at 2 (125) and 4 (12), its unpaired ones at _WIDE = 4
// 30 (one-unit) and 6.
#ifndef SMLA_SD_CONVERT_EARLY
#define SMLA_SD_CONVERT_EARLY 0
#endif
// Default -1: each unpaired 64-row decode kernel its measured n (twenty-eighth pass, same call,
// µs, 0 / 2 / 4): fp8_model1 4 (V4 h64 one-unit 43.6 / 43.2 / 42.9, V4 s_q2 h64 persistent 80.5
// / 79.5 / 77.4), fp8_ds_mla persistent 2 (s_q2 h64 230.7 / 219.6 / 237.6), its one-unit kernel
// 0 (h64 119.3 / 124.8 / 128.4: 12 and 30 spill instructions). Paged sparse prefill's unpaired
// kernels SMLA_SD_CONVERT_EARLY_PREFILL, default 4 (s_q4096 h64 topk2048, ms, 0 / 2 / 4:
// fp8_ds_mla 3.439 / 3.759 / 3.333, fp8_model1 3.182 / 3.000 / 3.000). A value >= 0 of
// SMLA_SD_CONVERT_EARLY_WIDE sets every one. The pairs at 2 were slower (V4 s_q2 h128 200.5 ->
// 204.3, V4 h128 106.4 -> 108.3): 0.
#ifndef SMLA_SD_CONVERT_EARLY_WIDE
#define SMLA_SD_CONVERT_EARLY_WIDE -1
#endif
#ifndef SMLA_SD_CONVERT_EARLY_PREFILL
#define SMLA_SD_CONVERT_EARLY_PREFILL 4
#endif
inline constexpr int kPairConvertEarly = SMLA_SD_CONVERT_EARLY;
template <int kRows, int kFmt, bool kPersist, bool kLogits>
inline constexpr int kConvertEarlyWide =
    kRows != 64 ? 0
    : SMLA_SD_CONVERT_EARLY_WIDE >= 0 ? SMLA_SD_CONVERT_EARLY_WIDE
    : kLogits ? SMLA_SD_CONVERT_EARLY_PREFILL
    : kFmt == static_cast<int>(CacheFormat::fp8_model1) ? 4
    : kFmt == static_cast<int>(CacheFormat::fp8_ds_mla) && kPersist ? 2
                                                                    : 0;
// (Converting them before the pair producer issues the next block's loads, whose 40 registers are
// live beside the conversion, spilled as much or more: fp8_ds_mla pairs 42-191 spill
// instructions at n = 4-8, 2026-12-02, SASS only.)
template <int kFmt>
inline constexpr int kWidePrefetchOf = kFmt == static_cast<int>(CacheFormat::fp8_e4m3) ? 2 : SMLA_SD_WIDE_PREFETCH;
static_assert(kPairIndexQueue >= 4 && kPairPrefetch >= 2 && kPairPrefetch < kPairIndexQueue,
              "a pair's producer loads rows from v[1] and prefetches from v[kPairPrefetch]");
static_assert(kWideIndexQueue >= 4 && SMLA_SD_WIDE_PREFETCH >= 1 && SMLA_SD_WIDE_PREFETCH < kWideIndexQueue,
              "an unpaired 64-row producer loads rows from v[0] and prefetches from v[SMLA_SD_WIDE_PREFETCH]");
// The formats whose 64-row tiles the packed producer converts (produce_packed).
constexpr bool packed_rows(int fmt) {
  return fmt == static_cast<int>(CacheFormat::fp8_ds_mla) || fmt == static_cast<int>(CacheFormat::fp8_model1) ||
         fmt == static_cast<int>(CacheFormat::fp8_e4m3);
}
// One-unit unpaired 64-row CTAs of bf16 rows (sparse prefill, bf16 sparse decode, dense decode
// off the TMA path) launch two producer warpgroups as well, one 32-key round of every block each:
// half the copies a thread (18 instead of 36 at d_qk 576), so a freed tile refills sooner. Same-
// call A/B (2026-12-03, µs, one warpgroup -> two): prefill d512 h128 k1024 sink 2303 / 2299 ->
// 2199 / 2196, d512 h64 k512 sink 719 / 718 -> 686 / 686, d576 h128 4553 / 4706 / 4673 -> 4587 /
// 4549 / 4632; bf16 sparse decode b128 h128 177.8 / 177.9 -> 176.4 / 175.3; the producer alone
// (variant 7) d576 h128 2907 -> 2543, d512 h64 504 -> 466; again (the next call, two -> one):
// d512 h128 2175 / 2192 -> 2268 / 2346, d576 h128 4629 / 4586 / 4593 -> 4252 / 4733 / 4764 (the
// GPU cool at the first), decode 178.9 / 178.7 -> 180.0 / 180.5. SMLA_SD_BF16_TWO_PRODUCERS=0 (a
// measurement build): one producer warpgroup, two rounds a thread.
#ifndef SMLA_SD_BF16_TWO_PRODUCERS
#define SMLA_SD_BF16_TWO_PRODUCERS 1
#endif
#ifndef SMLA_SD_BF16_PERSISTENT  // (documented below, at kBf16Persistent)
#define SMLA_SD_BF16_PERSISTENT 2
#endif
template <int kRows, int kFmt, bool kPair, bool kPersist = false>
inline constexpr bool kTwoProducers =
    (SMLA_SD_WIDE_PRODUCERS >= (kPersist ? 3 : 2) && kRows == 64 && !kPair && packed_rows(kFmt)) ||
    (SMLA_SD_BF16_TWO_PRODUCERS != 0 && kRows == 64 && !kPair && (!kPersist || SMLA_SD_BF16_PERSISTENT >= 2) &&
     kFmt == static_cast<int>(CacheFormat::bf16));
// (SMLA_SD_Q_TAIL_RS=1, WG0 of these kernels running QK^T's last four k-steps with Q's last 64
// columns from registers, 16 of them taken from the producers: 8 KB less shared-memory traffic a
// block, for the power-capped 128-head prefill rows. Level in a same-call A/B at 90 replays
// (2026-12-03, µs): prefill d576 h128 4637 / 4659 -> 4642 / 4641, d512 h128 k1024 sink 2394 ->
// 2410; removed.)
// The kernels kFirstBlockAlone applies to: one-unit unpaired 64-row sparse decode (two producer
// warpgroups), not sparse prefill (kLogits) nor the dense fp8_e4m3 cache.
template <int kRows, int kFmt, bool kPair, bool kLogits>
inline constexpr bool kFirstAlone = kFirstBlockAlone && kTwoProducers<kRows, kFmt, kPair, false> && packed_rows(kFmt) &&
                                    !kLogits && kFmt != static_cast<int>(CacheFormat::fp8_e4m3);
// Threads of a kernel instance: cta_threads, or 512 with three raw-ring consumer warpgroups or
// two wide producer warpgroups.
template <int kRows, int kFmt, bool kPair = false, bool kPersist = false>
constexpr int kernel_threads() {
  return kRawWgs<kRows, kFmt> == 3 || kTwoProducers<kRows, kFmt, kPair, kPersist> ? 512 : cta_threads(kRows);
}
// Measurement build SMLA_SD_BF16_ASYNC_ARRIVE=1: in the 64-row bf16-row kernels each producer
// thread's copies complete "full" by themselves (cp.async.mbarrier.arrive.noinc; one more
// arrival a warp for its valid words), so no producer thread waits for its loads; the
// consumers fence after their wait instead (the copies are generic-proxy writes). Level with
// the early hand-over (same call, two runs, µs): prefill d576 h128 4568 / 4644 -> 4637 / 4450,
// d512 h128 2300 / 2304 -> 2267 / 2294, d512 h64 721 -> 704; bf16 decode within 1% (2026-12-03).
#ifndef SMLA_SD_BF16_ASYNC_ARRIVE
#define SMLA_SD_BF16_ASYNC_ARRIVE 0
#endif
template <int kRows>
inline constexpr bool kBf16AsyncArrive = SMLA_SD_BF16_ASYNC_ARRIVE != 0 && kRows == 64;  // not with SMLA_SD_BF16_PAIRS
// A kernel instance whose K tiles complete that way (its consumers fence after "full").
template <int kRows, int kFmt>
inline constexpr bool kCopiesArrive = kBf16AsyncArrive<kRows> && kFmt == static_cast<int>(CacheFormat::bf16);
// Producer threads of a kernel instance (the arrivals on a K tile's "full" barrier).
template <int kRows, int kFmt, bool kPair = false, bool kPersist = false>
constexpr int kernel_producer_threads() {
  const int threads = kTwoProducers<kRows, kFmt, kPair, kPersist> ? 256 : producer_threads(kRows);
  return kCopiesArrive<kRows, kFmt> ? threads + threads / 32 : threads;  // kCopiesArrive: and each warp's valid words
}
// kTwoProducers: each producer warpgroup's registers beside WG0's and WG1's.
inline constexpr int kRegsProducerTwo = (4 * launch_regs(512) - kRegsWg0 - kRegsWg1) / 2;
static_assert(kRegsProducerTwo % 8 == 0 && kRegsProducerTwo >= 56, "two-producer register budget");
// A 64-row kernel instance's producer registers (setmaxnreg).
template <int kRows, int kFmt, bool kPair, bool kPersist>
constexpr int producer_regs_wide() {
  return kTwoProducers<kRows, kFmt, kPair, kPersist> ? kRegsProducerTwo : kRegsProducerWide;
}
// Raw-ring tiles load Q once (consumer_narrow_raw.cuh, load_q_f16): each warp keeps its rows in
// registers between their maxima and the conversion. Q's loads took ~6% of the samples of the
// 16-row fp8_ds_mla kernel (ncu), a one-wave launch whose CTA start is not overlapped. Against two
// passes over Q, the second from L2 (same-seed A/B, 2026-12-01): dense fp8 b128 h16 L8k 197.9 ->
// 192.9 µs, h32 254.2 -> 245.3, s_q2 h16 340.2 -> 335.4, b1 h16 53.6 -> 51.7; sparse V3.2 h16
// 72.1 -> 69.3, s_q2 h16 126.4 -> 121.8. SMLA_SD_Q_ONE_PASS=0 (a measurement build): two passes.
// ptxas issues a later row's RoPE chunk (lanes 0-7) only in that row's turn; coherent loads and a
// fence that kept all of them up front were level on an H100 (b128 h32 -0.15%, b1 h128 and h16
// level), Q's marks unchanged: the rows' traffic into the SM, not the order, holds Q (PERF.md,
// sixty-fourth pass). That build is removed.
#ifndef SMLA_SD_Q_ONE_PASS
#define SMLA_SD_Q_ONE_PASS 1
#endif
inline constexpr bool kQOnePass = SMLA_SD_Q_ONE_PASS != 0;
// (Loading each 64-column group of a block's K pieces one group ahead of its conversion, since
// ncu put 8% of the 16-row fp8_ds_mla consumer loop's stall samples on conversions waiting for
// their shared-memory loads, measured level: sparse V3.2 h16 69.2 -> 69.2 / 69.5 µs, dense fp8
// h16 L8k 180.8 -> 181.0, s_q2 h16 327.5 -> 329.8 (same-call A/B, 2026-12-01); removed.)
// Raw-ring consumers rescale O^T lazily (narrow_block_softmax's kLazy): only when some head's
// maximum grows by more than 2^8, not at every new maximum (the 64-row tiles' rule,
// kLazyRescale); kernels that return max_logits keep the exact rule. P then reaches 2^8, so the
// fp8_ds_mla P^T tiles (P . scale . 2^60, bf16) hold scales up to 2^60. Same-call A/B
// (2026-12-01): sparse V3.2 h32 93.0 -> 92.3 µs, s_q2 h16 118.9 -> 118.4, h16 level; dense fp8
// h32 216.8 -> 213.1, h16 level. SMLA_SD_RAW_LAZY=0 (a measurement build): at every new maximum.
#ifndef SMLA_SD_RAW_LAZY
#define SMLA_SD_RAW_LAZY 1
#endif
template <bool kMaxLogits>
inline constexpr bool kRawLazy = SMLA_SD_RAW_LAZY != 0 && !kMaxLogits;
// Named barriers of the second consumer warpgroup (the first uses kBarMerge and kBarPReady);
// kBarFinal joins both at the epilogue. (compute-sanitizer's racecheck reports hazards in that
// merge; it reports the same on a race-free kernel whose warpgroups pass their own barriers a
// different number of times before a shared one, bench/micro/racecheck_named_barriers.cu.)
inline constexpr int kBarMerge2 = 12, kBarPReady2 = 13;
inline constexpr int kBarMerge3 = 14, kBarPReady3 = 15;  // the third (SMLA_SD_RAW_WGS=3)
// kRawSplitDv tiles (32 rows, never three warpgroups): both warpgroups' partial S^T are in xchg.
inline constexpr int kBarXchg = 14;
#ifndef SMLA_SD_RAW_RING
#define SMLA_SD_RAW_RING 4
#endif
inline constexpr int kRawRing = SMLA_SD_RAW_RING;
// The raw ring's first fill: the producer issues only kRawFirstFill slots of it at once, each
// later slot of it once block i - N's rows are in (its full barrier's first phase). Every CTA of
// a wave fills its ring at the same moment, so the first block's rows share the memory with every
// slot behind them: on an H100 (2026-12-06, roles b128 h32, per-block marks, SMLA_SD_TIMELINE=4)
// the first rows land 12.9 µs after the CTA's entry with three slots in flight, 10.8 with two,
// while the steady pace (~2.1 µs a block) is the same. Same call on an H200 (fifty-sixth pass,
// µs, all slots / two / one): the 32-row fp8_ds_mla decode roles b128 h32 79.3 / 77.8 / 76.5,
// s_q2 h32 150.3 / 149.8 / 147.4, the halves b128 h32 85.2 / 84.7 / 83.2; but the 16-row tiles
// b128 h16 66.5 / 66.6 / 67.4, b1 h128 16.4 / 16.5 / 16.6, dense fp8 h16 175.0 / 175.2 / 176.5.
// On an H100 (same call, default rule, µs, whole fill -> one slot): b128 h32 95.1 -> 93.5, s_q2
// h32 172.7 -> 171.4, b64 h32 59.1 -> 58.5, b8 h32 25.9 -> 24.3, but b1 h32 17.0 -> 17.2, whose
// few CTAs do not contend: the limit holds only where the grid's CTAs fill half the SMs or more
// (gather.cuh grid_fills_half_the_sms, at run time).
// SMLA_SD_RAW_FIRST_FILL: -1 (default) one slot for the 32-row fp8_ds_mla decode tiles (kReadOnce:
// not the paged prefill's), all elsewhere; N >= 1 (a measurement build) N slots for every raw
// ring; 0 all slots everywhere (the kernels before the fifty-sixth pass).
#ifndef SMLA_SD_RAW_FIRST_FILL
#define SMLA_SD_RAW_FIRST_FILL -1
#endif
// Measurement build SMLA_SD_RAW_CP_ASYNC=1: the fp8_ds_mla raw rings' rows copied by 16-byte
// cp.async (every lane of the producer warps, 41 pieces a row; an arrive.noinc a thread and block)
// instead of one cp.async.bulk a row. Why: the TMA unit takes ~0.9 µs to accept a block's 64 row
// copies however many warps issue them (bench/micro/bulk_issue_rate.cu, an H100, 2026-12-06),
// the roles' ~1.0 µs from a slot's release to its copies issued; bench/micro/row_copy_path.cu
// times both paths on the same gather. Same call on an H100 (2026-12-06, µs, two reps, bulk ->
// cp.async; docs/PERF.md fifty-seventh pass): the roles b128 h32 89.0 -> 87.7, b8 h32 24.2 -> 23.7,
// but the halves b128 h32 87.7 -> 89.6, s_q2 h32 164.2 -> 170.0, b128 h16 85.1 -> 86.2, b1 h128
// 16.6 -> 17.5: the pieces' shared-memory writes slow WG0 (2.24 -> 2.46 µs a block). On an H200
// (sixty-first pass) the roles b128 h32 77.0 -> 86.5, s_q2 h32 148.1 -> 169.3.
#ifndef SMLA_SD_RAW_CP_ASYNC
#define SMLA_SD_RAW_CP_ASYNC 0
#endif
template <int kFmt>
inline constexpr bool kRawCpAsync = SMLA_SD_RAW_CP_ASYNC == 1 && kFmt == static_cast<int>(CacheFormat::fp8_ds_mla);
// Arrivals on a raw ring slot's "full" barrier a phase: the copying lanes' arrive.expect_tx, or
// with kRawCpAsync every producer thread's arrive.noinc.
template <int kRows, int kFmt>
inline constexpr int kRawFullArrivals =
    kRawCpAsync<kFmt> ? kernel_threads<kRows, kFmt>() - raw_consumer_threads<kRows, kFmt>() : kKeys;
template <int kRows, int kFmt, bool kReadOnce>
inline constexpr int kRawFirstFill =
    SMLA_SD_RAW_FIRST_FILL >= 0 ? SMLA_SD_RAW_FIRST_FILL
                                : (kReadOnce && kRows == 32 && kFmt == static_cast<int>(CacheFormat::fp8_ds_mla) ? 1 : 0);
// Measurement build SMLA_SD_RAW_RING16=n: a ring of n slots in the 16-row tiles (32-row tiles
// keep kRawRing; fp8_ds_mla's 43 KB slots fit four); n a multiple of the consumer warpgroups
// (RingSmem's assert). Five slots measured level with four (dense fp8 b128 h16 L8k 209.4 -> 208.1
// µs, s_q2 h16 365.6 -> 364.4, 2026-12-01), but five do not give each warpgroup its own slots, so
// that build could read rows before they landed: the figure does not count.
#ifndef SMLA_SD_RAW_RING16
#define SMLA_SD_RAW_RING16 SMLA_SD_RAW_RING
#endif
// Rows of a ring slot lie 608 bytes apart for fp8_e4m3 (576 + 32: 96 mod 128) and 672 for
// fp8_ds_mla (656 + 16: 32 mod 128), so the lanes of a quarter warp that read four consecutive
// rows, or two rows two apart, hit distinct banks.
// Measurement build SMLA_SD_E4M3_RUNS=1 (dense fp8_e4m3 on the raw ring): rows 576 bytes apart (the
// cache's own pitch, two-way bank conflicts on the consumers' reads), so that a producer lane
// copies a run of rows contiguous in the cache (at page 64, a warp's 16 rows) with one bulk copy
// instead of one per row: 4 copies per block instead of 64. Same-seed A/B (2026-12-01): level at
// page 64 (b128 h16 L8k 191.0 -> 192.5 µs; h32 241.9 -> 249.0, the conflicts), faster at page 16
// (201.8 -> 193.6): the copies' count does not limit the page-64 rows.
#ifndef SMLA_SD_E4M3_RUNS
#define SMLA_SD_E4M3_RUNS 0
#endif
inline constexpr bool kE4m3Runs = SMLA_SD_E4M3_RUNS != 0;
// The 32-row fp8_ds_mla raw-ring consumer (kRawSplitDv) loads its 32 value words of a block's P V
// into registers once S^T is whole and hands the slot back before its softmax: each of the three
// slots is held about half as long. Same-call A/B (2026-12-01) against releasing after P V
// (SMLA_SD_RAW_EARLY_V=0, a measurement build): sparse b128 h32 91.0 -> 89.4 µs (twice), s_q2
// h32 173.8 -> 170.6, h24 90.0 -> 88.3. The 16-row tiles' four slots measured level to slower
// with the same change (consumer_narrow_raw.cuh, raw_block_end).
#ifndef SMLA_SD_RAW_EARLY_V
#define SMLA_SD_RAW_EARLY_V 1
#endif
inline constexpr bool kRawEarlyV = SMLA_SD_RAW_EARLY_V != 0;
// SMLA_SD_E4M3_WIDE (default 1): dense decode of an fp8_e4m3 cache at h_q > 32, with bf16 or
// fp8 q, on the 64-row tiles (two-CTA pairs for 128 heads) instead of the generic kernel: the
// packed producer converts each row's 576 e4m3 values exactly to bf16 (PackedRow<fp8_e4m3>, the
// per-tensor scale already in the logits' scale and O's), and fp8 q converts exactly to bf16 in
// load_q. Same-call A/B (2026-12-01, b128 L8192 page 64): fp8 q s_q2 h128 3501 -> 1384 µs, bf16
// q s_q1 h128 1763 -> 699; fp8 q b1 h128 59.3 -> 78.2 (see takes_dense for small batches).
#ifndef SMLA_SD_E4M3_WIDE
#define SMLA_SD_E4M3_WIDE 1
#endif
inline constexpr bool kE4m3Wide = SMLA_SD_E4M3_WIDE != 0;
// Measurement build SMLA_SD_RAW_NO_COPY=1 (wrong results): the raw ring's producer copies
// nothing and hands over zeroed rows, so a run times the consumer warpgroups alone (2026-12-01,
// against the full kernel: sparse V3.2 b128 h16 68.2 -> 51.9 µs, s_q2 h16 121.0 -> 98.9, b32 h16
// 35.0 -> 25.8; dense fp8 h16 181.1 -> 147.6, h32 227.4 -> 207.0).
#ifndef SMLA_SD_RAW_NO_COPY
#define SMLA_SD_RAW_NO_COPY 0
#endif
inline constexpr bool kRawNoCopy = SMLA_SD_RAW_NO_COPY != 0;
template <int kFmt>
inline constexpr int kRawRingStride = kFmt == static_cast<int>(CacheFormat::fp8_ds_mla) ? 672 : kE4m3Runs ? 576 : 608;
// Registers of kRawConsumer tiles: the copy-only producers need few, the consumer holds O^T,
// S^T, a block's raw pieces and two sets of converted fragments. The 32-row kernel spills 20
// bytes (five values stored and reloaded once per block); more for the consumer spilled more.
inline constexpr int kRegsConsumerRaw = 216, kRegsProducerRaw = 144;
static_assert(kRegsConsumerRaw + 2 * kRegsProducerRaw <= 3 * launch_regs(cta_threads(16)), "ring register budget");
// kRawWgs 2: two consumer warpgroups at kRegsConsumerRawDual, the one producer warpgroup with the
// rest (72). The 32-row fp8_e4m3 kernel spills 36 bytes at 216 (ptxas; 60 before P^T's packed
// stores, consumer_narrow_raw.cuh; 128 at 224 before the upper-half conversion, fp8.cuh).
inline constexpr int kRegsConsumerRawDual = kRegsConsumerRaw;
inline constexpr int kRegsProducerRawDual = 3 * launch_regs(cta_threads(16)) - 2 * kRegsConsumerRawDual;
static_assert(kRegsProducerRawDual >= 56, "dual ring register budget");
// kRawRoles: WG0 (S^T, the softmax) and WG1 (O^T; with SMLA_SD_DS32_ROLES_EARLY_V a block's 64
// value words beside it, the slot returned before its P V) at their own budgets, the producer's
// as above. Early V, same call on an H100 (2026-12-05, µs): b128 h32 98.2 -> 97.9 (default
// 95.2), s_q2 h32 176.2 -> 178.1, b8 h32 31.0 -> 32.0: the slot's hold is not what the roles lose.
#ifndef SMLA_SD_DS32_ROLES_EARLY_V
#define SMLA_SD_DS32_ROLES_EARLY_V 0
#endif
inline constexpr bool kRolesEarlyV = SMLA_SD_DS32_ROLES_EARLY_V != 0;
// Measurement build SMLA_SD_DS32_ROLES_V_FIRST=1: in the roles WG1 loads block i's 64 value words
// and releases the slot as soon as its P V of block i - 1 has drained and the rows are in, then
// waits for WG0's hand-over of block i; by default it waits for the hand-over first. Why: on an
// H200 h32's pace is bound both by WG0 (~2.07 µs a block) and by the ring's turn over three slots
// (~3.1 µs in flight, ~3.1 held, ~1.0 from release to issue: docs/PERF.md fifty-sixth pass); the
// hold spans WG0's whole block, which WG1's value loads need not wait for. Same call on an H100
// (2026-12-06, roles forced, three reps, µs): b128 h32 88.8 -> 91.2, s_q2 h32 164.1 -> 168.5, h24
// 88.0 -> 90.5, b64 s_q2 h32 88.6 -> 91.6; the rows then take 4.6 µs from issue to WG0's wait
// against 3.1 (more in flight on a gather-bound card, as with a fourth slot). On an H200 (the
// sixty-first pass, three reps) level: b128 h32 77.0 -> 76.7, s_q2 h32 148.1 -> 147.0, h24 75.7 -> 75.6.
#ifndef SMLA_SD_DS32_ROLES_V_FIRST
#define SMLA_SD_DS32_ROLES_V_FIRST 0
#endif
inline constexpr bool kRolesVFirst = SMLA_SD_DS32_ROLES_V_FIRST != 0;
// Measurement build SMLA_SD_DS32_ROLES_KT=1: in the run-time roles decode kernel two of the four
// producer warps issue the row copies (a lane a row) and the other two convert each block's 512
// latent columns to f16 (exact) into a 32 KB half tile, 256 columns at a time, in S^T's logical
// column order (ds_block.cuh ds_convert_kt); WG0 takes those columns' S^T from it by SS wgmma
// (the RoPE columns still from its registers) instead of converting 256 values a thread itself.
// Why: on an H200 WG0 is h32's bound (~1,090 instructions a block, 128 of them conversions and
// ~60 loads feeding the register operands; S^T 1.12 of its ~2.07 µs a block, docs/PERF.md
// fifty-sixth and fifty-seventh passes), and the producer warps are idle half of a block.
// Shared memory: 186 + 32 KB with three slots. Measured (2026-12-06, an H100, roles forced, µs):
// b128 h32 89.1 -> 105.6, s_q2 h32 164.0 -> 198.5, h24 88.2 -> 103.6; the consumers alone
// (SMLA_SD_RAW_NO_COPY=1) 71.9 -> 100.6: two warps converting 32 KB a half tile through shared
// memory are slower than WG0 converting from registers (docs/PERF.md, fifty-eighth pass). Off.
#ifndef SMLA_SD_DS32_ROLES_KT
#define SMLA_SD_DS32_ROLES_KT 0
#endif
inline constexpr bool kRolesKtSwitch = SMLA_SD_DS32_ROLES_KT != 0;
inline constexpr int kDsKtThreads = 64;  // the converting producer threads (two warps)
// SMLA_SD_DS32_ROLES_SPLIT_ST=T (default 2; 0, 1: measurement builds): in the run-time roles decode
// kernel WG1 takes the last T scale tiles' partial S^T of block i + 1 (and their fold with the
// keys' scales) before its P V of block i, and hands WG0 the sums through shared memory (two 8 KB
// buffers by block parity, one named barrier each); WG0 takes the other tiles and the RoPE columns.
// WG0 was the roles' bound (S^T ~1.1 of its ~2.1-2.2 µs a block) while WG1 waited ~1.1 µs a block
// for it. Predicted -15% on the consumers' pace; measured (2026-12-06, an H100, roles forced, two
// reps, µs, 0 -> 1 -> 2): b128 h32 92.67 / 92.13 -> 91.57 / 91.78 -> 91.50 / 91.49, s_q2 h32 171.0 /
// 170.9 -> 169.9 / 170.0 -> 168.5 / 168.6, h24 91.58 / 91.58 -> 92.00 / 91.66 -> 91.30 / 91.31, b8
// h32 30.58 / 30.58 -> 29.66 / 29.49 -> 30.14 / 29.92; the consumers alone (SMLA_SD_RAW_NO_COPY=1)
// b128 h32 71.97 -> 71.97 -> 69.94, s_q2 h32 138.0 -> 138.6 -> 134.7. WG0's S^T mark 1.06 -> 0.67
// µs, but it then waits for WG1's sums and WG1 for its hand-over: the two share the SM's issue and
// tensor pipe, so the work moved is not all saved (docs/PERF.md, fifty-eighth pass).
#ifndef SMLA_SD_DS32_ROLES_SPLIT_ST
#define SMLA_SD_DS32_ROLES_SPLIT_ST 2
#endif
inline constexpr int kRolesSplitStTiles = SMLA_SD_DS32_ROLES_SPLIT_ST;
static_assert(kRolesSplitStTiles >= 0 && kRolesSplitStTiles <= 2, "SMLA_SD_DS32_ROLES_SPLIT_ST: 0, 1 or 2 scale tiles");
inline constexpr int kBarRolesSt = 12;  // + block parity: WG1 -> WG0, its tiles' sums of the block are in (ids of other kernels' warpgroups)
// Measurement build SMLA_SD_LEAN_STEP=mask (default 0), fewer instructions in the 32-row roles'
// WG0 a block: 1, the f16 P^T words (ds_write_pt) as one HMUL2 each of P and the tile factors
// packed to f16x2 once (three f16 roundings of 2^-11, below the bf16 P's one of 2^-8; ~52
// instructions fewer a block); 4, the fold started from WG1's sums (16 FADD fewer). Bit 2 (each
// head's factor of O^T only when some head of the warp moved its maximum, behind a vote and a
// branch; code in bc6c8dd) was slower and is gone. Same call on an H100 (2026-12-07, roles forced,
// 90 replays, µs, default -> 7 / 1 / 2): b128 h32 88.02 / 88.00 -> 88.11 / 88.27, 88.14 / 87.79,
// 88.83 / 88.54; s_q2 h32 161.5 -> 162.3 / 161.3 / 162.5; h24 87.26 -> 87.79 / 87.34 / 87.87; b1
// h128 16.67 -> 16.77 / 16.67 / 16.86; default -> 5 (another call): b128 h32 88.08 / 88.03 ->
// 87.89 / 87.78, s_q2 h32 161.6 -> 161.5, h24 87.34 -> 87.26; the consumers alone
// (SMLA_SD_RAW_NO_COPY=1) b128 h32 69.98 / 69.47 -> 69.70 / 69.02, s_q2 h32 134.6 -> 132.6, h24
// 68.86 -> 68.45. Marks (b128 h32): WG0's P^T and hand-over 320-352 -> 288 ns, its pace the same
// (1.92 µs a block alone, ~2.1 with copies), because WG1 is as busy: its P V ~1.0 µs, the next
// block's two tiles of S^T ~0.77, ~0.16 at the hand-over (docs/PERF.md sixty-fifth pass). A third
// call (another H100), default -> 5: b128 h32 87.63 / 87.33 -> 87.31 / 87.10, s_q2 h32 and h24
// level, the consumers alone -0.7 to -0.9%. And the other way round, bit 8 (code in b726fd1: WG1
// handing its two tiles' sums unfolded, WG0 folding all four): the consumers alone +1.0 to +1.3%
// with 13 (WG1's span the same 768 ns, its 8 KB more of stores a block beside the fold it shed;
// WG0's longer); removed. Off by default: 0.2-1.5%, no target moves.
#ifndef SMLA_SD_LEAN_STEP
#define SMLA_SD_LEAN_STEP 0
#endif
static_assert((SMLA_SD_LEAN_STEP & ~5) == 0, "SMLA_SD_LEAN_STEP: bits 1 and 4");
inline constexpr bool kPtF16x2 = (SMLA_SD_LEAN_STEP & 1) != 0;
inline constexpr bool kFoldFromX = (SMLA_SD_LEAN_STEP & 4) != 0;
// SMLA_SD_ROLES_END_WG0 (default 1): in the 32-row roles WG0, done after its last block, joins
// WG1's epilogue stores (narrow_epilogue's helpers: 256 threads write the tile's 32 rows, 16
// pieces a thread instead of 32). ncu of b128 h32 (2026-12-06, an H100) had 21% of WG1's
// samples in its epilogue, two thirds of those in the store loop (most waiting for its
// instructions). Same calls on two H100s (2026-12-06, roles forced, 90 replays, two reps, us,
// =0 -> =1): b128 h32 91.97 / 91.94 -> 91.38 / 91.33 and 94.99 / 95.47 -> 94.82 / 94.94, h24
// 91.10 / 90.72 -> 90.59 / 90.11 and 94.40 / 94.54 -> 94.24 / 93.92. Not timed on an H200.
// =0 (a measurement build): WG1 alone.
#ifndef SMLA_SD_ROLES_END_WG0
#define SMLA_SD_ROLES_END_WG0 1
#endif
inline constexpr bool kRolesEndWg0 = SMLA_SD_ROLES_END_WG0 != 0;
// Measurement build SMLA_SD_ROLES_SHARED_Q=1: the 32-row roles' consumer warpgroups load Q
// (load_q_f16) before their role branches, at the entry register budget, so that one copy of its
// code serves both; by default each role inlines its own after its setmaxnreg. Why: with no row
// copies at all a roles CTA has Q in shared memory only 7.3-7.5 µs after its entry (an H100,
// docs/PERF.md sixty-first pass), where the 16-row tiles (one consumer branch) had their first
// block in ~3.3 µs after theirs at b1 h128 (forty-sixth pass; rows copied, another load); the
// run-time roles kernel is 117 KB of SASS, each role's first pass through its code cold after the
// benchmark's L2 flush. Same call on an H100 (2026-12-07, roles forced, 90 replays, µs, default
// -> shared): b128 h32 87.71 / 87.81 -> 87.58 / 87.52, b1 h128 16.77 -> 16.80, h16 84.98 -> 85.18.
// Level: not taken.
#ifndef SMLA_SD_ROLES_SHARED_Q
#define SMLA_SD_ROLES_SHARED_Q 0
#endif
inline constexpr bool kRolesSharedQ = SMLA_SD_ROLES_SHARED_Q != 0;
// Measurement build SMLA_SD_Q_PREFETCH_START=1: the raw-ring kernels (the 16- and 32-row fp8
// tiles) ask L2 for their unit's Q rows (prefetch_q_rows, a line a thread) as soon as the unit is
// known, before the barriers' setup and setmaxnreg, so that Q's trip from DRAM after the
// benchmark's L2 flush overlaps the start's first instructions instead of following them.
// Same call on an H100 (2026-12-07, roles forced, 90 replays, µs, default -> prefetch): b128 h32
// 87.71 / 87.81 -> 86.93 / 87.10, b1 h128 16.77 -> 17.23, h16 84.98 -> 85.33. Not taken.
#ifndef SMLA_SD_Q_PREFETCH_START
#define SMLA_SD_Q_PREFETCH_START 0
#endif
inline constexpr bool kQPrefetchStart = SMLA_SD_Q_PREFETCH_START != 0;
// Whether the roles of a 32-row tile load WG1's value words first: always on the split tiles'
// plan (kRolesOnSplitPlan), with the switch on their own (kRawRoles).
// The run-time roles kernel (kDs32Roles) always does.
template <int kRows, int kFmt, bool kDs32Roles = false>
inline constexpr bool kRolesEarlyVOf = kRolesEarlyV || kDs32Roles || !kRawRoles<kRows, kFmt, kDs32Roles>;
template <bool kEarlyV>
inline constexpr int kRegsRolesWg0 = kEarlyV ? 192 : kRegsConsumerRawDual;
template <bool kEarlyV>
inline constexpr int kRegsRolesWg1 = kEarlyV ? 240 : kRegsConsumerRawDual;
static_assert(kRegsRolesWg0<true> + kRegsRolesWg1<true> + kRegsProducerRawDual <= 3 * launch_regs(cta_threads(16)), "roles register budget");
#ifndef SMLA_SD_RAW_WGS_REGS
#define SMLA_SD_RAW_WGS_REGS 160
#endif
inline constexpr int kRegsConsumerRawTri = SMLA_SD_RAW_WGS_REGS, kRegsProducerRawTri = 4 * launch_regs(512) - 3 * kRegsConsumerRawTri;
static_assert(kRegsProducerRawTri >= 32, "three-warpgroup ring register budget");
template <int kRows, int kFmt>
inline constexpr int kRegsRawConsumer = kRawWgs<kRows, kFmt> == 3 ? kRegsConsumerRawTri
                                        : kRawWgs<kRows, kFmt> == 2 ? kRegsConsumerRawDual : kRegsConsumerRaw;
template <int kRows, int kFmt>
inline constexpr int kRegsRawProducer = kRawWgs<kRows, kFmt> == 3 ? kRegsProducerRawTri
                                        : kRawWgs<kRows, kFmt> == 2 ? kRegsProducerRawDual : kRegsProducerRaw;

// The shared-memory plan of kRawConsumer tiles. fp8_e4m3: Q as 576 f16 columns, one P^T.
// fp8_ds_mla: Q's 512 latent columns in f16 and its 64 RoPE columns in bf16, one P^T (bf16) per
// 128-column scale tile.
// kRawSplitDv: each warpgroup has the P^T tiles of its two scale tiles, and the partial S^T
// sums meet in xchg (float[2 parities][2 warpgroups][16][128]); three slots fit beside them.
// kDs32Roles: the plan of the run-time roles kernel (kRawRoles).
template <int kRows, int kFmt, bool kDs32Roles = false>
struct RingSmem {
  static constexpr bool kDs = kFmt == static_cast<int>(CacheFormat::fp8_ds_mla);
  static constexpr bool kSplitDv = kRawSplitDv<kRows, kFmt, kDs32Roles>;
  static constexpr bool kRoles = kRawRoles<kRows, kFmt, kDs32Roles>;
  static constexpr int kD = 576;
  static constexpr int kQCols = kDs ? 512 : 576;  // Q's f16 columns
  static constexpr int kPTiles = kDs ? (kSplitDv ? 2 : 4) : 1;  // per warpgroup (kRoles: one set, WG0 writes, WG1 reads)
  static constexpr int kWgs = kRawWgs<kRows, kFmt>;
  static constexpr int kPSets = kRoles ? 1 : kWgs;
  static constexpr int kRing = kSplitDv ? 3 : kRoles ? SMLA_SD_DS32_ROLES_RING : kRows == 16 ? SMLA_SD_RAW_RING16 : kRawRing;  // slots
  static constexpr bool kKt = kRolesKtSwitch && kDs32Roles && kRoles && kDs && kRows == 32;  // SMLA_SD_DS32_ROLES_KT
  static constexpr size_t kSlotBytes = static_cast<size_t>(kKeys) * kRawRingStride<kFmt>;
  static constexpr size_t q = 0;                                              // kRows x kQCols f16, core matrices, permuted
  static constexpr size_t q_rope = q + static_cast<size_t>(kRows) * kQCols * 2;  // kDs: kRows x 64 bf16, permuted
  static constexpr size_t p = q_rope + (kDs ? static_cast<size_t>(kRows) * 64 * 2 : 0);  // [kPSets] kPTiles x P^T (kRows x 64)
  static constexpr size_t kPBytes = static_cast<size_t>(kRows) * kKeys * 2;
  static constexpr size_t merge = p + kPSets * kPTiles * kPBytes;   // float[kWgs][2][4][32] head maxima
  static constexpr size_t heads = merge + kWgs * 2 * 4 * 32 * 4;   // kWgs > 1: float[2 (m, l)][kWgs][32], each state's heads
  static constexpr size_t qinv = heads + (kWgs > 1 ? 2 * kWgs * 32 * 4 : 0);  // float[32]: 2^(e - 15), Q's per-head factor undone
  static constexpr size_t xchg = qinv + 32 * 4;                    // kSplitDv: float[2][2][16][128]; kRoles: float[192] (RolesHand)
  static constexpr size_t bars = xchg + (kSplitDv ? 2 * 2 * 16 * 128 * 4 : kRoles ? 192 * 4 : 0);  // uint64 full[kRing], empty[kRing]
  static constexpr int kKtBars = kKt ? 2 : 0;                       // kKt: then kt_full, kt_empty
  static constexpr size_t ok = bars + (2 * kRing + kKtBars) * 8;   // uint8[kRing][64]: the row is real
  static constexpr size_t kt = (ok + kRing * kKeys + 127) / 128 * 128;  // kKt: 64 keys x 256 f16, core matrices
  static constexpr size_t kKtCols = 256;
  // SMLA_SD_DS32_ROLES_SPLIT_ST (not with kKt, whose WG0 takes every latent column from the half
  // tile, nor with SMLA_SD_DS32_ROLES=2, whose WG1 makes the P^T tiles on the merge barrier ids)
  static constexpr int kSplitSt = kDs32Roles && kRoles && kDs && kRows == 32 && !kKt && !kRolesPByWg1 ? kRolesSplitStTiles : 0;
  static constexpr size_t xs = kt + (kKt ? kKeys * kKtCols * 2 : 0);  // kSplitSt: float4[2 parities][kRows / 8][128]
  static constexpr size_t ring = xs + (kSplitSt ? 2 * (kRows / 8) * 128 * 16 : 0);
  static constexpr size_t bytes = ring + kRing * kSlotBytes;
  // The consumer warpgroups take alternate blocks, each with its own O^T (else each reads every
  // block: kSplitDv, kRoles, or one warpgroup); the warpgroups that read a slot's block.
  static constexpr bool kAlternating = kWgs > 1 && !kSplitDv && !kRoles;
  static constexpr int kSlotReaders = kAlternating ? 1 : kWgs;
  static_assert(bytes <= 232448, "ring plan exceeds the 227 KB opt-in limit");
  // Alternating warpgroups must each own whole slots: with a ring of another size a slot passes
  // from one warpgroup to the next, and a warpgroup's parity wait for the slot's use after next
  // returns on the phase before it, whose rows are still in flight (three slots in the 16-row
  // fp8_ds_mla tiles failed at b128 h16 on an H100, docs/PERF.md fifty-fourth pass).
  static_assert(!kAlternating || kRing % kWgs == 0, "each alternating warpgroup owns its slots");
  static_assert(kRing * kSlotBytes >= (kAlternating ? kWgs : 1) * static_cast<size_t>(kRows) * (512 + 4) * 4, "the epilogue's O^T buffers");
};
// Bytes of a raw row of the narrow bulk producer's formats.
template <int kFmt>
inline constexpr int kRawRowBytes = kFmt == static_cast<int>(CacheFormat::fp8_e4m3) ? 576 : DsMlaLayout::bytes_per_token;

// Dense decode of a bf16 cache whose page rows the TMA unit loads (the kernel template's format
// argument; a pseudo-format that CacheFormat does not name): one producer thread per page of a
// block issues 64-column boxes (128-byte swizzle) straight into the K tile, so the tile has
// the swizzled layout (kSwizzled) and the consumers' descriptors follow it. Pages of 16, 32
// or a multiple of 64 tokens (a box never crosses a page); other pages take the bf16 kernels.
inline constexpr int kDenseTma = 100;
// SMLA_SD_DENSE_EMPTY_HALVES (default 1; 0 the measurement build of one release a tile): the
// 64-row TMA tiles are freed in two parts. WG0, which reads every box for QK^T and boxes 0-3 for
// its P V, releases the tile on "empty" (its four warps); WG1, which reads boxes 4-7 for its P V,
// on a second barrier (Smem::alt_bars' empty_b). The producer loads block i's boxes 0-3 and the
// RoPE box once WG0 freed block i - 2's, and boxes 4-7 once WG1 did, so most of a refill starts
// before the later warpgroup's P V ends (dense h128 waits on its refills: a bound in which half
// the CTAs never wait took 489 -> 453 µs, PERF.md thirty-ninth pass). Predicted -1 to -3%;
// same call (2026-12-04, 90 replays, µs, 0 -> 1): b128 h128 L8k 473.7 / 473.8 -> 472.4 / 470.7,
// page 32 480.5 -> 472.5, h96 457.3 -> 454.8, s_q2 h128 951.2 / 971.7 -> 953.2 / 960.7
// (power-capped), b1 h128 28.11 -> 28.02: level to -1.7%.
#ifndef SMLA_SD_DENSE_EMPTY_HALVES
#define SMLA_SD_DENSE_EMPTY_HALVES 1
#endif
template <int kRows, int kFmt>
inline constexpr bool kDenseEmptyHalves = SMLA_SD_DENSE_EMPTY_HALVES != 0 && kRows == 64 && kFmt == kDenseTma && !kConsumersIdle;
// (Measured on these tiles and removed, 2026-12-04, µs, 90 replays, bf16 b128 L8192 page 64; the
// code is in a2f02b5:
// - SMLA_SD_DENSE_SHARED_LOADS, a bound: only head tile 0 of each token (or of each request)
//   loads its tiles, the others hand theirs over unloaded (wrong results): h128 489.3 / 483.6 ->
//   453.6 / 453.3, s_q2 h128 912.1 / 911.7 -> 916.9 / 894.7, one tile of a request 883.7 / 883.8
//   (consumers alone, variant 8: 444.4 and 875.8).
// - SMLA_SD_DENSE_TMA_PAIRS, the two head tiles of a token as a two-CTA cluster, each producer
//   loading every other box into both tiles by TMA multicast (tests and memcheck clean): h128
//   488.6 / 492.4 -> 492.1 / 493.7, s_q2 h128 920.1 / 951.2 -> 931.2 / 934.9, h96 474.3 -> 467.3,
//   h128 page 32 495.4 -> 484.8. Halving the L2-to-SM bytes does not pay; the bound's gain came
//   from CTAs that never wait for a tile, the latency of each refill in two stages.
// - SMLA_SD_DENSE_L2_AHEAD = 1 / 2, a TMA prefetch into L2 of block kb + 1 / kb + 2's boxes once
//   block kb's are issued: h128 490.4 / 487.9 -> 555.4 / 554.7 and 561.0 / 562.0, s_q2 h128 997 /
//   970 -> 1001 / 994 and 1036 / 1007, h16 311.3 -> 378.0 and 382.1: the prefetches cost the TMA
//   unit's issue, as the raw ring's row prefetches did (fourteenth pass).
// - SMLA_SD_DENSE_BULK_L2 = 1 / 2 (code in 18c2060), one bulk L2 prefetch a page lane of block
//   kb + 1 / kb + 2 (a page's rows are contiguous): h128 476.0 / 480.9 -> 505.3 / 498.8 and
//   499.8 / 508.1, s_q2 h128 977.5 / 904.0 -> 923.1 / 925.3 and 922.7 / 965.6 (power-capped, within
//   its spread), h16 311.7 / 312.7 -> 350.3 / 350.5 and 354.5 / 355.3, h128 page 32 483.8 -> 516.4
//   and 511.8. Either way a later block's bytes asked for early cost the blocks being loaded.)
// Measurement build SMLA_SD_E4M3_FP8=1: dense decode of an fp8_e4m3 cache (d_qk 576) with fp8 q
// above 32 heads on pages of 16, 32 or 64k tokens runs on FP8 tensor cores (consumer_fp8.cuh),
// the kernel template's pseudo-format kDenseE4m3Fp8: pages by the TMA unit as raw e4m3 (boxes of
// 64 one-byte columns, 64-byte swizzle) into three K tiles, QK^T as e4m3 wgmmas on Q and K as
// they are, the producer warpgroup transposing each block's values into K-major V^T (FP8 wgmma
// reads B K-major only), and P V as e4m3 wgmmas on P split into hi + lo parts (P x 256 in e4m3,
// then the rest). dd_fp8q b128 s_q2 h128: 1012 µs against the shipped route's ~1380
// (eighteenth pass), but lse errs up to 1.7e-4 absolute where |lse| < 0.05 (the e4m3 QK^T's
// short accumulator), past SPEC §6's bound for fp8 q (1e-3 |lse| + 1e-4): not shipped until
// its QK^T is summed more exactly.
#ifndef SMLA_SD_E4M3_FP8
#define SMLA_SD_E4M3_FP8 0
#endif
inline constexpr bool kE4m3Fp8 = SMLA_SD_E4M3_FP8 != 0;
// SMLA_SD_E4M3_FP8_PROMOTE=1: the FP8 tiles' QK^T in three chains of 6 k-steps added in float32.
// bench/micro/fp8_qk_accuracy.cu on the test's inputs, max raw error (of sums up to 5.2e4; ~2 is
// SPEC's fp8-q lse bound there) for chains of 18 / 6 / 3 / 2 / 1 k-steps: 27.9 / 10.2 / 6.7 /
// 5.4 / 2.1 (2026-12-02): the tensor cores' e4m3 sum loses bits at every step, and even a lone
// k-step's 32 products err. Chains of 1 or 2 alternating between two accumulators need more
// registers than WG0 has beside its half of O (ptxas: spills and serialized wgmmas at 224 and
// at 240), so the FP8 tiles stay a measurement build.
#ifndef SMLA_SD_E4M3_FP8_PROMOTE
#define SMLA_SD_E4M3_FP8_PROMOTE 0
#endif
inline constexpr bool kFp8Promote = SMLA_SD_E4M3_FP8_PROMOTE != 0;
inline constexpr int kDenseE4m3Fp8 = 101;
// The FP8 tiles' V transpose with each warp's loads and stores spread over all banks
// (SMLA_SD_FP8_SPREAD=1, transpose_values: 1594 -> 846 cycles a block in the micro, dd_fp8q
// 1196 -> 1035 µs) or in the plain order measured first (0: 19-way conflicts on the shared
// loads under ncu).
#ifndef SMLA_SD_FP8_SPREAD
#define SMLA_SD_FP8_SPREAD 1
#endif
inline constexpr bool kFp8SpreadTranspose = SMLA_SD_FP8_SPREAD != 0;
// The bf16 gather producer (sparse prefill, sparse decode of a bf16 cache, dense decode off the
// TMA path) writes the same 128-byte-swizzled layout, eight lanes per row, so that each
// warp-wide copy reads four whole 128-byte lines and the eight lanes of a row land on distinct
// banks (producer.cuh copy_rows_sw128). Against four lanes per row into core matrices (64-byte
// pieces of eight rows; ncu at prefill s_q 1024 h128: L2 78% busy at 1.9 TB/s): prefill d576
// h128 9689 -> 6077 µs, d512 h64 1375 -> 968; bf16 sparse decode h128 338 -> 212, h16 160 ->
// 91; dense h16 off TMA 584 -> 314 (same-seed A/B, 2026-12-01). SMLA_SD_BF16_SW128=0 (a
// measurement build): core matrices.
#ifndef SMLA_SD_BF16_SW128
#define SMLA_SD_BF16_SW128 1
#endif
inline constexpr bool kBf16Sw128 = SMLA_SD_BF16_SW128 != 0;
template <int kFmt>
inline constexpr bool kSwizzled = kFmt == kDenseTma || (kBf16Sw128 && kFmt == static_cast<int>(CacheFormat::bf16));
// Measurement build SMLA_SD_BF16_PAIRS=1: two 64-row
// bf16 tiles of one token (h_q 65-128: sparse prefill, sparse decode of a bf16 cache, dense
// decode off the TMA path) run as a pair like the packed formats. Each CTA gathers its 32-key
// round of every block with cp.async into its own K tile, then bulk copies by the TMA unit
// send the round's rows into the peer's tile (core matrices: its four 8-row groups; swizzled
// tiles: its 32 lines of each box). Halves each CTA's gathers, yet measured only 1.3% faster on
// core matrices (prefill d576 h128 9692 -> 9564 µs, d512 h64 unchanged, 2026-12-01): the L2
// requests' shape, not their count, was the limit (kBf16Sw128 above). On the swizzled tiles,
// against two unpaired producer warpgroups, slower (same call, 2026-12-03, µs): d576 h128 4629 /
// 4586 / 4593 -> 4770 / 4982 / 4965, d512 h128 k1024 sink 2175 / 2192 -> 2582 / 2562, bf16 decode
// b128 h128 178.9 / 178.7 -> 179.3 / 180.2 (tests 8 / 8). Built with SMLA_SD_BF16_PERSISTENT=0: the
// persistent CTAs' ends hook into the unpaired producer (static assertion below).
#ifndef SMLA_SD_BF16_PAIRS
#define SMLA_SD_BF16_PAIRS 0
#endif
inline constexpr bool kBf16Pairs = SMLA_SD_BF16_PAIRS != 0;
// SMLA_SD_BF16_EMPTY_HALVES (default 1; 0 frees the whole tile at once): the 64-row bf16-row
// tiles (sparse prefill, sparse bf16 caches, dense pages off the TMA path) freed in two parts as
// the dense TMA tiles are (kDenseEmptyHalves): WG0 releases on "empty", WG1 on empty_b, and each
// producer thread copies its rows' boxes 0-3 and RoPE box once WG0 freed the stage, boxes 4-7
// once WG1 did. Same call (µs, 0 -> 1; prefill s_q 4096 s_kv 32768): 2026-12-04 pass 39, 20
// replays, d512 h64 k512 sink 573.6 / 574.2 -> 570.2 / 571.2, d512 h128 k1024 sink 2018 -> 1998,
// d576 h128 k2048 4637 / 4636 -> 4109 / 4025. Pass 40, 90 replays (the power cap acting), d576
// h128 4588 / 4647 -> 4550 / 4545, the same at s_kv 8192 4381 / 4387 -> 4304 / 4306, d512 h128
// k1024 2300 / 2231 -> 2247 / 2246, d512 h64 578.0 / 578.0 -> 583.3 / 573.5, sparse bf16 decode
// b128 h128 k2048 178.0 / 177.9 -> 174.2 / 173.8. Its build passed the whole suite (36 / 36) and
// both RealShapeSampled cases.
#ifndef SMLA_SD_BF16_EMPTY_HALVES
#define SMLA_SD_BF16_EMPTY_HALVES 1
#endif
template <int kRows, int kFmt, bool kPair>
inline constexpr bool kBf16EmptyHalves = SMLA_SD_BF16_EMPTY_HALVES != 0 && kRows == 64 && !kPair &&
                                         kFmt == static_cast<int>(CacheFormat::bf16) && kBf16Sw128 && !kBf16Pairs &&
                                         SMLA_SD_BF16_ASYNC_ARRIVE == 0 && SMLA_SD_BF16_PERSISTENT != 1 && !kConsumersIdle;
// SMLA_SD_PACKED_EMPTY_HALVES (default 1): the same two-part release for the one-unit unpaired
// 64-row tiles of fp8_model1 (V4 sparse decode at 33-64 heads): each producer thread stores its
// row's boxes 0-3 once WG0 freed the stage, boxes 4-7 (the last latent chunks and the RoPE part)
// once WG1 did (producer.cuh store_and_hand_over). =2 (a measurement build): also fp8_ds_mla and
// fp8_e4m3 above 32 heads (box 8, the RoPE part or the ninth e4m3 chunk, with boxes 0-3); 0: none.
// Persistent and paired kernels keep one release, and so do builds that convert more than four
// chunks before the stage's wait (SMLA_SD_CONVERT_EARLY_WIDE / _PREFILL above 4: early chunks of
// WG1's part). Same call (2026-12-04, µs, 90 replays, 0 -> 2):
// V4 b128 h64 +512 sink 43.30 / 43.57 -> 42.61 / 42.69, again 43.26 / 43.14 / 43.34 -> 42.75 /
// 42.77 / 42.67, b32 level (28.11 / 28.10 / 28.13 -> 28.14 / 27.98 / 28.22); V3.2 b128 h64 120.3 /
// 119.9 / 119.8 -> 124.2 / 123.9 (slower: the fp8_ds_mla producer sets that row's pace, and its
// stores now wait twice); dense fp8_e4m3 h64 395.1 and fp8 q s_q2 h128 1334-1338 level; V3.2 s_q2
// h64 (persistent, unchanged) level. Its build passed the whole suite (36 / 36).
#ifndef SMLA_SD_PACKED_EMPTY_HALVES
#define SMLA_SD_PACKED_EMPTY_HALVES 1
#endif
// =3 (a measurement build): as 2, and a row's boxes 4-7 converted into registers before the wait
// for WG1's part instead of after it (fp8_ds_mla and fp8_e4m3 rows without early chunks; SASS of
// =2: fp8_ds_mla's producer waits a second time after ~400 of its ~1040 loop instructions, and
// converts the rest behind that wait).
template <int kRows, int kFmt, bool kPair>
inline constexpr bool kPackedEmptyHalves =
    (SMLA_SD_PACKED_EMPTY_HALVES >= 2 ? packed_rows(kFmt) : SMLA_SD_PACKED_EMPTY_HALVES == 1 && kFmt == static_cast<int>(CacheFormat::fp8_model1)) &&
    kRows == 64 && !kPair && kTwoProducers<kRows, kFmt, kPair, false> && !kConsumersIdle &&
    SMLA_SD_CONVERT_EARLY_WIDE <= 4 && SMLA_SD_CONVERT_EARLY_PREFILL <= 4;
inline constexpr bool kPackedPart2Early = SMLA_SD_PACKED_EMPTY_HALVES == 3;
// The one-unit kernels whose second consumer warpgroup frees its part of a K tile on empty_b.
template <int kRows, int kFmt, bool kPair>
inline constexpr bool kEmptyHalves =
    kDenseEmptyHalves<kRows, kFmt> || kBf16EmptyHalves<kRows, kFmt, kPair> || kPackedEmptyHalves<kRows, kFmt, kPair>;
// The parts of a K tile those kernels fill apart: part 2 is boxes 4-7 (64 columns each, the
// values of WG1's P V), part 1 the rest (WG0's half of V, the RoPE box); part 0 every box.
// WG0's QK^T reads every box, part 2's too: a producer stores part 2 only after the wait for
// WG0's release as well as WG1's (producer.cuh store_and_hand_over waits on empty first).
template <int kPart>
__host__ __device__ constexpr bool in_fill_part(int box) {
  return kPart == 0 || ((box >= 4 && box < 8) == (kPart == 2));
}
// Measurement build SMLA_SD_BF16_PERSISTENT=1: 64-row bf16 tiles
// (sparse prefill's 62 CTAs per SM at s_q 4096 h128) also get the persistent kernel beyond one
// wave, so a CTA's start (Q, first gathers) overlaps the previous unit's end. Its kernels spill
// 4 bytes (d576) and 24 bytes (d512); with kBf16Pairs the persistent pair kernel spills 116-148
// bytes. Measured slower on core matrices: prefill d576 h128 9692 -> 10040 µs, d512 h64 1379 ->
// 1418 (2026-12-01); on the swizzled tiles with the early hand-over far slower: d576 h128 4684 ->
// 6429, d512 h128 2304 -> 3335, d512 h64 722 -> 1028 (2026-12-03).
// SMLA_SD_BF16_PERSISTENT=2 (the default; defined above, at kTwoProducers) overlaps the units'
// ends instead: two producer warpgroups; the next unit's Q by the TMA unit, issued by the
// producer once consumer WG0's last QK^T of the unit is done (Smem::q_free), so it lands while
// the unit's last block and epilogue run; O's rows through the last block's K tile in the
// 128-byte swizzle and out by the TMA unit (AttnParams::o_map), that tile released to the
// producer once they are read. Not dense decode (instantiate.cuh launch_tiles). The one-unit
// CTAs spent ~7.9 µs a unit outside their per-block loop (prefill d512 h64: topk sweep, time
// against topk, 2026-12-03), ~4.4 with these. Same-call A/B (2026-12-03, µs, 0 -> 2): prefill
// d512 h64 sink topk 256 467 -> 370, 512 683 / 679 / 683 -> 601 / 598 / 606, 1024 1112 -> 1067,
// 2048 2042 -> 2049; d512 h128 k1024 sink 2178 / 2179 -> 2164 / 2088; d576 h128 k2048 4630 /
// 4758 -> 4786 / 4726 (power-capped); bf16 sparse decode b128 h128 178.6 -> 179.9, h64 level;
// dense off the TMA path s_q2 h128 page 48 1014 -> 1215 (so not dense). 0: one-unit CTAs.
inline constexpr bool kBf16Persistent = SMLA_SD_BF16_PERSISTENT != 0;
inline constexpr bool kBf16PersistEnds = SMLA_SD_BF16_PERSISTENT >= 2;
// (SMLA_SD_BF16_NEXT_Q_L2=1, the producer prefetching the next unit's Q into L2 by the TMA unit's
// tensor prefetch as it loads a unit's Q, so that load reads L2 instead of DRAM: slower in a
// same-call A/B, 2026-12-03, µs: prefill d512 h64 k512 sink 597.6 / 597.3 -> 609.3 / 611.0, d512
// h128 k1024 sink 2080 / 2087 -> 2113 / 2116, d512 h64 k2048 2006 -> 2028; bf16 decode b128
// h128 176.3 -> 178.7. Removed.)
// The persistent bf16-row CTAs' unit ends (default 1 each; 0 the measurement build without). A
// per-unit timeline (SMLA_SD_TIMELINE=3) of prefill d512 h64 k512 sink (2026-12-03) found 18.3 µs
// a unit, of which WG0's epilogue from its last block to its next unit 2.5 µs and 0.8 more before
// the next unit's Q wait, its make_work at one warp's issue rate:
// SMLA_SD_BF16_NEXT_WORK_EARLY (A): each consumer warpgroup makes its next unit's Work while it
// waits anyway (WG0 during its last P V, WG1 before the final-factor barrier), the producer once
// a unit's first block is issued.
// SMLA_SD_BF16_OUT_BY_WG1 (C): WG0 writes its half of O into the tile and goes on; WG1's thread 0
// issues all eight boxes and waits for their read (epilogue.cuh store_rows_tile).
// SMLA_SD_BF16_PERSIST_HAND0 (H): the producer hands block 0 of a later unit over as soon as its
// rows land, before it waits for block 1's tile (the unit before's last, free only once its O
// left; produce_bf16_rounds).
// Apart, none paid: A + C took WG0's end from 3.0 to 1.6 µs, but the next unit's first tile then
// came 1.2 µs after WG0 wanted it, its hand-over behind block 1's tile wait (599.0 / 600.0 ->
// 599.4 / 598.0); H alone waited on WG0's own epilogue (603.0 / 604.1 -> 602.4 / 603.5). Together,
// in same-call A/Bs (2026-12-03, µs, old -> A + C + H): prefill d512 h64 k512 sink 600.6 / 602.6 /
// 602.1 -> 578.4 / 579.2 / 579.1, 601.1 / 597.0 / 601.8 -> 577.3 / 578.1 / 578.8, 599.8 / 597.8 /
// 600.7 -> 575.2 / 579.4 / 577.1; d512 h128 k1024 sink 2139 -> 2026, 2204 -> 2040, 2104 -> 2026;
// d512 h64 k2048 2052 -> 1985, 2005 -> 2043; bf16 sparse decode b128 h128 180.3 / 179.2 -> 178.8 /
// 178.8 (tests 8 / 8 with persistent CTAs forced, the GPU suite 35 / 35).
// With the tiles freed in two parts (kBf16EmptyHalves) C was measured again against each
// warpgroup's thread 0 sending its own four boxes and its warps freeing their own part of the
// tile (SMLA_SD_BF16_OUT_BY_WG1=0), so that the next unit's block 1 could take boxes 0-3 once
// WG0's half had left. Slower (same call, 2026-12-04, µs, C -> own halves): prefill d512 h64 k512
// sink 578.4 / 577.8 / 579.1 -> 594.1 / 594.8 (90 replays 580.2 -> 602.5), with lengths 581.0 /
// 580.0 -> 595.3 / 596.9, d512 h128 k1024 sink 2033 / 2038 -> 2080 / 2085 (90: 2267 -> 2329), bf16
// decode b128 h128 174.1 / 174.3 -> 174.8 / 174.9: WG0 waiting for its boxes' read costs more
// than the earlier refill gives. Its build passed the suite (36 / 36).
#ifndef SMLA_SD_BF16_NEXT_WORK_EARLY
#define SMLA_SD_BF16_NEXT_WORK_EARLY 1
#endif
inline constexpr bool kBf16NextWorkEarly = SMLA_SD_BF16_NEXT_WORK_EARLY != 0;
#ifndef SMLA_SD_BF16_OUT_BY_WG1
#define SMLA_SD_BF16_OUT_BY_WG1 1
#endif
inline constexpr bool kBf16OutByWg1 = SMLA_SD_BF16_OUT_BY_WG1 != 0;
#ifndef SMLA_SD_BF16_PERSIST_HAND0
#define SMLA_SD_BF16_PERSIST_HAND0 1
#endif
inline constexpr bool kBf16PersistHand0 = SMLA_SD_BF16_PERSIST_HAND0 != 0;
// Measurement build SMLA_SD_TAIL_SPLIT=k (timing only: wrong results, the parts are not merged):
// persistent bf16-row CTAs walk units blockIdx.x, + gridDim.x, ..., so where the units are not a
// multiple of the grid the last R of them make R CTAs one unit later than the rest (prefill d512
// h64: 4096 units on 132 CTAs, 4 CTAs run 32 units and 128 run 31; at ~18.1 us a unit the kernel
// ends ~18 us after most of the grid). With k > 1 each of those R units is walked as k parts of
// its key blocks, on R k CTAs, each writing its part's result as a whole unit's (no combine):
// the time a tail split would save before the cost of merging its parts.
// SMLA_SD_TAIL_SPLIT=1 (prepared, not yet run on a device): the tail split with its merge, for
// sparse prefill of bf16 kv rows. The launch picks the parts (launch.cu prefill_tail_split: as
// many as the idle CTAs hold, at most a unit's key blocks) where the tail lies in one head tile
// and the workspace holds the parts' float32 partials (sparse_prefill_workspace_size sizes it);
// each part writes its O, lse and max logit as a split's partial, and the combine kernel merges
// the tail's tokens (combine_splits_kernel kTail: one head tile, max_logits too). Without the
// workspace the kernel runs as without the switch.
#ifndef SMLA_SD_TAIL_SPLIT
#define SMLA_SD_TAIL_SPLIT 0
#endif
inline constexpr int kTailSplit = SMLA_SD_TAIL_SPLIT;
inline constexpr bool kTailMerge = SMLA_SD_TAIL_SPLIT == 1;
// (SMLA_SD_BF16_FACTORS_IN_PV=1, WG0 of persistent bf16-row CTAs making its rows' full sums and
// final factors while the unit's last P V runs instead of after its kBarPFree sync (the 0.67 µs
// a unit of the thirty-seventh pass's marks): slower in a same-call A/B (2026-12-04, µs, prefill
// d512 h64 k512 sink) 574.0 / 573.3 -> 585.1 / 585.3, d512 h128 k1024 sink 2004 -> 2039; its
// persistent kernel kept 32 bytes of stack against 8. Removed.)
// In a unit without key blocks both consumer warpgroups sync on kBarPFree (consumer_wide.cuh), as
// WG0 does after a unit's last block, so that WG0 cannot run a unit ahead of WG1's final-factor
// barrier and its reads of Smem::factor. WG1 arriving there instead (WG0 syncing) left
// racecheck hazards on Smem::factor (GpuSparseDecode.Bf16Cache, persistent CTAs forced, one
// seed: 4; the full sync: 0 on three seeds). Calls whose lists have lengths (topk_length) keep
// persistent CTAs with it (2026-12-04, µs, prefill d512 h64 k512 sink with every length passed):
// 689 on one-unit CTAs -> 577 with the arrive (same call; 571 without lengths); with the full
// sync 588 / 585 against 583 / 584 without lengths (same call).
// Measured beside A + C + H and removed (same-call A/Bs, 2026-12-03, µs, prefill d512 h64 k512
// sink, three runs each):
// - the next unit's first two blocks' indices prefetched into L2 by the producer (P,
//   SMLA_SD_BF16_NEXT_IDX_L2=1): 578.7 / 577.4 / 579.5 against 578.4 / 579.2 / 579.1, d512 h128
//   k1024 2031 against 2026, k2048 1985 against 1985 (and level beside A + C alone);
// - WG0's sink logits loaded into registers at the unit's start, not in the epilogue behind the
//   gathers (SMLA_SD_BF16_SINK_EARLY=1; 16 bytes spilled against 8): 582.3 / 582.8 / 583.3 against
//   577.3 / 578.1 / 578.8, d512 h128 k1024 2065 against 2040;
// - those sink logits prefetched into L1 at the unit's start or during its last P V
//   (SMLA_SD_BF16_SINK_PREFETCH=1 / 2): 577.2 / 578.7 / 578.7 and 580.0 / 580.1 / 581.1 against
//   575.2 / 579.4 / 577.1, d512 h128 k1024 2034 / 2034 against 2026.
// (SMLA_SD_BF16_Q_FIRST=1, the next unit's Q issued before that unit's first gathers, and
// SMLA_SD_BF16_OUT_REGS=1, O from registers with the last tile released right after its P V:
// slower in a same-call A/B, 2026-12-03, µs, prefill d512 h64 k512 sink, two runs each: default
// 603.2 / 600.8, Q first 609.2 / 608.4, A + C + Q first 603.6 / 605.0, registers + Q first + A
// 668.5 / 665.6, registers 679.8 / 678.8. Removed.)
static_assert(!kBf16PersistEnds || !(SMLA_SD_BF16_PAIRS || SMLA_SD_BF16_ASYNC_ARRIVE), "the ends' Q hook is on the unpaired cp.async producer");
static_assert(!(kBf16Pairs && SMLA_SD_BF16_ASYNC_ARRIVE), "SMLA_SD_BF16_ASYNC_ARRIVE=1 is built for unpaired CTAs");
// SMLA_SD_BF16_HAND_EARLY (default 1; 0 is the measurement build without): the bf16 gather
// producer hands block i - 1 over as soon as its rows land, before it waits for block i's tile
// (free only once the consumers finished block i - 2). Handed over after block i's copies were
// issued, as before, block i - 1 waited for the consumers' release of block i - 2 and for the
// issue of 36 copies a thread: ncu of prefill s_q 1024 h128 (2026-12-03) found consumer WG0 at
// its "full" wait for 39% of its samples (8% after) and the producer at its "empty" wait for 49%.
// Same-call A/B (µs): prefill d576 h128 5493 / 5548 -> 4655 / 4645, d512 h128 k1024 sink 2848
// -> 2291, d512 h64 k512 sink 817 -> 714; bf16 sparse decode b128 h128 196 -> 180, h64 104 -> 97.
#ifndef SMLA_SD_BF16_HAND_EARLY
#define SMLA_SD_BF16_HAND_EARLY 1
#endif
inline constexpr bool kBf16HandEarly = SMLA_SD_BF16_HAND_EARLY != 0;
// (SMLA_SD_BF16_HAND_EARLY=2, a warp whose next tile was already free issuing its copies first
// and handing block i - 1 over after them, and SMLA_SD_BF16_HALF_FULL=1, each tile handed over in
// two parts, boxes 0-3 and 4-8, WG0's QK^T starting on the first: both slower in a same-call A/B
// at 20 replays after a warm-up (2026-12-03, µs, default / either order / two parts): prefill d576
// h128 4350 / 4529 / 4853 and 4471 / 4526 / 4842, d512 h128 k1024 sink 2190 / 2273 / 2300 and
// 2198 / 2365 / 2270; removed.)
// (SMLA_SD_BF16_NEXT_Q=1, the producer of each one-unit 64-row bf16-row CTA prefetching into L2
// the Q tile of the CTA one wave later: slower in a same-call A/B, 2026-12-03, µs: prefill d576
// h128 4252 / 4700 -> 4613 / 4604, d512 h128 k1024 sink 2295 / 2291 -> 2338 / 2344, d512 h64 k512
// sink 714 / 716 -> 741 / 742; removed.)
// (SMLA_SD_BF16_GATHER_HINT=1, the bf16 rows' copies with an L2 evict_last policy and a 256-byte
// L2 prefetch as FlashMLA's sparse prefill gathers: level in prefill, slower in bf16 sparse decode
// in a same-call A/B (2026-12-03, µs: d576 h128 4553 / 4706 / 4673 -> 4521 / 4252 / 4706, d512
// h128 k1024 sink 2303 / 2299 -> 2309 / 2302, d512 h64 719 / 718 -> 719 / 719, bf16 decode b128
// h128 177.8 / 177.9 -> 183.1 / 181.3); beside two producer warpgroups its kernels met an
// illegal instruction (ptxas put the policy in uniform registers nothing wrote); removed.)
// Kernels whose K rows are bf16 in the cache (no conversion; paired only with kBf16Pairs,
// persistent only with kBf16Persistent, and neither on the TMA path).
constexpr bool bf16_rows(int fmt) { return fmt == static_cast<int>(CacheFormat::bf16) || fmt == kDenseTma; }
// Kernels that also serve dense decode (keys from the block table, work.cuh).
constexpr bool serves_dense(int fmt) {
  return bf16_rows(fmt) || fmt == static_cast<int>(CacheFormat::fp8_e4m3) || fmt == kDenseE4m3Fp8;
}
// SMLA_SD_BF16_TUNED (default 1; 0 is the measurement build without): the bf16-row kernel (sparse
// decode and sparse prefill from bf16 rows) takes kQCpAsync and kStagedEpilogue too. Its prefill
// runs ~62 one-unit CTAs an SM one after another (s_q 4096, h128), each with its own Q load and
// epilogue. Same-call A/B (2026-12-02, µs): prefill d512 h64 932 -> 818, d512 h128 3055 -> 2840,
// d576 h128 5795 -> 5612; bf16 sparse decode b128 h64 106.4 -> 103.6.
#ifndef SMLA_SD_BF16_TUNED
#define SMLA_SD_BF16_TUNED 1
#endif
// The kernels whose one-unit 64-row CTAs load Q by cp.async (kQCpAsync) and stage O's bf16 rows
// (kStagedEpilogue): sparse decode from packed rows and the bf16-row kernel (SMLA_SD_BF16_TUNED);
// not sparse prefill from packed rows (kLogits) nor the dense caches' kernels, where neither was
// measured faster.
template <int kFmt, bool kLogits>
inline constexpr bool kStagedEnds = (!kLogits && !serves_dense(kFmt)) ||
                                    (SMLA_SD_BF16_TUNED != 0 && kFmt == static_cast<int>(CacheFormat::bf16));
// SMLA_SD_Q_TMA (default 2): the 64-row CTAs of sparse decode from packed rows (kStagedEnds, not
// the bf16-row kernel) take Q by the TMA unit: nine (d512: eight) boxes of 64 columns x 64 rows in
// the 128-byte swizzle over a tensor map of q (AttnParams::q_map, built by the launch), completing
// on one mbarrier (Smem::q_bar); WG0's QK^T reads Q with the swizzled descriptor. Where the launch
// builds no map (head tiles under 64 with several tiles, strides the TMA unit does not take),
// cp.async writes the same swizzled layout. 1: the one-unit CTAs only; 2: also each unit's Q in
// the persistent CTAs that stage O (kernel.cuh persistent_units, after the staged rows' barrier),
// except the fp8_ds_mla pair kernel's (kPersistQTma); 3: also paged prefill's persistent CTAs;
// 0: cp.async into core matrices, as before.
// Same-call A/B (2026-12-02, --seed 7, µs, 0 / 1 / 2 / 3): V3.2 b1 h128 20.69 / 18.32 / 18.16;
// b1 h64 19.23 / 17.41 / 17.46; b8 h128 33.26 / 31.89 / 31.87; b128 h64 123.6 / 120.5 / 120.1;
// V4 h64 47.17 / 45.44 / 45.47; V4 s_q2 h128 211.2 / 210.5 / 201.0; V4 h128 111.2 / 111.4 / 106.7;
// V3.2 s_q2 h64 243.8 / 244.3 / 232.6. The fp8_ds_mla pair kernel's persistent CTAs lost at 2
// (V3.2 s_q2 h128 366.4 / 367.0 / 381.8, h128 190.3 / 189.6 / 196.6), paged prefill at 3
// (5623 / - / 5574 / 5759).
#ifndef SMLA_SD_Q_TMA
#define SMLA_SD_Q_TMA 2
#endif
// SMLA_SD_Q_TMA_DS_PAIR=1 (a measurement build): the fp8_ds_mla pair kernel's persistent CTAs take
// each unit's Q by the TMA unit too (SMLA_SD_Q_TMA >= 2).
#ifndef SMLA_SD_Q_TMA_DS_PAIR
#define SMLA_SD_Q_TMA_DS_PAIR 0
#endif
template <int kFmt, bool kLogits>
inline constexpr bool kQTma = SMLA_SD_Q_TMA != 0 && kStagedEnds<kFmt, kLogits> && !bf16_rows(kFmt);
// (SMLA_SD_BF16_Q_TMA=1, the one-unit bf16-row CTAs' Q by the TMA unit too, whose cp.async load
// took ~3.4 µs of each unit in a timeline build: level in a same-call A/B, 2026-12-03, µs: prefill
// d512 h64 k512 sink 682.5 -> 679.5, topk 256 467.5 -> 448.2, topk 2048 1992 -> 2034, d576 h128
// 4632 / 4673 -> 4710 / 4516; dense off the TMA path s_q2 h128 1012 -> 1038; removed. The load
// waits for its share of the SM's bandwidth beside the first gathers, not for its issue.)
// The persistent CTAs that load each unit's Q by the TMA unit (SMLA_SD_Q_TMA above); kStaged:
// they stage O (kPersistStaged), so their Q loads already meet at the staged rows' barrier.
template <int kFmt, bool kPair, bool kLogits, bool kStaged>
inline constexpr bool kPersistQTma =
    SMLA_SD_Q_TMA >= 2 && kStaged && (!kLogits || SMLA_SD_Q_TMA >= 3) &&
    (!kPair || kFmt != static_cast<int>(CacheFormat::fp8_ds_mla) || SMLA_SD_Q_TMA_DS_PAIR != 0);
// The persistent kernels that overlap the units' ends (kBf16PersistEnds).
template <int kFmt>
inline constexpr bool kPersistEnds = kBf16PersistEnds && kFmt == static_cast<int>(CacheFormat::bf16);
constexpr bool has_persistent(int rows, int fmt) {
  return rows == 64 && fmt != kDenseE4m3Fp8 &&
         (!bf16_rows(fmt) || (kBf16Persistent && fmt == static_cast<int>(CacheFormat::bf16)));
}

// Shared memory, in bytes from the dynamic base (no swizzle: 16-byte alignment suffices). Q and K tiles are wgmma core-
// matrix tiles: element (r, k) at (r / 8) * 16 * D + (k / 8) * 128 + (r % 8) * 16 + (k % 8) * 2.
// kRaw (raw_slots: kNarrowBulk): a ring of kRaw raw blocks of kRawRow-byte rows follows the
// barriers; with two, both stages share one K tile.
// tile_offset: the byte offset of row r's 16-byte column chunk ch (columns 8 ch .. 8 ch + 7).
template <int kD>
constexpr int tile_offset(int r, int ch) {
  return (r >> 3) * 16 * kD + ch * 128 + (r & 7) * 16;
}

// Measurement build SMLA_SD_ALT=1: 64-row tiles of dense decode on TMA pages run the
// alternating consumers (consumer_alt.cuh): each warpgroup owns one half of O and every other
// block (QK^T, softmax, P), so one warpgroup's softmax overlaps the other's MMAs; each K tile
// is handed over and released in two column halves (A: columns 0-255, B: the rest).
#ifndef SMLA_SD_ALT
#define SMLA_SD_ALT 0
#endif
template <int kRows, int kFmt>
inline constexpr bool kAlt = SMLA_SD_ALT != 0 && kRows == 64 && kFmt == kDenseTma;
// (SMLA_SD_HALVES=1, the shipped 64-row consumers with each K tile handed over and released in
// the two halves above, QK^T's steps on B issued once B is in: slower in a same-call A/B,
// 2026-12-02: dense bf16 s_q2 h128 913.3 -> 931.2 µs, h128 484.5 -> 489.0, b1 level, s_q2 h128
// L32k 3734 -> 4065; removed.)
// SMLA_SD_ALT=2: d_qk 576 runs the seesaw consumers instead (consumer_seesaw.cuh).
template <int kD>
inline constexpr bool kSeesaw = SMLA_SD_ALT == 2 && kD == 576;
#ifndef SMLA_SD_SEESAW_STAGGER
#define SMLA_SD_SEESAW_STAGGER 0
#endif
inline constexpr bool kSeesawStagger = SMLA_SD_SEESAW_STAGGER != 0;
// Registers of the alternating consumers (each holds half of O, S and P) and their producer.
inline constexpr int kRegsAlt = 208, kRegsProducerAlt = 88;
static_assert(2 * kRegsAlt + kRegsProducerAlt <= 3 * launch_regs(cta_threads(64)), "alternating register budget");
// (SMLA_SD_BF16_SEESAW=1, the seesaw consumers on gathered bf16 rows, d_qk 576 and 512 (two P
// tiles of their own there), fed half by half by the two producer warpgroups with copies that
// arrive on the halves' barriers themselves, FlashMLA's sparse prefill schedule: slower in every
// row of a same-call A/B at 20 replays (2026-12-03, µs, default -> seesaw): prefill d576 h128
// 4675 / 4435 / 4641 -> 5143 / 5175 / 4971, d512 h128 k1024 sink 2176 / 2269 -> 2576 / 2604,
// d512 h64 688 -> 807, bf16 sparse decode b128 h128 178.5 -> 203.2, dense off TMA s_q2 h128
// page 48 1014 -> 1137; its consumers alone (variant 8) d576 3799 against 3613-3653 for the
// shipped ones, d512 2124 against 1993; removed.)

template <int kRows, int kD, int kRaw = 0, int kRawRow = DsMlaLayout::bytes_per_token>
struct Smem {
  static constexpr bool kWide = kRows == 64;
  static constexpr bool kOneTile = kRaw >= 2;
  static constexpr size_t kQBytes = static_cast<size_t>(kRows) * kD * 2;
  static constexpr size_t kKBytes = static_cast<size_t>(kKeys) * kD * 2;
  static constexpr size_t kRawBlockBytes = static_cast<size_t>(kKeys) * kRawRow;
  static constexpr size_t q = 0;
  static constexpr size_t k = q + kQBytes;                          // [kStages] K tiles (kOneTile: one)
  static constexpr size_t p = k + (kOneTile ? 1 : kStages) * kKBytes;  // kRows x 64 bf16 P (narrow: P^T)
  static constexpr size_t scale = p + kKeys * kRows * 2;             // float[64] row rescale factors
  static constexpr size_t factor = scale + 64 * 4;                  // float[64] final row factors
  static constexpr size_t merge = factor + 64 * 4;                  // narrow: float[2][4][32] head maxima
  static constexpr size_t valid = merge + (kWide ? 0 : 2 * 4 * 32 * 4);  // uint32[kStages][8] key masks
  static constexpr size_t bars = valid + kValidBytes * kStages;     // uint64 full[kStages], empty[kStages]
  static constexpr int kSlots = kRaw;
  static constexpr size_t raw_bars = bars + 2 * kStages * 8;        // kRaw: uint64 raw_full[kSlots]
  static constexpr size_t raw_ok = raw_bars + kSlots * 8;           // kRaw: uint8[kSlots][64] row is real
  static constexpr size_t raw = (raw_ok + kSlots * kKeys + 127) / 128 * 128;  // kRaw: [kSlots] raw blocks
  static constexpr size_t aux = raw_bars;                           // !kRaw: uint64 aux (kSwizzled: partial blocks)
  // 64-row kAlt tiles: uint64 full_b[kStages], empty_b[kStages], aux_b (the B halves; full and
  // empty above serve the A halves), float m[64] (the running row maxima), l[2][64] and
  // top[2][64] (each warpgroup's row sums and exact maxima, for the epilogue).
  static constexpr size_t alt_bars = aux + 8;
  static constexpr size_t alt_m = alt_bars + (2 * kStages + 1) * 8;
  static constexpr size_t alt_l = alt_m + 64 * 4;
  static constexpr size_t alt_top = alt_l + 2 * 64 * 4;
  // SMLA_SD_Q_TMA: uint64 q_bar, Q's mbarrier (64-row CTAs, config.h kQTma).
  static constexpr size_t q_bar = kWide ? alt_top + 2 * 64 * 4 : aux + 8;
  // kBf16PersistEnds: uint64 q_free, consumer WG0 -> producer: the unit's last QK^T is done.
  static constexpr size_t q_free = q_bar + 8;
  static constexpr size_t bytes =
      kRaw ? raw + kSlots * kRawBlockBytes : q_bar + (SMLA_SD_Q_TMA != 0 && kWide ? 8 : 0) + (kBf16PersistEnds && kWide ? 8 : 0);
  // kSwizzled: 128-byte-swizzled tiles start on 1024-byte boundaries.
  static_assert(kRaw || (k % 1024 == 0 && kKBytes % 1024 == 0), "K tiles off the 1024-byte swizzle grid");
  static_assert(bytes <= 232448, "shared-memory plan exceeds the 227 KB opt-in limit");
};

// SMLA_SD_PERSIST_STAGED (default 1; 0 is the measurement build of the register stores):
// persistent 64-row CTAs also stage O's bf16 rows (kStagedEpilogue's bulk copies), in the Q tile
// alone (the producer may be filling the K tiles with the next unit's blocks), and the next
// unit's Q is stored only after both warpgroups' copies have read it (load_q kAfterStaged).
// Where padded rows fit the Q tile: d576 (66.5 of 73.7 KB); d512 below. Not the dense caches'
// kernels. Same-call A/B (2026-12-02, µs, one rep): V3.2 s_q2 h128 378.6 -> 366.6, h128 197.2 ->
// 189.2, paged prefill h128 5691 -> 5573, paged prefill h64 3426 -> 3419, s_q2 h64 238.9 -> 240.4.
#ifndef SMLA_SD_PERSIST_STAGED
#define SMLA_SD_PERSIST_STAGED 1
#endif
// SMLA_SD_PERSIST_STAGED_P (default 1; 0 is the measurement build without it): d512 too (V4),
// whose padded rows are 1 KB more than its 64 KB Q tile: rows 0-62 in the Q tile, row 63 in the P
// tile (free from WG1's last P V until the next unit's first P, which comes after its Q), at the
// bank its place in sequence would have. Same-call A/B (2026-12-02, µs, two reps): V4 s_q2 h128
// 221.6 -> 213.2, h128 118.4 -> 112.9, s_q2 h64 91.1 -> 89.1 (its unpaired kernel spills 168
// bytes against 16), fp8_model1 paged prefill h128 2942 -> 2898.
#ifndef SMLA_SD_PERSIST_STAGED_P
#define SMLA_SD_PERSIST_STAGED_P 1
#endif
inline constexpr size_t kStageRowBytes = kStageRowWords * 4;
// Byte offset of staged row 63 from the Q tile in persistent CTAs: 0 (in sequence) or in the P tile.
template <int kD>
inline constexpr int kStagedRow63 =
    64 * kStageRowBytes <= Smem<64, kD>::kQBytes || SMLA_SD_PERSIST_STAGED_P == 0
        ? 0
        : static_cast<int>(Smem<64, kD>::p - Smem<64, kD>::q + (63 * kStageRowBytes) % 128);
template <int kD, int kFmt>
inline constexpr bool kPersistStaged = SMLA_SD_PERSIST_STAGED != 0 && !serves_dense(kFmt) &&
                                       (64 * kStageRowBytes <= Smem<64, kD>::kQBytes || kStagedRow63<kD> != 0);
// In persistent 64-row CTAs of fp8_model1 the producer, on starting a unit after the first (the
// consumers have up to kStages blocks of the previous one left), prefetches that unit's Q rows
// into L2, so that the consumers' Q load between units (behind the staged rows' copies) reads
// L2 instead of DRAM. Same-call A/Bs (2026-12-02, µs): V4 s_q2 h128 215.3 -> 212.1 (four reps
// over two calls), V4 h128 113.1 -> 111.6, s_q2 h64 89.1 -> 88.8, fp8_model1 paged prefill h128
// 2905 -> 2850; in fp8_ds_mla's kernels slower (V3.2 s_q2 h128 366.9 -> 389.7, paged prefill
// 5614 -> 5885), not profiled. SMLA_SD_Q_PREFETCH (measurement builds): 0 none, 1 every packed
// format.
#ifndef SMLA_SD_Q_PREFETCH
#define SMLA_SD_Q_PREFETCH 2
#endif
template <int kFmt>
inline constexpr bool kQPrefetch = !serves_dense(kFmt) && !bf16_rows(kFmt) &&
                                   (SMLA_SD_Q_PREFETCH == 1 || (SMLA_SD_Q_PREFETCH == 2 && kFmt == static_cast<int>(CacheFormat::fp8_model1)));

// Shared memory of the FP8 tiles (kDenseE4m3Fp8, d_qk 576, 64 rows): Q and three K tiles of
// e4m3 as nine boxes of 64 rows x 64 bytes each, two V^T tiles (512 value columns x 64 keys),
// the P hi and lo tiles (64 x 64 e4m3), the row factors and valid-key words, and the barriers:
// K full / empty [3], V^T full / empty [2], aux. Every tile on a 1024-byte boundary.
struct Fp8Smem {
  static constexpr int kKStages = 3, kVStages = 2;
  static constexpr size_t kBox = 64 * 64;
  static constexpr size_t kKBytes = 9 * kBox, kVtBytes = 512 * 64, kPBytes = 64 * 64;
  static constexpr size_t q = 0;
  static constexpr size_t k = q + kKBytes;
  static constexpr size_t vt = k + kKStages * kKBytes;
  static constexpr size_t p = vt + kVStages * kVtBytes;  // P hi, then P lo
  static constexpr size_t scale = p + 2 * kPBytes;         // float[64] row rescale factors
  static constexpr size_t factor = scale + 64 * 4;         // float[64] final row factors
  static constexpr size_t valid = factor + 64 * 4;         // uint32[kKStages][8] key masks
  static constexpr size_t bars = valid + kValidBytes * kKStages;
  static constexpr size_t bytes = bars + (2 * kKStages + 2 * kVStages + 1) * 8;
  static_assert(bars % 8 == 0 && bytes <= 232448, "FP8 shared-memory plan");
};
// Registers of the FP8 tiles' roles: WG0 (S, O[:, 0:256], P's conversion), WG1 (O[:, 256:512]),
// the producer warpgroup (the TMA issue and the V transpose: 16 rows of 16 bytes a thread).
inline constexpr int kRegsFp8Wg0 = 224, kRegsFp8Wg1 = 160, kRegsFp8Producer = 120;
static_assert(kRegsFp8Wg0 + kRegsFp8Wg1 + kRegsFp8Producer <= 3 * launch_regs(cta_threads(64)), "FP8 register budget");

// Dynamic shared memory of the kernel for these rows, d_qk and format (kDs32Roles: RingSmem's).
template <int kRows, int kD, int kFmt, bool kDs32Roles = false>
constexpr size_t smem_bytes() {
  if constexpr (kFmt == kDenseE4m3Fp8) return Fp8Smem::bytes;
  else if constexpr (kRawConsumer<kRows, kFmt>) return RingSmem<kRows, kFmt, kDs32Roles>::bytes;
  else return Smem<kRows, kD, raw_slots<kRows, kFmt>(), kRawRowBytes<kFmt>>::bytes;
}

}  // namespace smla::cuda::sparse_decode_family
