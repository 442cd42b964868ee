#!/usr/bin/env bash
# The sparse-decode family's measurement builds (src/cuda/sparse_decode/config.h) are how its
# kernels are studied on the device, and nothing else compiles them: a default that assumes
# something they switch off breaks them unseen (variants 7 and 9 did, for a while). This compiles
# the instantiations each one changes most, as cubins only (nothing is linked or run).
#   bash scripts/check_measurement_builds.sh     (make measurement-builds; JOBS)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/cubin.sh  # require_nvcc, lib_cubin
require_nvcc check_measurement_builds
JOBS=${JOBS:-$(nproc)}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# flags | instantiation (src/cuda/sparse_decode/instantiations/NAME.cu) or a source file's path
builds=(
  "-DSMLA_SD_VARIANT=7|sparse_decode_dense_tma_576"   # consumers only release (two-part releases off)
  "-DSMLA_SPLIT_INLINE=0|sparse_decode_fp8_ds_mla_576"   # the schedule kernel for every batch
  "-DSMLA_SPLIT_INLINE=0|src/cuda/attention/attention_launch.cu"
  "-DSMLA_SPLIT_INLINE=0|src/cuda/attention/instantiations/attention_bf16_576_any.cu"
  "-DSMLA_SD_VARIANT=7|sparse_decode_bf16_576"
  "-DSMLA_SD_VARIANT=7|sparse_decode_fp8_model1_512"
  "-DSMLA_SD_VARIANT=8|sparse_decode_bf16_576"        # the producer hands its tiles over unloaded
  "-DSMLA_SD_PACKED_EMPTY_HALVES=2|sparse_decode_fp8_ds_mla_576"
  "-DSMLA_SD_LANE_OPAQUE=1|sparse_decode_fp8_ds_mla_576"   # the h64 producer's lane fields kept in registers
  "-DSMLA_SD_PACKED_EMPTY_HALVES=3|sparse_decode_fp8_e4m3_576"
  "-DSMLA_SD_CONVERT_EARLY_WIDE=6|sparse_decode_fp8_model1_512"   # early chunks past WG0's part
  "-DSMLA_SD_BF16_PAIRS=1 -DSMLA_SD_BF16_PERSISTENT=0|sparse_decode_bf16_576"   # bf16 head-tile pairs (one-unit CTAs only)
  "-DSMLA_SD_TAIL_SPLIT=8|sparse_decode_bf16_512"   # the persistent walk's tail units in parts (timing only)
  "-DSMLA_SD_TAIL_SPLIT=1|sparse_decode_bf16_576"   # the tail split with its merge: the kernel,
  "-DSMLA_SD_TAIL_SPLIT=1|src/cuda/attention/attention_launch.cu"   # its launch and combine
  "-DSMLA_SD_TAIL_SPLIT=1|src/cuda/sparse_decode/launch.cu"
  "-DSMLA_COMBINE_COMPACT=0 -DSMLA_SD_TAIL_SPLIT=1|src/cuda/attention/attention_launch.cu"   # the combine's unrolled lse loops (tail too)
  "-DSMLA_SD_LEAN_STEP=5|sparse_decode_fp8_ds_mla_576"   # the roles' packed P^T words and fold from WG1's sums
  "-DSMLA_SD_NARROW_ROLLED_STORES=0|sparse_decode_fp8_ds_mla_576"   # the narrow tiles' unrolled end
  "-DSMLA_SD_NARROW_ROLLED_STORES=0|sparse_decode_fp8_e4m3_576"
  "-DSMLA_SD_NARROW_ROLLED_STORES=1 -DSMLA_SD_NARROW_FAST_END=0|sparse_decode_fp8_model1_512"
  "-DSMLA_SD_NARROW_ROLLED_STORES=3|sparse_decode_fp8_ds_mla_576"   # ... each thread ending its own heads
  "-DSMLA_SD_NARROW_ROLLED_STORES=3|sparse_decode_fp8_e4m3_576"     # (two warpgroups' states: the 16-row tiles)
  "-DSMLA_SD_NARROW_ROLLED_STORES=3|sparse_prefill_fp8_ds_mla_576"  # (max_logits)
  "-DSMLA_SD_NARROW_ROLLED_STORES=3 -DSMLA_SD_TIMELINE=4|sparse_decode_fp8_ds_mla_576"
  "-DSMLA_SD_NARROW_FAST_END=0|sparse_decode_fp8_ds_mla_576"   # narrow tiles' rows ended by the exact functions
  "-DSMLA_SD_NARROW_FAST_END=0|sparse_decode_fp8_model1_512"
  "-DSMLA_SD_WIDE_FAST_END=1|sparse_decode_bf16_512"   # the 64-row consumers' rows ended the same way
  "-DSMLA_SD_WIDE_FAST_END=1|sparse_decode_fp8_e4m3_576"
  "-DSMLA_SD_RAW_PREFETCH=4|sparse_decode_fp8_ds_mla_576"   # raw-ring rows prefetched into L2 ahead of the copies
  "-DSMLA_SD_RAW_PREFETCH=4|sparse_decode_fp8_e4m3_576"
  "-DSMLA_SD_ROWS_EVICT_FIRST=0|sparse_decode_fp8_ds_mla_576"   # row copies without the L2 evict_first policy
  "-DSMLA_SD_ROWS_EVICT_FIRST=2|sparse_decode_dense_tma_576"    # the dense page walk's boxes with it too
  "-DSMLA_SD_ROWS_EVICT_FIRST=3|sparse_decode_fp8_ds_mla_576"   # the policy on a unit's first half of blocks only
  "-DSMLA_SD_ROWS_EVICT_FIRST=3|sparse_decode_fp8_model1_512"
  "-DSMLA_SD_ROWS_EVICT_FIRST=1|sparse_decode_fp8_ds_mla_576"   # the policy on every row copy, in any grid
  "-DSMLA_SD_DS32_ROLES=1|sparse_decode_fp8_ds_mla_576"   # 32-row tiles in roles (decode too)
  "-DSMLA_SD_DS32_ROLES=2|sparse_decode_fp8_ds_mla_576"   # ... WG1 making the P^T tiles
  "-DSMLA_SD_DS32_ROLES=1 -DSMLA_SD_DS32_ROLES_EARLY_V=1|sparse_decode_fp8_ds_mla_576"   # ... WG1's value words first
  "-DSMLA_SD_DS32_ROLES_RING=2|sparse_decode_fp8_ds_mla_576"   # two slots in the 32-row decode roles
  "-DSMLA_SD_ROLES_END_WG0=0|sparse_decode_fp8_ds_mla_576"   # ... WG1 alone in their epilogue stores
  "-DSMLA_SD_ROLES_END_WG0=0|sparse_prefill_fp8_ds_mla_576"
  "-DSMLA_SD_TIMELINE=4|sparse_decode_fp8_ds_mla_576"   # the roles' per-block marks (bench/roles_timeline.py)
  "-DSMLA_SD_RAW_FIRST_FILL=0|sparse_decode_fp8_ds_mla_576"   # every raw ring's first fill whole
  "-DSMLA_SD_RAW_FIRST_FILL=2|sparse_decode_fp8_e4m3_576"      # two slots at first in every raw ring
  "-DSMLA_SD_RAW_CP_ASYNC=1|sparse_decode_fp8_ds_mla_576"      # fp8_ds_mla ring rows by 16-byte cp.async
  "-DSMLA_SD_RAW_CP_ASYNC=1|sparse_prefill_fp8_ds_mla_576"
  "-DSMLA_SD_DS32_ROLES_V_FIRST=1|sparse_decode_fp8_ds_mla_576"   # the roles' value words before the hand-over
  "-DSMLA_SD_ROLES_SHARED_Q=1|sparse_decode_fp8_ds_mla_576"   # one copy of the roles' Q load, before their branches
  "-DSMLA_SD_ROLES_SHARED_Q=1|sparse_prefill_fp8_ds_mla_576"
  "-DSMLA_SD_Q_PREFETCH_START=1|sparse_decode_fp8_ds_mla_576"   # Q into L2 before the start's setup
  "-DSMLA_SD_DS32_ROLES_KT=1|sparse_decode_fp8_ds_mla_576"   # the roles' S^T from a half tile the producer converts
  "-DSMLA_SD_DS32_ROLES_KT=1 -DSMLA_SD_TIMELINE=4|sparse_decode_fp8_ds_mla_576"
  "-DSMLA_SD_DS32_ROLES_SPLIT_ST=0|sparse_decode_fp8_ds_mla_576"   # the roles' WG0 takes all of S^T
  "-DSMLA_SD_DS32_ROLES_SPLIT_ST=1|sparse_decode_fp8_ds_mla_576"   # ... WG1 one scale tile of it
  "-DSMLA_SD_DS32_ROLES=1|sparse_prefill_fp8_ds_mla_576"
  "-DSMLA_SD_DS32_ROLES_PREFILL=0|sparse_prefill_fp8_ds_mla_576"   # the paged prefill's 32-row tiles in halves
  "-DSMLA_SD_NO_PEER_STORES=1|sparse_decode_fp8_ds_mla_576"   # a pair's rows kept from the peer
  "-DSMLA_SD_NO_PEER_STORES=2|sparse_decode_fp8_e4m3_576"     # ... sent by plain remote stores, not waited for
  "-DSMLA_SD_RAW_WGS=3 -DSMLA_SD_RAW_RING16=3 -DSMLA_SD_RAW_WGS_REGS=160|sparse_decode_fp8_ds_mla_576"   # three consumer warpgroups in 16-row tiles
  "-DSMLA_SD_RAW_WGS=3 -DSMLA_SD_RAW_RING16=3 -DSMLA_SD_RAW_WGS_REGS=160|sparse_decode_fp8_e4m3_576"
)

compile() {
  local flags=${1%%|*} name=${1#*|}
  local tag
  tag=$(echo "$flags-$name" | tr -c 'A-Za-z0-9_\n' '_')
  local src="src/cuda/sparse_decode/instantiations/$name.cu"
  [[ $name == */* ]] && src=$name  # a path: a file other than an instantiation
  # shellcheck disable=SC2086  # $flags: several words
  if lib_cubin "$src" "$out/$tag.cubin" $flags > "$out/$tag.log" 2>&1; then
    echo "ok      $flags $name"
  else
    echo "FAILED  $flags $name"
    head -20 "$out/$tag.log"
    return 1
  fi
}
export -f compile lib_cubin
export out
printf '%s\n' "${builds[@]}" | xargs -P "$JOBS" -I{} bash -c 'compile "$@"' _ {}
