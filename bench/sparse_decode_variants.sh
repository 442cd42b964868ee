#!/usr/bin/env bash
# A/B of the sparse-decode kernel's compile-time variants (src/cuda/sparse_decode/config.h) in
# one device call: one build folder per variant, built in parallel, then the same `smla bench`
# configurations on each. A variant is a number n (SMLA_SD_VARIANT=n) or NAME=VALUE (any of
# config.h's SMLA_SD_* macros); "env:VAR=VALUE" runs the first build with an environment variable
# instead. Run from the repository root on the GPU machine:
#   bash bench/sparse_decode_variants.sh "0 SMLA_SD_PAIR_AHEAD=0 env:SMLA_SPARSE_DECODE_KERNEL=unpaired" [bench flags...]
# VARIANT_TESTS=<gtest filter> also builds the GPU test suite of every variant (GoogleTest from
# .gpu/googletest) and runs that filter on it first: a variant that is to ship must pass them;
# an "env:" variant runs the first build's suite with its variable set. TEST_SHARDS=n runs each
# in n GoogleTest shards at once (the whole suite: ~95 s in 4 + 2 shards on an H100).
# CONFIGS_SD="--b 128 --s_q 1 --h_q 32;..." replaces the timed configurations; OP_FLAGS replaces
# the operation's flags (default "--op sparse_decode --format fp8_ds_mla --topk 2048"), e.g.
# OP_FLAGS="--op sparse_prefill" CONFIGS_SD="--s_q 4096 --h_q 128 --topk 2048 --s_kv 32768".
# The first variant is also timed with environment variables: "env:SMLA_SPARSE_PREFILL_KERNEL=generic".
# BENCH_TIMEOUT (s, default 300) bounds each timed run, so a build that hangs costs one run.
# ITERS (default 30) sets the replays a run times: rows that run into the power cap (dense bf16
# h128; PERF.md, thirty-first pass) need 90 or more, the table's count, to time what it times.
# CHECK_ROWS=0 times without the reference check (variants 3, 4, 7, 8, 9 compute wrong results by
# design, and a failed check prints only its error line). bench/variants_jsonl.py turns the
# call's $OUT/variants.txt into bench/results records.
# UNIT_TIMELINE=1 builds every variant with -DSMLA_SD_TIMELINE=3 (per-unit marks of persistent
# bf16-row CTAs, src/cuda/sparse_decode/timeline.cuh) and, instead of timing, runs each
# configuration for two launches and appends bench/unit_timeline.py's summary of its marks to
# $OUT/units-summary.txt (the marks in $OUT/units-<build>-<n>.txt).
# A variant with SMLA_SD_TIMELINE=4 (the 32-row roles' per-block marks, timeline.cuh) is run the
# same way and summarized by bench/roles_timeline.py into $OUT/roles-summary.txt; on an H100 set
# SMLA_SD_DS32_DECODE=roles in the environment (its default keeps the halves there).
set -uo pipefail
VARIANTS=${1:-"0 3 4 7"}
shift || true
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export PATH=$PATH:/usr/local/cuda/bin
# A variant of several macros joins them with '+': SMLA_SD_LAZY_RESCALE=0+SMLA_SD_PREFETCH=0.
TL=${UNIT_TIMELINE:+-DSMLA_SD_TIMELINE=3}
source bench/variant_build.sh  # define, dir, build_variant, unpack_prebuilt
builds=$(for v in $VARIANTS; do [[ $v == env:* ]] || echo "$v"; done)
first=$(echo "$builds" | head -1)
TESTS=${VARIANT_TESTS:-}
targets="smla_cli${TESTS:+ smla_gpu_tests}"
# Folders built here (scripts/prebuild_variants.sh, carried in .gpu/prebuilt) from this very tree
# are unpacked instead of built; the rest build in parallel.
to_build=
for v in $builds; do
  if unpack_prebuilt "$v" "$targets" 2>> "$OUT/prebuilt.log"; then
    echo "variant $v: prebuilt ($(cat "$(dir "$v")/SOURCE_STAMP"))" | tee -a "$OUT/prebuilt.log"
    prebuilt=1
  else
    to_build="$to_build $v"
  fi
done
[ -n "${prebuilt:-}" ] && export LD_LIBRARY_PATH=$(prebuilt_library_path)  # their runtime libraries, once
[ -n "$to_build" ] && jobs=$(( $(nproc) / $(echo $to_build | wc -w) + 1 ))
for v in $to_build; do
  ( build_variant "$v" "$targets" $jobs "$OUT/$(dir "$v").log" || echo "variant $v: build failed" ) &
