#!/usr/bin/env bash
# A/B of two source trees on the GPU machine: the working tree (built in build-gpu/ by
# scripts/gpu_check.sh or here) against a baseline tree carried as .gpu/base.tar (made here by
# `git archive -o .gpu/base.tar COMMIT`), each timing the same benchmark rows on identical inputs
# (fixed --seed), alternating A, B per row so that drift hits both alike. Run from the repository root:
#   bash bench/ab_trees.sh sd_[,PREFIX...] [seed]
# Writes $OUT/ab.txt (one line per row: key, baseline µs, this tree's µs, ratio).
set -uo pipefail
ONLY=${1:-sd_}
SEED=${2:-7}
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export PATH=$PATH:/usr/local/cuda/bin
BASE=/tmp/smla-base
# AB_BUILD_ONLY=1: extract and build the baseline, then stop (to overlap it with other work).
if [ ! -x "$BASE/build/tools/smla" ]; then
  rm -rf "$BASE" && mkdir -p "$BASE" && tar -xf .gpu/base.tar -C "$BASE"
  ( cmake -S "$BASE" -B "$BASE/build" -G Ninja -DSMLA_CUDA=ON -DSMLA_BUILD_TESTS=OFF > "$OUT/ab_base_build.log" 2>&1 &&
    cmake --build "$BASE/build" -j "$(nproc)" --target smla_cli >> "$OUT/ab_base_build.log" 2>&1 ) ||
    { echo "baseline build failed"; tail -20 "$OUT/ab_base_build.log"; exit 1; }
fi
[ "${AB_BUILD_ONLY:-0}" = 1 ] && exit 0
[ -x build-gpu/tools/smla ] || { cmake -S . -B build-gpu -G Ninja -DSMLA_CUDA=ON -DSMLA_BUILD_TESTS=OFF > "$OUT/ab_build.log" 2>&1 &&
  cmake --build build-gpu -j "$(nproc)" --target smla_cli >> "$OUT/ab_build.log" 2>&1; }
[ -f "$OUT/ceilings.json" ] || python3 bench/ceilings.py > "$OUT/ceilings.json"
keys=$(python3 -c "import sys; sys.path.insert(0, 'bench'); import run_set; only = '$ONLY'.split(','); print(' '.join(k for k, *_ in run_set.CONFIGS if any(k.startswith(p) for p in only)))")
for key in $keys; do
  for side in base new; do
    bin=$([ $side = base ] && echo "$BASE/build/tools/smla" || echo build-gpu/tools/smla)
    python3 bench/run_set.py "$bin" "$OUT/ceilings.json" "$OUT/ab_$side.part" --only "$key" --flags "--seed $SEED" > /dev/null 2>&1
    cat "$OUT/ab_$side.part" >> "$OUT/ab_$side.jsonl"
  done
  python3 - "$OUT" "$key" <<'PY' | tee -a "$OUT/ab.txt"
import json, sys
out, key = sys.argv[1:]
def last(side):
    rows = [json.loads(l) for l in open(f"{out}/ab_{side}.jsonl") if l.strip()]
    rows = [r for r in rows if r["key"] == key]
    return rows[-1] if rows else None
b, n = last("base"), last("new")
if b and n:
    print(f"{key} | base {b['us']:.1f} | new {n['us']:.1f} | new/base {n['us'] / b['us']:.3f} | check {b['check']} {n['check']} {n['max_err']}")
else:
    print(f"{key} | missing")
PY
done
