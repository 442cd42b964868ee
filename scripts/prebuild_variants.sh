#!/usr/bin/env bash
# Builds variant folders of bench/sparse_decode_variants.sh here and packs their programs for the
# device (.gpu/prebuilt/<folder>.tar.xz, each with the source stamp it was built from), so that a
# device call unpacks them instead of compiling a whole library per variant. This machine is
# x86-64 like the device; the programs need glibc 2.34 and the CUDA 13 runtime there.
#   bash scripts/prebuild_variants.sh "0 SMLA_SD_TAIL_SPLIT=1" [tests]
# "tests" also builds and packs the GPU test suite (GoogleTest from .gpu/googletest:
# scripts/prepare_gpu_carry.sh). Then name ".gpu/prebuilt" in the call's carry (and
# ".gpu/googletest" where a folder may still have to be built there). JOBS: default nproc.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
TL=${UNIT_TIMELINE:+-DSMLA_SD_TIMELINE=3}
source bench/variant_build.sh  # define, dir, build_variant, source_stamp
targets="smla_cli${2:+ smla_gpu_tests}"
if [[ $targets == *tests* && ! -d .gpu/googletest ]]; then
  echo "prebuild_variants: no .gpu/googletest (run scripts/prepare_gpu_carry.sh)" >&2
  exit 1
fi
mkdir -p .gpu/prebuilt
stamp=$(source_stamp)
for v in $1; do
  d=$(dir "$v")
  log=$(mktemp)
  if ! build_variant "$v" "$targets" "${JOBS:-$(nproc)}" "$log"; then
    tail -30 "$log"
    exit 1
  fi
  rm -f "$log"
  echo "$stamp" > "$d/SOURCE_STAMP"
  files=("$d/SOURCE_STAMP" "$d/tools/smla")
  [[ $targets == *tests* ]] && files+=("$d/tests/smla_gpu_tests")
  tar -cf - "${files[@]}" | xz -T0 -6 > ".gpu/prebuilt/$d.tar.xz"
  echo "$d: $(du -h ".gpu/prebuilt/$d.tar.xz" | cut -f1), sources $stamp"
done
du -sh .gpu/prebuilt