done
wait
if [ -n "$TESTS" ]; then
  # Every variant runs the filter: a build on its own tests, "env:VAR=V" on the first build's with
  # the variable set (a run-time knob about to become a default), in TEST_SHARDS shards at once.
  for v in $VARIANTS; do
    if [[ $v == env:* ]]; then t=$(dir "$first")/tests/smla_gpu_tests; envs=${v#env:}; log=$OUT/env_$(echo "${v#env:}" | tr -c 'A-Za-z0-9\n' '_')
    else t=$(dir "$v")/tests/smla_gpu_tests; envs=; log=$OUT/$(dir "$v"); fi
    [ -x "$t" ] || { echo "$v | tests | not built" | tee -a "$OUT/variants.txt"; continue; }
    # The tail split's build must take it where GpuSparsePrefill.PersistentTail asks (its check).
    tail=; [[ "+$v+" == *"+SMLA_SD_TAIL_SPLIT=1+"* ]] && tail=1
    shards=${TEST_SHARDS:-1} pids= rc=0
    for ((i = 0; i < shards; i++)); do
      env $envs SMLA_EXPECT_TAIL_SPLIT=$tail GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i \
          timeout ${TEST_TIMEOUT:-300} "$t" --gtest_filter="$TESTS" > "${log}_tests.$i.log" 2>&1 &
      pids="$pids $!"
    done
    for pid in $pids; do wait "$pid" || rc=$?; done  # the last failing shard's code, 0 if none
    echo "$v | tests $TESTS | rc=$rc $(cat "${log}"_tests.*.log | grep -E '^\[  PASSED  \]|^\[  FAILED  \]' | tr '\n' ' ')" | tee -a "$OUT/variants.txt"
  done
fi
if [ -n "${CONFIGS_SD:-}" ]; then
  IFS=';' read -r -a CONFIGS <<< "$CONFIGS_SD"
else
  CONFIGS=("--b 128 --s_q 1 --h_q 64" "--b 128 --s_q 1 --h_q 16" "--b 128 --s_q 2 --h_q 128")
fi
n=0
for cfg in "${CONFIGS[@]}"; do
  n=$((n + 1))
  for v in $VARIANTS; do
    if [[ $v == env:* ]]; then bin=$(dir "$first")/tools/smla; envs=${v#env:}; else bin=$(dir "$v")/tools/smla; envs=; fi
    [ -x "$bin" ] || continue
    if [ -n "$TL" ]; then
      marks="$OUT/units-$(dir "$v")-$n.txt"
      timeout ${BENCH_TIMEOUT:-300} env $envs "$bin" bench ${OP_FLAGS:---op sparse_decode --format fp8_ds_mla --topk 2048} $cfg \
          --iters 2 --warmup 1 --check_rows 0 "$@" 2>&1 | grep unit_timeline > "$marks"
      { echo "== $v | $cfg"; python3 bench/unit_timeline.py "$marks"; } >> "$OUT/units-summary.txt" 2>&1
      continue
    fi
    if [[ "+$v+" == *"+SMLA_SD_TIMELINE=4+"* ]]; then  # the 32-row roles' per-block marks
      marks="$OUT/roles-$(dir "$v")-$n.txt"
      timeout ${BENCH_TIMEOUT:-300} env $envs "$bin" bench ${OP_FLAGS:---op sparse_decode --format fp8_ds_mla --topk 2048} $cfg \
          --iters 2 --warmup 1 --check_rows 0 "$@" 2>&1 | grep role_timeline > "$marks"
      { echo "== $v | $cfg"; python3 bench/roles_timeline.py "$marks"; } >> "$OUT/roles-summary.txt" 2>&1
      continue
    fi
    r=$(timeout ${BENCH_TIMEOUT:-300} env $envs "$bin" bench ${OP_FLAGS:---op sparse_decode --format fp8_ds_mla --topk 2048} $cfg --iters ${ITERS:-30} \
        --check_rows ${CHECK_ROWS:-2} "$@" 2>&1 | grep -E "sparse_decode|sparse_prefill|dense_decode|rror" | tail -1)
    echo "$v | $cfg | $r" | tee -a "$OUT/variants.txt"
  done
done
