// The subcommands of `smla` and the names they parse. Each command prints its own help and
// returns the process exit code: 0 success, 1 a failed check or call, 2 a bad command line
// (thrown as UsageError and reported by main).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/args.h"
#include "smla/capabilities.h"
#include "smla/tensor.h"

namespace smla::cli {

int cmd_run(const std::vector<std::string>& args);
int cmd_bench(const std::vector<std::string>& args);
int cmd_caps(const std::vector<std::string>& args);

// The operations each command accepts: the one list its --help and its --op errors are built
// from. bench: the operations it has a workload for (cmd_bench.cpp); caps: every operation the
// library's capability table lists.
std::vector<Op> bench_ops();
std::vector<Op> caps_ops();
// Every cache format, in the library's order.
std::vector<CacheFormat> all_formats();

// "a, b, c or d".
std::string op_list(const std::vector<Op>& ops);
std::string format_list();

// Name parsers: throw UsageError naming the flag, the accepted values and the value given.
// parse_op accepts only `accepted`, which `which` describes ("the operations smla bench times").
Op parse_op(const std::string& flag, const std::string& v, const std::vector<Op>& accepted,
            const std::string& which);
CacheFormat parse_cache_format(const std::string& flag, const std::string& v);
DType parse_q_dtype(const std::string& flag, const std::string& v);

// The --seed flag, or a fresh seed when absent.
uint64_t seed_from(const Args& a);
// A CUDA device this binary can use (built with CUDA and one present).
bool cuda_usable();

}  // namespace smla::cli
