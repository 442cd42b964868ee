// The version macros agree with each other and with pyproject.toml, the Python package's
// version (CMakeLists.txt checks project() against version.h when it configures).
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <string>

#include "smla/smla.h"

#ifndef SMLA_SOURCE_DIR
#error "SMLA_SOURCE_DIR must name the source tree (tests/CMakeLists.txt defines it)"
#endif

TEST(Version, MacrosAgree) {
  const std::string parts = std::to_string(SMLA_VERSION_MAJOR) + "." + std::to_string(SMLA_VERSION_MINOR) + "." +
                            std::to_string(SMLA_VERSION_PATCH);
  EXPECT_EQ(parts, SMLA_VERSION);
}

TEST(Version, MatchesPyproject) {
  const std::string path = std::string(SMLA_SOURCE_DIR) + "/pyproject.toml";
  std::ifstream file(path);
  ASSERT_TRUE(file) << "cannot read " << path;
  // The first `version = "..."` of the [project] table.
  const std::regex version_line(R"re(^\s*version\s*=\s*"([^"]*)")re");
  std::string line, table, version;
  while (std::getline(file, line)) {
    if (line.starts_with("[")) {
      table = line.substr(0, line.find(']') + 1);
      continue;
    }
    std::smatch m;
    if (table == "[project]" && std::regex_search(line, m, version_line)) {
      version = m[1];
      break;
    }
  }
  ASSERT_FALSE(version.empty()) << "no version in the [project] table of " << path;
  EXPECT_EQ(version, SMLA_VERSION) << "pyproject.toml and include/smla/version.h disagree";
}
