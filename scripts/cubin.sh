# Sourced by the compile-only checks (check_measurement_builds.sh, check_spills.sh) and sass.sh:
# one CUDA source of the library compiled alone for sm_90a, with the library's include paths and
# definitions, into a cubin (nothing linked or run). Run from the repository root.
export PATH="$PATH:/usr/local/cuda/bin"

# Without nvcc there is nothing to compile: the check `name` says so and passes.
require_nvcc() {
  if ! command -v nvcc > /dev/null; then
    echo "$1: no nvcc, nothing to compile"
    exit 0
  fi
}

# lib_cubin SRC OUT [nvcc flags...]
lib_cubin() {
  local src=$1 out=$2
  shift 2
  nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -I src -I include \
    -DSMLA_WITH_CUDA=1 "$@" -cubin -o "$out" "$src"
}
