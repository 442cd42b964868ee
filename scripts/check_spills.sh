#!/usr/bin/env bash
# The sparse-decode family's kernels keep their loop state in registers: ptxas's spill report of
# every instantiation of the default build, against the most each kernel may spill. A spill in a
# producer's loop puts a local-memory reload before every block (the unpaired 64-row fp8_ds_mla
# kernel reloaded a 64-bit prefetch offset behind its row loads: V3.2 b128 h64 119.7 -> 115.7 µs
# without it, docs/PERF.md forty-fourth pass). A kernel that spills more than its entry fails.
#   bash scripts/check_spills.sh [nvcc flags]     (make spills; JOBS)
# Flags compile a measurement build instead (-DSMLA_SD_NARROW_FAST_END=0): the same allowances.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/cubin.sh  # require_nvcc, lib_cubin
require_nvcc check_spills
JOBS=${JOBS:-$(nproc)}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# sparse_decode_kernel<rows, d, format, pair, persistent, logits> -> bytes of spill stores allowed
# (nvcc 13.0; every kernel not named: 0). The named ones spill outside their loops (per-unit
# starts of persistent CTAs, the dense fp8_e4m3 consumers' setup).
declare -A allowed=(
  [64,512,0,0,1,0]=8 [64,576,0,0,1,0]=8
  [64,576,2,0,1,0]=264 [32,576,2,0,0,0]=36
  [64,576,3,0,0,1]=48 [64,576,3,0,1,1]=480
  [64,512,4,0,1,1]=280 [64,512,4,1,1,1]=12
)

export -f lib_cubin
ls src/cuda/sparse_decode/instantiations/*.cu | xargs -P "$JOBS" -I{} bash -c \
  'log="$0/$(basename {} .cu).log"; lib_cubin {} /dev/null -Xptxas -v "${@:1}" > "$log" 2>&1 || { cat "$log"; exit 1; }' "$out" "$@"

fail=0 n=0
while read -r key bytes; do
  n=$((n + 1))
  max=${allowed[$key]:-0}
  if (( bytes > max )); then
    echo "SPILLS  sparse_decode_kernel<$key>: $bytes bytes of spill stores, at most $max"
    fail=1
  fi
done < <(cat "$out"/*.log | grep -E "Function properties for|spill stores" | paste - - |
  sed -nE 's/.*sparse_decode_kernelILi([0-9]+)ELi([0-9]+)ELi([0-9]+)ELb([01])ELb([01])ELb([01])E.*, ([0-9]+) bytes spill stores.*/\1,\2,\3,\4,\5,\6 \7/p')
(( n > 0 )) || { echo "check_spills: no kernel found in ptxas's report"; exit 1; }
(( fail == 0 )) && echo "check_spills: $n kernels${*:+ ($*)}, none spills more than it may"
exit $fail
