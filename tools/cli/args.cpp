#include "cli/args.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>

namespace smla::cli {

Args Args::parse(const std::vector<std::string>& args, const std::vector<FlagSpec>& specs) {
  Args out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      out.help_ = true;
      continue;
    }
    if (a.size() < 3 || a.compare(0, 2, "--") != 0)
      throw UsageError("unexpected argument '" + a + "' (flags start with --)");
    std::string name = a.substr(2), value;
    bool inline_value = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      inline_value = true;
    }
    // Accept --s-q for --s_q: both spellings are common on command lines.
    std::replace(name.begin(), name.end(), '-', '_');
    auto spec = std::find_if(specs.begin(), specs.end(), [&](const FlagSpec& s) { return s.name == name; });
    if (spec == specs.end()) throw UsageError("unknown flag --" + name);
    if (spec->value_name.empty()) {
      if (inline_value) throw UsageError("flag --" + name + " takes no value, got '" + value + "'");
      value = "1";
    } else if (!inline_value) {
      if (i + 1 >= args.size()) throw UsageError("flag --" + name + " needs a value (" + spec->value_name + ")");
      value = args[++i];
    }
    if (out.values_.count(name)) throw UsageError("flag --" + name + " given twice");
    out.values_[name] = value;
  }
  return out;
}

std::string Args::str(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

std::optional<int64_t> Args::opt_integer(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  const std::string& s = it->second;
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size())
    throw UsageError("flag --" + name + " must be an integer, got '" + s + "'");
  return v;
}

int64_t Args::integer(const std::string& name, int64_t fallback) const {
  return opt_integer(name).value_or(fallback);
}

double Args::real(const std::string& name, double fallback) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  const std::string& s = it->second;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size())
    throw UsageError("flag --" + name + " must be a number, got '" + s + "'");
  return v;
}

std::vector<std::string> Args::given() const {
  std::vector<std::string> out;
  for (const auto& kv : values_) out.push_back(kv.first);
  return out;
}

std::string flags_help(const std::vector<FlagSpec>& specs) {
  std::vector<std::string> left;
  size_t width = 0;
  for (const FlagSpec& s : specs) {
    left.push_back("--" + s.name + (s.value_name.empty() ? "" : " " + s.value_name));
    width = std::max(width, left.back().size());
  }
  std::string out;
  for (size_t i = 0; i < specs.size(); ++i)
    out += "  " + left[i] + std::string(width - left[i].size() + 3, ' ') + specs[i].help + "\n";
  return out;
}

std::string wrap(const std::string& first, const std::string& text, const std::string& sep, size_t width) {
  const std::string indent(first.size(), ' ');
  std::string out, line = first;
  auto flush = [&] {
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  };
  for (size_t pos = 0; pos < text.size();) {
    // The next piece runs up to and including the next separator (or to the end).
    size_t end = text.find(sep, pos);
    end = end == std::string::npos ? text.size() : end + sep.size();
    const std::string piece = text.substr(pos, end - pos);
    if (line.size() > first.size() && line.size() + piece.size() > width + (piece.back() == ' ' ? 1 : 0)) {
      flush();
      line = indent;
    }
    line += piece;
    pos = end;
  }
  flush();
  return out;
}

}  // namespace smla::cli
