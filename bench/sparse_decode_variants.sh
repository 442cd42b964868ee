#!/usr/bin/env bash
# A/B of the sparse-decode kernel's compile-time variants (src/cuda/sparse_decode/config.h) in
# one device call: one build folder per variant, built in parallel, then the same `smla bench`
# configurations on each. A variant is a number n (SMLA_SD_VARIANT=n) or NAME=VALUE (any of
# config.h's SMLA_SD_* macros); "env:VAR=VALUE" runs the first build with an environment variable
# instead. Run from the repository root on the GPU machine:
#   bash bench/sparse_decode_variants.sh "0 SMLA_SD_PAIR_AHEAD=0 env:SMLA_SPARSE_DECODE_KERNEL=unpaired" [bench flags...]
set -uo pipefail
VARIANTS=${1:-"0 3 4 7"}
shift || true
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export PATH=$PATH:/usr/local/cuda/bin
define() { [[ $1 == *=* ]] && echo "-D$1" || echo "-DSMLA_SD_VARIANT=$1"; }
dir() { echo "build-v$(echo "$1" | tr -c 'A-Za-z0-9\n' '_')"; }
builds=$(for v in $VARIANTS; do [[ $v == env:* ]] || echo "$v"; done)
first=$(echo "$builds" | head -1)
jobs=$(( $(nproc) / $(echo $builds | wc -w) + 1 ))
for v in $builds; do
  ( cmake -S . -B "$(dir "$v")" -G Ninja -DSMLA_CUDA=ON -DSMLA_BUILD_TESTS=OFF -DCMAKE_CUDA_FLAGS="$(define "$v")" \
      > "$OUT/$(dir "$v").log" 2>&1 && cmake --build "$(dir "$v")" -j $jobs --target smla_cli >> "$OUT/$(dir "$v").log" 2>&1 \
      || echo "variant $v: build failed" ) &
done
wait
CONFIGS=("--b 128 --s_q 1 --h_q 64" "--b 128 --s_q 1 --h_q 16" "--b 128 --s_q 2 --h_q 128")
for cfg in "${CONFIGS[@]}"; do
  for v in $VARIANTS; do
    if [[ $v == env:* ]]; then bin=$(dir "$first")/tools/smla; envs=${v#env:}; else bin=$(dir "$v")/tools/smla; envs=; fi
    [ -x "$bin" ] || continue
    r=$(env $envs "$bin" bench --op sparse_decode --format fp8_ds_mla --topk 2048 $cfg --iters 30 --check_rows 2 "$@" 2>&1 | grep "sparse_decode" | tail -1)
    echo "$v | $cfg | $r" | tee -a "$OUT/variants.txt"
  done
done
