#!/usr/bin/env bash
# The one-call GPU check, run on the device machine from the repository root:
#   build (sm_90a) -> GPU test suite against the CPU reference -> compute-sanitizer memcheck
#   on a small case of every kernel -> ceilings + benchmark set -> the Python package (pip
#   install, pytest with the CUDA tests required) -> on 2+ GPUs, the DCP check and combine
#   benchmark (bench/dcp_combine.py, one process per GPU over NCCL) -> summary.
# Logs go to $OUT (or ./gpu-out), packed into logs.tar.gz at the end. Needs .gpu/ from
# scripts/prepare_gpu_carry.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
SUMMARY=$OUT/summary.md
export PATH=$PATH:/usr/local/cuda/bin
STEPS=${STEPS:-build,tests,sanitizer,bench,python,dcp}
# STEPS may also name ncu (not a default step; below).
# Narrower runs: BUILD_TARGETS (default: all), GPU_TEST_ARGS (e.g. --gtest_filter=...),
# SANITIZER_FILTER (gtest filter of the memcheck step), RUN_SET_ARGS (e.g. --only sd_),
# RUN_MAIN=0 skips `smla run` in the bench step; PYTEST_ARGS replaces the pytest targets;
# DCP_ARGS adds flags to bench/dcp_combine.py (e.g. --graphs).
# Never NVLink multicast (SHARP) for NCCL here.
export NCCL_NVLS_ENABLE=0
# The commit that bench/run_set.py and bench/dcp_combine.py record with their results.
export SMLA_COMMIT=$(cat .gpu/COMMIT 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)
has() { [[ ",$STEPS," == *",$1,"* ]]; }
status=0

