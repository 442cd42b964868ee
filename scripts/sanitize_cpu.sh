#!/usr/bin/env bash
# The CPU path under AddressSanitizer and UndefinedBehaviorSanitizer: the C++ CPU tests, then the
# Python suite (hostile calls included) through an instrumented copy of the extension module.
# Any out-of-bounds access, use after free or undefined behaviour aborts the run. No CUDA.
#   bash scripts/sanitize_cpu.sh            (make sanitize; BUILD_DIR, JOBS, PYTHON, PYTEST_ARGS)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-sanitize}
JOBS=${JOBS:-$(nproc)}
PYTHON=${PYTHON:-python3}
FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"

cmake -S . -B "$BUILD_DIR" -G Ninja -DSMLA_CUDA=OFF -DSMLA_BUILD_TESTS=ON -DSMLA_BUILD_PYTHON=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython_EXECUTABLE="$(command -v "$PYTHON")" \
  -DCMAKE_CXX_FLAGS="$FLAGS" -DCMAKE_EXE_LINKER_FLAGS="$FLAGS" -DCMAKE_SHARED_LINKER_FLAGS="$FLAGS"
cmake --build "$BUILD_DIR" -j "$JOBS" --target smla_cpu_tests _smla

# Leaks are not judged: the interpreter and torch keep memory until exit by design.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
"./$BUILD_DIR/tests/smla_cpu_tests" --gtest_brief=1

# The Python package from the source tree with the instrumented module beside it, first on
# PYTHONPATH (ahead of an installed smla). The interpreter is not instrumented, so the sanitizer
# runtimes are preloaded.
pkg="$BUILD_DIR/pkg"
rm -rf "$pkg" && mkdir -p "$pkg"
cp -r python/smla "$pkg/"
rm -f "$pkg"/smla/_smla*.so
cp "$BUILD_DIR"/python/_smla*.so "$pkg/smla/"
runtimes=""
for lib in libasan.so libubsan.so; do
  path=$(${CXX:-g++} -print-file-name="$lib")
  [ -e "$path" ] || { echo "sanitize_cpu.sh: $lib not found by ${CXX:-g++} -print-file-name" >&2; exit 1; }
  runtimes="$runtimes $path"
done
export LD_PRELOAD="${runtimes# }" PYTHONPATH="$PWD/$pkg"
"$PYTHON" -c "import smla, sys; sys.exit(0 if smla.__file__.startswith('$PWD/$pkg/') else 'smla imported from ' + smla.__file__)"
"$PYTHON" -m pytest tests/python -q -p no:cacheprovider ${PYTEST_ARGS:-}
