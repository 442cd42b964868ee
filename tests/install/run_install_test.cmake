# Installs a built smla tree into a scratch prefix, then configures, builds and runs the
# consumer project against it with find_package(smla): what a user of the installed package
# does. Run by ctest as `cmake -D... -P run_install_test.cmake`; the variables:
#   SMLA_BINARY_DIR      the smla build to install
#   CONSUMER_SOURCE_DIR  tests/install/consumer
#   WORK_DIR             scratch folder (emptied first)
#   CONFIG               the build configuration (may be empty)
#   GENERATOR, MAKE_PROGRAM, CXX_COMPILER  what the smla build used
#   BINDIR, INCLUDEDIR, LIBDIR             its CMAKE_INSTALL_<dir>
#   EXPECT_CLI           whether the smla CLI was built (and so installed)
#   EXPECT_CUDA          whether the library was built with the CUDA kernels
#   EXPECT_VERSION       project(smla VERSION ...)
cmake_minimum_required(VERSION 3.24)

foreach(_var SMLA_BINARY_DIR CONSUMER_SOURCE_DIR WORK_DIR GENERATOR CXX_COMPILER
             BINDIR INCLUDEDIR LIBDIR EXPECT_VERSION)
  if(NOT DEFINED ${_var} OR "${${_var}}" STREQUAL "")
    message(FATAL_ERROR "run_install_test.cmake: -D${_var}=... is required")
  endif()
endforeach()

# Runs a command; fails the test with its output when it fails. The output goes to _out.
function(run_step name)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "${name} failed (${_rc}):\n  ${ARGN}\n${_out}")
  endif()
  message(STATUS "${name}: ok")
  set(_out "${_out}" PARENT_SCOPE)
endfunction()

set(_prefix "${WORK_DIR}/prefix")
set(_build "${WORK_DIR}/consumer-build")
file(REMOVE_RECURSE "${WORK_DIR}")

set(_config_args "")
if(CONFIG)
  set(_config_args --config "${CONFIG}")
endif()
run_step("install" "${CMAKE_COMMAND}" --install "${SMLA_BINARY_DIR}" --prefix "${_prefix}" ${_config_args})

foreach(_file
    "${INCLUDEDIR}/smla/smla.h"
    "${INCLUDEDIR}/smla/version.h"
    "${LIBDIR}/libsmla.a"
    "${LIBDIR}/cmake/smla/smlaConfig.cmake"
    "${LIBDIR}/cmake/smla/smlaConfigVersion.cmake"
    "${LIBDIR}/cmake/smla/smlaTargets.cmake")
  if(NOT EXISTS "${_prefix}/${_file}")
    message(FATAL_ERROR "not installed: ${_file}")
  endif()
endforeach()
if(EXPECT_CLI)
  run_step("installed CLI" "${_prefix}/${BINDIR}/smla" caps --op merge_states)
endif()

set(_configure_args -S "${CONSUMER_SOURCE_DIR}" -B "${_build}" -G "${GENERATOR}"
  "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" "-DCMAKE_PREFIX_PATH=${_prefix}"
  "-DSMLA_EXPECT_VERSION=${EXPECT_VERSION}")
if(MAKE_PROGRAM)
  list(APPEND _configure_args "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()
if(CONFIG)
  list(APPEND _configure_args "-DCMAKE_BUILD_TYPE=${CONFIG}")
endif()
run_step("configure consumer" "${CMAKE_COMMAND}" ${_configure_args})
run_step("build consumer" "${CMAKE_COMMAND}" --build "${_build}" ${_config_args})

# The package must be the one just installed, not another smla on the system.
file(STRINGS "${_build}/CMakeCache.txt" _smla_dir REGEX "^smla_DIR:")
string(REGEX REPLACE "^smla_DIR:[A-Z]+=" "" _smla_dir "${_smla_dir}")
file(REAL_PATH "${_smla_dir}" _smla_dir)
file(REAL_PATH "${_prefix}/${LIBDIR}/cmake/smla" _expected_dir)
if(NOT _smla_dir STREQUAL _expected_dir)
  message(FATAL_ERROR "the consumer found smla in ${_smla_dir}, not in ${_expected_dir}")
endif()

# Single-config generators put the executable in the build folder, multi-config ones in
# a folder per configuration.
set(_exe "${_build}/consumer")
if(NOT EXISTS "${_exe}" AND CONFIG)
  set(_exe "${_build}/${CONFIG}/consumer")
endif()
run_step("run consumer" "${_exe}")
message(STATUS "consumer says: ${_out}")

if(EXPECT_CUDA)
  set(_cuda 1)
else()
  set(_cuda 0)
endif()
string(FIND "${_out}" "smla ${EXPECT_VERSION} cuda=${_cuda}" _at)
if(_at EQUAL -1)
  message(FATAL_ERROR "the consumer should report smla ${EXPECT_VERSION} cuda=${_cuda}")
endif()