{
  echo "# smla GPU check"
  echo "- date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "- commit: $(cat .gpu/COMMIT 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "- device: $(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null)"
  echo "- nvcc: $(nvcc --version | tail -2 | head -1)"
} > "$SUMMARY"

# The default build's CLI and GPU tests prebuilt here (scripts/prebuild_variants.sh "0" tests)
# stand in for the build when their source stamp is this tree's and they load on this machine
# (PREBUILT=0: always build). The sanitizer, bench and ncu steps run the same programs.
if has build && [ "${PREBUILT:-1}" = 1 ] && [ -f .gpu/prebuilt/build-v0.tar.xz ] &&
   source bench/variant_build.sh && unpack_prebuilt 0 "smla_cli smla_gpu_tests" 2> "$OUT/prebuilt.log"; then
  rm -rf build-gpu && ln -s build-v0 build-gpu
  export LD_LIBRARY_PATH=$(prebuilt_library_path)
  echo "- build: the prebuilt default build (source stamp $(cat build-v0/SOURCE_STAMP))" >> "$SUMMARY"
  STEPS=${STEPS//build/prebuilt}
fi

if has build; then
  t0=$(date +%s)
  cmake -S . -B build-gpu -G Ninja -DSMLA_CUDA=ON -DSMLA_CUTLASS_INCLUDE=$PWD/.gpu/include \
        -DSMLA_GTEST_SOURCE_DIR=$PWD/.gpu/googletest > "$OUT/build.log" 2>&1 &&
  cmake --build build-gpu -j "$(nproc)" ${BUILD_TARGETS:+--target $BUILD_TARGETS} >> "$OUT/build.log" 2>&1
  rc=$?
  echo "- build: rc=$rc in $(( $(date +%s) - t0 )) s" >> "$SUMMARY"
  if [ $rc -ne 0 ]; then tail -40 "$OUT/build.log"; cat "$SUMMARY"; exit 1; fi
fi

if has tests; then
  t0=$(date +%s)
  # A hung kernel must not eat the whole device call.
  timeout ${TEST_TIMEOUT:-900} ./build-gpu/tests/smla_gpu_tests ${GPU_TEST_ARGS:-} > "$OUT/gpu_tests.log" 2>&1
  rc=$?
  [ $rc -ne 0 ] && status=1
  echo "- GPU tests: rc=$rc in $(( $(date +%s) - t0 )) s; $(grep -E '^\[  PASSED  \]|^\[  FAILED  \]' "$OUT/gpu_tests.log" | tr '\n' ' ')" >> "$SUMMARY"
  grep -E "^\[  FAILED  \]|Failure|error" "$OUT/gpu_tests.log" | head -40 >> "$SUMMARY"
  # The sparse-decode and graph tests again with one launch choice forced: rerun VAR=VALUE FILTER
  # LOG LABEL (the log under $OUT, the label in the summary).
  rerun() {
    env "$1" timeout ${TEST_TIMEOUT:-900} ./build-gpu/tests/smla_gpu_tests --gtest_filter="$2" > "$OUT/$3" 2>&1
    local rc=$?
    [ $rc -ne 0 ] && status=1
    echo "- GPU sparse-decode + graph tests, $4: rc=$rc; $(grep -E '^\[  PASSED  \]|^\[  FAILED  \]' "$OUT/$3" | tr '\n' ' ')" >> "$SUMMARY"
  }
  # The persistent sparse-decode kernel runs only on grids beyond one wave: forced on every
  # 64-row packed launch.
  rerun SMLA_SPARSE_DECODE_KERNEL=persistent 'GpuSparseDecode.*:GpuGraph.*' gpu_tests_persistent.log \
    "persistent kernel forced"
  # Small batches above 32 heads run on 16-row tiles (attention_launch.cu narrow_floor): the
  # 64-row tiles kept there.
  rerun SMLA_SD_ROWS=64 'GpuSparseDecode.*:GpuGraph.*:-*RealShapeSampled*' gpu_tests_rows64.log \
    "64-row tiles kept at small batches"
  # The 32-row fp8_ds_mla decode tiles take their warpgroups in roles only for unsplit launches on
  # a bandwidth-rich device (launch.cu ds32_decode_roles): the roles on every such launch, and the
  # halves on every one (which an H200 would otherwise run only where the schedule splits).
  rerun SMLA_SD_DS32_DECODE=roles 'GpuSparseDecode.*:GpuGraph.*:-*RealShapeSampled*' gpu_tests_ds32_roles.log \
    "32-row fp8_ds_mla decode in roles"
  rerun SMLA_SD_DS32_DECODE=halves 'GpuSparseDecode.*:GpuGraph.*:-*RealShapeSampled*' gpu_tests_ds32_halves.log \
    "32-row fp8_ds_mla decode in halves"
  if [ -x ./build-gpu/tests/smla_cpu_tests ]; then
    ./build-gpu/tests/smla_cpu_tests --gtest_brief=1 > "$OUT/cpu_tests.log" 2>&1
    rc=$?
    [ $rc -ne 0 ] && status=1
    echo "- CPU tests on the device host: rc=$rc; $(grep -E '^\[  PASSED  \]|^\[  FAILED  \]' "$OUT/cpu_tests.log" | tr '\n' ' ')" >> "$SUMMARY"
  fi
fi

if has sanitizer; then
  small=${SANITIZER_FILTER:-'GpuDcp.RescaleMatchesCpu:GpuSparseDecode.V32Fp8DsMlaHeads:GpuSparseDecode.HeadTilesAndTokens:GpuSparseDecode.SmallBatchSplitsKv:GpuSparseDecode.V4Model1WithExtraCache:GpuSparseDecode.Bf16Cache:GpuSparseDecode.AllInvalid*:GpuSparsePrefill.Shapes:GpuDenseDecode.DtypesAndHeads:GpuDenseDecode.PageSizesAndCausal:GpuDenseDecode.Fp8CacheOnFamily:GpuCacheIo.*:GpuMergeStates.*:GpuMetadata.*'}
  timeout ${SANITIZER_TIMEOUT:-900} compute-sanitizer --tool memcheck --error-exitcode 9 ./build-gpu/tests/smla_gpu_tests --gtest_filter="$small" \
    > "$OUT/memcheck.log" 2>&1
  rc=$?
  [ $rc -ne 0 ] && status=1
  echo "- compute-sanitizer memcheck (small case of every kernel): rc=$rc; $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1)" >> "$SUMMARY"
  grep -E "^\[  FAILED  \]|Failure|Expected|Which is|off,|got .* ref" "$OUT/memcheck.log" | head -40 >> "$SUMMARY"
fi

if has bench; then
  python3 bench/ceilings.py > "$OUT/ceilings.json"
  echo "- ceilings: $(cat "$OUT/ceilings.json")" >> "$SUMMARY"
  PYTHONUNBUFFERED=1 \
    python3 bench/run_set.py ./build-gpu/tools/smla "$OUT/ceilings.json" "$OUT/bench.jsonl" ${RUN_SET_ARGS:-} \
    > "$OUT/bench.log" 2>&1
  echo "" >> "$SUMMARY"
  cat "$OUT/bench.log" >> "$SUMMARY"
  if [ "${RUN_MAIN:-1}" = 1 ]; then
    ./build-gpu/tools/smla run > "$OUT/run.log" 2>&1
    echo "- smla run: rc=$?" >> "$SUMMARY"
  fi
fi

# Not in the default STEPS (its ncu replays take ~1 minute a row): where the time of each row
# that misses its target goes, one ncu profile of its attention kernel per row
# (bench/ncu_rows.py; NCU_KEYS: other rows of bench/run_set.py). The CSVs and logs travel as
# ncu.tar.gz, the records as ncu_rows.jsonl, a markdown table in the summary.
OPEN_ROWS="sd_v32_b128_sq1_h64 sd_v32_b128_sq1_h32 sd_v32_b128_sq1_h16 sd_v32_b1_sq1_h128 dd_bf16_b128_sq1_h128_L8k
dd_bf16_b128_sq2_h128_L8k dd_fp8q_b128_sq2_h128_L8k sp_d576_h128_k2048_s32k sp_d512_h128_k1024_s32k_sink
sp_d512_h64_k512_s32k_sink spf_ds_mla_d576_h128_k2048"
if has ncu; then
  t0=$(date +%s)
  python3 bench/ncu_rows.py profile ./build-gpu/tools/smla "$OUT/ncu" "$OUT/ncu_rows.jsonl" ${NCU_KEYS:-$OPEN_ROWS} \
    > "$OUT/ncu_rows.log" 2>&1
  rc=$?
  echo "- ncu of $(echo ${NCU_KEYS:-$OPEN_ROWS} | wc -w) rows: rc=$rc in $(( $(date +%s) - t0 )) s" >> "$SUMMARY"
  [ -s "$OUT/ncu_rows.jsonl" ] && python3 bench/ncu_rows.py markdown "$OUT/ncu_rows.jsonl" >> "$SUMMARY"
  (cd "$OUT" && tar czf ncu.tar.gz --exclude='*.ncu-rep' ncu && rm -rf ncu)
fi

if has python; then
  # pip builds its own tree (build-python/) with the sm_90a kernels; no network here, so the
  # preinstalled nanobind and scikit-build-core are used (--no-build-isolation).
  t0=$(date +%s)
  SMLA_CUDA=ON CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip install --no-build-isolation --no-deps . \
    > "$OUT/python_build.log" 2>&1
  rc=$?
  if [ $rc -ne 0 ]; then
    status=1
    echo "- python: pip install rc=$rc in $(( $(date +%s) - t0 )) s" >> "$SUMMARY"
    tail -30 "$OUT/python_build.log" >> "$SUMMARY"
  else
    t1=$(date +%s)
    # SMLA_REQUIRE_CUDA=1: when the CUDA tests cannot run (torch sees no GPU, no CUDA build),
    # pytest stops with an error instead of skipping them.
    SMLA_REQUIRE_CUDA=1 python3 -m pytest ${PYTEST_ARGS:-tests/python} -q -rs > "$OUT/pytest.log" 2>&1
    rc=$?
    [ $rc -ne 0 ] && status=1
    echo "- python: pip install in $(( t1 - t0 )) s; pytest rc=$rc in $(( $(date +%s) - t1 )) s: $(tail -1 "$OUT/pytest.log")" >> "$SUMMARY"
    grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -40 >> "$SUMMARY"
  fi
fi

if has dcp; then
  gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
  if [ "$gpus" -lt 2 ]; then
    echo "- DCP across GPUs: not run, this machine has $gpus GPU(s)" >> "$SUMMARY"
  else
    t0=$(date +%s)
    python3 bench/dcp_combine.py --world "$gpus" --out "$OUT/dcp_combine.jsonl" ${DCP_ARGS:-} > "$OUT/dcp_combine.log" 2>&1
    rc=$?
    [ $rc -ne 0 ] && status=1
    echo "- DCP across $gpus GPUs (check + combine cost): rc=$rc in $(( $(date +%s) - t0 )) s" >> "$SUMMARY"
    tail -20 "$OUT/dcp_combine.log" >> "$SUMMARY"
  fi
fi

# The device tool brings back at most 8 files from $OUT: the logs travel as one archive beside
# the summary and the results (PACK_LOGS=0 leaves them as they are).
if [ "${PACK_LOGS:-1}" = 1 ]; then
  logs=$(cd "$OUT" && ls *.log 2>/dev/null)
  if [ -n "$logs" ]; then
    (cd "$OUT" && tar czf logs.tar.gz $logs && rm -f $logs)
    echo "- logs: $OUT/logs.tar.gz ($(echo $logs | wc -w) files)" >> "$SUMMARY"
  fi
fi
cat "$SUMMARY"
exit $status
