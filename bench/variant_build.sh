# Sourced by bench/sparse_decode_variants.sh (on the device) and scripts/prebuild_variants.sh
# (here): how a variant of the sparse-decode family is named, built and stamped, so that a
# folder built here is the folder the device script would have built.
# A variant is a number n (SMLA_SD_VARIANT=n) or NAME=VALUE; several macros join with '+':
# SMLA_SD_LAZY_RESCALE=0+SMLA_SD_PREFETCH=0. TL (-DSMLA_SD_TIMELINE=3 or empty) marks timeline builds.
define() { [[ $1 == *=* ]] && echo "-D${1//+/ -D}" || echo "-DSMLA_SD_VARIANT=$1"; }
dir() { echo "build-${TL:+tl3-}v$(echo "$1" | tr -c 'A-Za-z0-9\n' '_')"; }

# Configures and builds variant $1's targets ($2: "smla_cli" or "smla_cli smla_gpu_tests") with
# $3 jobs; the log goes to $4.
build_variant() {
  local v=$1 targets=$2 jobs=$3 log=$4 tests="-DSMLA_BUILD_TESTS=OFF"
  # An object that ninja holds with no dependency record (one found in build-v0, 2026-12-05)
  # would not be rebuilt after a header edit: drop such objects first.
  if [ -f "$(dir "$v")/build.ninja" ]; then
    (cd "$(dir "$v")" && ninja -t deps 2>/dev/null | sed -n 's/^\([^ ]*\.o\): #deps 0,.*/\1/p' | xargs -r rm -f) || true
  fi
  [[ $targets == *smla_gpu_tests* ]] && tests="-DSMLA_BUILD_TESTS=ON -DSMLA_GTEST_SOURCE_DIR=$PWD/.gpu/googletest"
  cmake -S . -B "$(dir "$v")" -G Ninja -DSMLA_CUDA=ON $tests -DCMAKE_CUDA_FLAGS="$TL $(define "$v")" > "$log" 2>&1 &&
    cmake --build "$(dir "$v")" -j "$jobs" --target $targets >> "$log" 2>&1
}

# What the programs are built from: every C++/CUDA/CMake source of the library, its tests and
# tools (the same on both machines: the device copy is this tree, without its history).
source_stamp() {
  find CMakeLists.txt cmake src include tests tools -type f \
      \( -name '*.cu' -o -name '*.cuh' -o -name '*.h' -o -name '*.hpp' -o -name '*.cpp' -o -name '*.txt' \
         -o -name '*.cmake' -o -name '*.in' \) | LC_ALL=C sort | xargs sha1sum | sha1sum | cut -c1-16
}

# The programs of a prebuilt folder, where they lie on the device: libcudart and libnccl from the
# toolkit or from the NCCL wheel beside PyTorch.
prebuilt_library_path() {
  local p=/usr/local/cuda/lib64:/usr/local/cuda/lib d
  d=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2>/dev/null) && p=$p:$d
  echo "$p${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

# Unpacks $PREBUILT/<folder>.tar.xz for variant $1 when it holds the targets $2, its stamp is this
# tree's and its programs load here; 0 if it did, else 1 (the caller builds).
unpack_prebuilt() {
  local v=$1 pack="${PREBUILT:-.gpu/prebuilt}/$(dir "$1").tar.xz" want have
  [ -f "$pack" ] || return 1
  # (grep reads the whole list: with -q it could stop tar early, and pipefail would count that)
  if [[ $2 == *smla_gpu_tests* ]] && ! tar -tJf "$pack" | grep "tests/smla_gpu_tests$" > /dev/null; then
    echo "prebuilt $(dir "$v"): no test suite in it: building it" >&2
    return 1
  fi
  want=$(source_stamp)
  have=$(tar -xJOf "$pack" "$(dir "$v")/SOURCE_STAMP" 2>/dev/null) || return 1
  if [ "$have" != "$want" ]; then
    echo "prebuilt $(dir "$v"): built from $have, this tree is $want: building it" >&2
    return 1
  fi
  tar -xJf "$pack" || return 1
  local lib
  lib=$(prebuilt_library_path)
  LD_LIBRARY_PATH=$lib "$(dir "$v")/tools/smla" --help > /dev/null 2>&1 || {
    echo "prebuilt $(dir "$v"): its CLI does not load here: building it" >&2
    return 1
  }
  if [[ $2 == *smla_gpu_tests* ]]; then
    LD_LIBRARY_PATH=$lib "$(dir "$v")/tests/smla_gpu_tests" --gtest_list_tests > /dev/null 2>&1 || {
      echo "prebuilt $(dir "$v"): its test suite does not load here: building it" >&2
      return 1
    }
  fi
}
