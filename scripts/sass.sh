#!/usr/bin/env bash
# SASS of one CUDA source of the library, as this machine's nvcc compiles it for sm_90a: what the
# kernels' instructions are after ptxas (which moves loads, PERF.md sixty-second pass). nvdisasm
# comes from the PyPI wheel nvidia-cuda-nvdisasm into .deps/nvdisasm (git-ignored) when the CUDA
# installation has none.
#   bash scripts/sass.sh sparse_decode_fp8_ds_mla_576 OUT.sass [nvcc flags, e.g. -DSMLA_SD_ROLES_SHARED_Q=1]
# The first argument is an instantiation (src/cuda/sparse_decode/instantiations/NAME.cu) or a
# source file's path; each kernel starts at a ".text.<mangled name>:" line of OUT.sass.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/cubin.sh  # require_nvcc, lib_cubin
require_nvcc sass
src=$1 out=$2
shift 2
[[ $src == *.cu ]] || src=src/cuda/sparse_decode/instantiations/$src.cu
dis=$(command -v nvdisasm || true)
if [ -z "$dis" ]; then
  dis=.deps/nvdisasm/nvidia/cu13/bin/nvdisasm
  [ -x "$dis" ] || python3 -m pip install -q --disable-pip-version-check --no-deps --target .deps/nvdisasm "nvidia-cuda-nvdisasm==13.5.37"
fi
cubin=$(mktemp --suffix .cubin)
trap 'rm -f "$cubin"' EXIT
lib_cubin "$src" "$cubin" "$@"  # the flags of the compile-only checks (scripts/cubin.sh)
"$dis" -c "$cubin" > "$out"
grep -c "^\.text\." "$out" | xargs echo "sass: kernels in $out:"
