#!/usr/bin/env bash
# Run here (no GPU needed): fills the git-ignored .gpu/ with what the device machine lacks —
# the CuTe/CUTLASS headers from the nvidia-cutlass wheel and Debian's GoogleTest sources.
# Then call the device tool with carry [".gpu"] and the command `bash scripts/gpu_check.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
mkdir -p .gpu
rm -rf .gpu/include .gpu/googletest
cp -r .deps/py/cutlass_library/source/include .gpu/include
cp -r /usr/src/googletest .gpu/googletest
git rev-parse --short HEAD > .gpu/COMMIT  # the device copy has no git history
du -sh .gpu
