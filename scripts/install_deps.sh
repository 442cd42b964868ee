#!/usr/bin/env bash
# Installs what the build needs and is missing: Debian's build tools and GoogleTest, and the
# CuTe/CUTLASS headers from the PyPI wheel nvidia-cutlass into .deps/py (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v cmake >/dev/null || need_apt+=(cmake)
command -v ninja >/dev/null || need_apt+=(ninja-build)
command -v g++ >/dev/null || need_apt+=(g++)
[ -f /usr/src/googletest/CMakeLists.txt ] || need_apt+=(googletest)
[ -f /usr/include/gtest/gtest.h ] || need_apt+=(libgtest-dev)
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
