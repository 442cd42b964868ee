#include "cli/progress.h"

#include <unistd.h>

#include <cstdio>
#include <iostream>

namespace smla::cli {

Progress::Progress(const std::string& when, std::string prefix)
    : prefix_(std::move(prefix)), start_(Clock::now()), last_(start_) {
  if (when == "auto") on_ = isatty(STDERR_FILENO) == 1;
  else if (when == "always") on_ = true;
  else if (when == "never") on_ = false;
  else throw UsageError("--progress must be auto, always or never, got '" + when + "'");
}

FlagSpec Progress::flag() {
  return {"progress", "WHEN",
          "progress lines on stderr: auto (default: only when stderr is a terminal), always or never"};
}

void Progress::note(const std::string& what) {
  if (!on_) return;
  last_ = Clock::now();
  char t[32];
  std::snprintf(t, sizeof(t), "%.1f", std::chrono::duration<double>(last_ - start_).count());
  // One write per line: stdout and stderr may share a terminal.
  std::cerr << (prefix_ + " [" + t + " s] " + what + "\n") << std::flush;
}

void Progress::tick(const char* phase, int done, int total) {
  if (!on_ || Clock::now() - last_ < kEvery) return;
  note(std::string(phase) + " call " + std::to_string(done) + "/" + std::to_string(total));
}

}  // namespace smla::cli
