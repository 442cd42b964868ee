// The library's version. CMakeLists.txt refuses to configure when it differs from
// project(smla VERSION ...); tests/cpu/test_version.cpp ties it to pyproject.toml.
#pragma once

#define SMLA_VERSION_MAJOR 0
#define SMLA_VERSION_MINOR 1
#define SMLA_VERSION_PATCH 0
#define SMLA_VERSION "0.1.0"
