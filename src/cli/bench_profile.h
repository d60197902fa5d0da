// `kvserve bench --profile`: where one token's time goes, op by op, from a ProfilingBackend's
// totals over a test's timed runs.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/profiling_backend.h"

namespace kvserve {

struct BenchProfile {
  std::string test;                             // "tg128"
  std::vector<ProfilingBackend::OpTotals> ops;  // the slowest first
  double tokens = 0;                            // tokens the totals cover
  double token_seconds = 0;                     // the timed runs' seconds per token
};

// A markdown table per token: op, calls, µs, share of the token, GB/s of weights (matmuls), the
// caller's wait for its workers, worker sleeps; then the ops' sum and the time outside them.
std::string FormatProfile(const BenchProfile& profile);
nlohmann::json ProfileJson(const BenchProfile& profile);

}  // namespace kvserve
