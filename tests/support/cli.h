// Runs the kvserve binary the way a user would, for the command-line tests.
#pragma once

#include <string>

namespace kvserve::testing {

// Runs `kvserve ARGS` through the shell, capturing stdout and stderr; returns the exit status
// (128 when the process did not exit normally).
int RunKvserve(const std::string& args, std::string* out, std::string* err);

}  // namespace kvserve::testing
