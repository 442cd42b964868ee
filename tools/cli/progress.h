// Progress lines on stderr for runs that take a while (GPU-sized inputs take seconds to
// build, a CPU call of a GPU-sized shape can take minutes), so stdout keeps only the results.
// By default only when stderr is a terminal: a scripted run's log gets none of them.
#pragma once

#include <chrono>
#include <string>

#include "cli/args.h"

namespace smla::cli {

class Progress {
 public:
  // `when`: "auto" (stderr is a terminal), "always" or "never"; anything else is a UsageError
  // naming --progress. Lines start with `prefix` ("smla bench").
  Progress(const std::string& when, std::string prefix);
  // The --progress flag every long-running command declares.
  static FlagSpec flag();

  bool on() const { return on_; }
  // "smla bench [1.2 s] what".
  void note(const std::string& what);
  // After call `done` of `total` of a loop (`phase`: "warm-up", "timed"): a line when the last
  // one is at least kEvery old, so a slow loop shows it is alive without flooding.
  void tick(const char* phase, int done, int total);

  static constexpr std::chrono::seconds kEvery{2};

 private:
  using Clock = std::chrono::steady_clock;
  bool on_ = false;
  std::string prefix_;
  Clock::time_point start_, last_;
};

}  // namespace smla::cli
