#!/usr/bin/env bash
# Per-unit timelines (-DSMLA_SD_TIMELINE=3) of the persistent bf16-row CTAs for one or more builds in
# one device call: each variant is built with the timeline on, runs one configuration, and
# bench/unit_timeline.py summarizes its last launch. Run from the repository root on the GPU machine:
#   bash bench/unit_timeline_run.sh "0 SMLA_SD_BF16_NEXT_WORK_EARLY=1+SMLA_SD_BF16_OUT_BY_WG1=1" [bench flags...]
# A variant is 0 (the default kernels), a number n (SMLA_SD_VARIANT=n) or NAME=VALUE, several
# joined by '+'. Bench flags (not --iters, --warmup or --check_rows: the script sets them) replace
# the default configuration (prefill d512 h64 k512 sink s_q 4096).
# Writes $OUT/units-<variant>.txt (the marks) and appends each summary to $OUT/units-summary.txt.
set -uo pipefail
VARIANTS=${1:-"0"}
shift || true
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export PATH=$PATH:/usr/local/cuda/bin
define() { [[ $1 == 0 ]] && echo "" || { [[ $1 == *=* ]] && echo "-D${1//+/ -D}" || echo "-DSMLA_SD_VARIANT=$1"; }; }
dir() { echo "build-tl3-$(echo "$1" | tr -c 'A-Za-z0-9\n' '_')"; }
flags=("$@")
[ ${#flags[@]} -eq 0 ] && flags=(--op sparse_prefill --s_kv 32768 --s_q 4096 --h_q 64 --d_qk 512 --sink --topk 512 --seed 7)
jobs=$(( $(nproc) / $(echo $VARIANTS | wc -w) + 1 ))
for v in $VARIANTS; do
  ( cmake -S . -B "$(dir "$v")" -G Ninja -DSMLA_CUDA=ON -DSMLA_BUILD_TESTS=OFF \
      -DCMAKE_CUDA_FLAGS="-DSMLA_SD_TIMELINE=3 $(define "$v")" > "$OUT/$(dir "$v").log" 2>&1 \
      && cmake --build "$(dir "$v")" -j $jobs --target smla_cli >> "$OUT/$(dir "$v").log" 2>&1 || echo "variant $v: build failed" ) &
done
wait
for v in $VARIANTS; do
  bin=$(dir "$v")/tools/smla
  [ -x "$bin" ] || continue
  name=$(echo "$v" | tr -c 'A-Za-z0-9\n' '_')
  timeout 120 "$bin" bench "${flags[@]}" --check_rows 0 --iters 2 --warmup 1 > "$OUT/units-$name.log" 2>&1
  grep unit_timeline "$OUT/units-$name.log" > "$OUT/units-$name.txt"
  { echo "== $v | ${flags[*]}"; python3 bench/unit_timeline.py "$OUT/units-$name.txt"; } >> "$OUT/units-summary.txt" 2>&1
done
cat "$OUT/units-summary.txt"
