#!/usr/bin/env bash
# A/B of the sparse-decode kernel's measurement variants (SMLA_SD_VARIANT in
# src/cuda/sparse_decode/config.h) in one device call: one build folder per variant, built in
# parallel, then the same `smla bench` configurations on each. Run from the repository root on
# the GPU machine: bash bench/sparse_decode_variants.sh "0 7" [bench flags...]
set -uo pipefail
VARIANTS=${1:-"0 3 4 7"}
shift || true
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export PATH=$PATH:/usr/local/cuda/bin
jobs=$(( $(nproc) / $(echo $VARIANTS | wc -w) + 1 ))
for v in $VARIANTS; do
  ( cmake -S . -B build-v$v -G Ninja -DSMLA_CUDA=ON -DSMLA_BUILD_TESTS=OFF -DCMAKE_CUDA_FLAGS=-DSMLA_SD_VARIANT=$v \
      > "$OUT/build-v$v.log" 2>&1 && cmake --build build-v$v -j $jobs --target smla_cli >> "$OUT/build-v$v.log" 2>&1 \
      || echo "variant $v: build failed" ) &
done
wait
CONFIGS=("--b 128 --s_q 1 --h_q 64" "--b 128 --s_q 1 --h_q 16" "--b 128 --s_q 2 --h_q 128")
for cfg in "${CONFIGS[@]}"; do
  for v in $VARIANTS; do
    [ -x build-v$v/tools/smla ] || continue
    r=$(build-v$v/tools/smla bench --op sparse_decode --format fp8_ds_mla --topk 2048 $cfg --iters 30 --check_rows 2 "$@" 2>&1 | grep "sparse_decode" | tail -1)
    echo "v$v | $cfg | $r" | tee -a "$OUT/variants.txt"
  done
done
