#!/usr/bin/env bash
# Installs what the build needs and is missing: Debian's build tools and GoogleTest, the
# CuTe/CUTLASS headers from the PyPI wheel nvidia-cutlass into .deps/py (git-ignored), and the
# Python package's build and test requirements (pip, into $PYTHON's environment).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v cmake >/dev/null || need_apt+=(cmake)
command -v ninja >/dev/null || need_apt+=(ninja-build)
command -v g++ >/dev/null || need_apt+=(g++)
[ -f /usr/src/googletest/CMakeLists.txt ] || need_apt+=(googletest)
[ -f /usr/include/gtest/gtest.h ] || need_apt+=(libgtest-dev)
PYTHON=${PYTHON:-python3}
command -v "$PYTHON" >/dev/null || need_apt+=(python3)
if command -v "$PYTHON" >/dev/null; then
  "$PYTHON" -m pip --version >/dev/null 2>&1 || need_apt+=(python3-pip)
  # Python.h, for the extension module
  "$PYTHON" -c "import os, sysconfig; raise SystemExit(not os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))" \
    2>/dev/null || need_apt+=(python3-dev)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}"
fi

# CuTe is only needed when nvcc is there to compile the CUDA kernels.
if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
  if [ ! -f .deps/py/cutlass_library/source/include/cute/tensor.hpp ]; then
    python3 -m pip install -q --disable-pip-version-check --no-deps --target .deps/py "nvidia-cutlass==4.2.0.0"
  fi
fi

# The Python package (make python / make pytest): build with nanobind + scikit-build-core,
# test with pytest, numpy and torch; matplotlib for bench/plot.py (tests/python/test_bench_plot.py).
# Only what is missing is installed.
py_missing=()
for mod_pkg in nanobind:nanobind scikit_build_core:scikit-build-core pytest:pytest numpy:numpy torch:torch \
               matplotlib:matplotlib; do
  "$PYTHON" -c "import ${mod_pkg%%:*}" 2>/dev/null || py_missing+=("${mod_pkg#*:}")
done
if [ ${#py_missing[@]} -gt 0 ]; then
  "$PYTHON" -m pip install -q --disable-pip-version-check "${py_missing[@]}"
fi
