#!/usr/bin/env bash
# Nsight Compute profile of one sparse-decode kernel launch (METHOD.md: one config, not all):
# the details page (throughputs, warp states, stalls) and per-SASS-instruction stall samples.
# Run on the GPU machine after a build: bash bench/ncu_sparse_decode.sh NAME [smla bench flags...]
#   e.g. bash bench/ncu_sparse_decode.sh h64 --b 128 --s_q 1 --h_q 64
# Then, anywhere: python3 bench/ncu_roles.py NAME.source.csv (the stall samples role by role).
set -uo pipefail
NAME=$1
shift
OUT=${OUT:-$PWD/gpu-out}
BIN=${SMLA_BIN:-./build-gpu/tools/smla}
mkdir -p "$OUT"
ncu --kernel-name regex:sparse_decode_kernel --launch-skip 1 --launch-count 1 --set full --import-source yes \
    -f -o "$OUT/$NAME" "$BIN" bench --op sparse_decode --format fp8_ds_mla --topk 2048 --eager --warmup 1 --iters 1 \
    --check_rows 0 "$@" > "$OUT/$NAME.ncu.log" 2>&1
ncu -i "$OUT/$NAME.ncu-rep" --page details > "$OUT/$NAME.details.txt" 2>&1
ncu -i "$OUT/$NAME.ncu-rep" --page source --csv --print-source sass > "$OUT/$NAME.source.csv" 2>&1
