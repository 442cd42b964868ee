// The one error type of the library: rejects bad input before anything runs.
#pragma once

#include <stdexcept>
#include <string>

namespace smla {

class Error : public std::invalid_argument {
 public:
  // Message: "<argument> must be <expected>, got <given>".
  Error(std::string argument, std::string expected, std::string given)
      : std::invalid_argument(argument + " must be " + expected + ", got " + given),
        argument_(std::move(argument)),
        expected_(std::move(expected)),
        given_(std::move(given)) {}

  const std::string& argument() const { return argument_; }
  const std::string& expected() const { return expected_; }
  const std::string& given() const { return given_; }

 private:
  std::string argument_, expected_, given_;
};

// A failure of the CUDA runtime or of a missing backend (not an input error).
class RuntimeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace smla
