// A tiny command-line flag parser: `--name value`, `--name=value` and switches (`--quick`).
// Every flag of a command is declared up front, so an unknown or malformed flag is an error
// the user sees at once (exit code 2), not a silently ignored typo.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace smla::cli {

// Bad command line: printed with the command's usage, exit code 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct FlagSpec {
  std::string name;        // without the leading "--"
  std::string value_name;  // empty for a switch
  std::string help;
};

class Args {
 public:
  // Parses args against specs; "--help"/"-h" is always accepted and sets help().
  static Args parse(const std::vector<std::string>& args, const std::vector<FlagSpec>& specs);

  bool help() const { return help_; }
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  bool flag(const std::string& name) const { return has(name); }
  std::string str(const std::string& name, const std::string& fallback) const;
  int64_t integer(const std::string& name, int64_t fallback) const;
  double real(const std::string& name, double fallback) const;
  std::optional<int64_t> opt_integer(const std::string& name) const;
  // Names of the flags given, sorted.
  std::vector<std::string> given() const;

 private:
  std::map<std::string, std::string> values_;
  bool help_ = false;
};

// "  --name VALUE   help" lines, aligned.
std::string flags_help(const std::vector<FlagSpec>& specs);

// `first` + `text` as lines of at most `width` columns, broken after `sep` (", " or " "), each
// line after the first indented by first.size() spaces; ends with a newline.
std::string wrap(const std::string& first, const std::string& text, const std::string& sep, size_t width = 100);

}  // namespace smla::cli
