// smla: run the main job, time one configuration, or list what the kernels support.
#include <cstring>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "smla/error.h"

namespace {

const char* kUsage =
    "usage: smla <command> [flags]\n"
    "\n"
    "commands:\n"
    "  run     the main job: a DeepSeek V3.2 decode step, a V4 decode and a sparse prefill chunk,\n"
    "          timed on the best backend present and checked on sampled rows\n"
    "  bench   time one configuration of one operation (median of repeated calls)\n"
    "  caps    what each kernel family supports, and why a configuration is not supported\n"
    "          (--json: the same as JSON)\n"
    "\n"
    "`smla <command> --help` lists a command's flags. Exit codes: 0 success, 1 a failed check\n"
    "or call, 2 a bad command line.\n";

}  // namespace

int main(int argc, char** argv) {
  using namespace smla::cli;
  if (argc < 2) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::cout << kUsage;
    return 0;
  }
  const std::vector<std::string> args(argv + 2, argv + argc);
  try {
    if (cmd == "run") return cmd_run(args);
    if (cmd == "bench") return cmd_bench(args);
    if (cmd == "caps") return cmd_caps(args);
    std::cerr << "smla: unknown command '" << cmd << "'\n\n" << kUsage;
    return 2;
  } catch (const UsageError& e) {
    std::cerr << "smla " << cmd << ": " << e.what() << "\n(see smla " << cmd << " --help)\n";
    return 2;
  } catch (const smla::Error& e) {
    std::cerr << "smla " << cmd << ": rejected: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "smla " << cmd << ": error: " << e.what() << "\n";
    return 1;
  }
}
