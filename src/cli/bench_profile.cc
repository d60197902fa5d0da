#include "cli/bench_profile.h"

#include <cstdio>

namespace kvserve {

namespace {

std::string Line(const char* format, auto... args) {
  char buffer[512];
  std::snprintf(buffer, sizeof(buffer), format, args...);
  return buffer;
}

}  // namespace

std::string FormatProfile(const BenchProfile& p) {
  const double token_us = p.token_seconds * 1e6;
  const double per_token = p.tokens > 0 ? 1.0 / p.tokens : 0.0;
  std::string out = Line(
      "\nprofile of %s: per token, over %.0f timed tokens; wall time on the calling thread; "
      "reads:\n"
      "a matmul's weights, attention's K and V rows (each KV head's once per token)\n\n"
      "| op | calls | µs | of the token | reads GB/s | waiting for workers µs | worker "
      "sleeps |\n|---|---:|---:|---:|---:|---:|---:|\n",
      p.test.c_str(), p.tokens);
  double ops_us = 0;
  uint64_t dispatches = 0, waits = 0;
  for (const ProfilingBackend::OpTotals& op : p.ops) {
    const double us = op.seconds * per_token * 1e6;
    ops_us += us;
    dispatches += op.device_dispatches;
    waits += op.device_waits;
    const uint64_t bytes = op.weight_bytes + op.kv_bytes;
    const std::string gb_s =
        bytes > 0 && op.seconds > 0 ? Line("%.1f", bytes / op.seconds / 1e9) : "";
    out += Line("| %s | %.1f | %.1f | %.1f%% | %s | %.1f | %.2f |\n", op.name.c_str(),
                op.calls * per_token, us, token_us > 0 ? 100.0 * us / token_us : 0.0, gb_s.c_str(),
                op.wait_seconds * per_token * 1e6, op.worker_sleeps * per_token);
  }
  out += Line("| all ops | | %.1f | %.1f%% | | | |\n", ops_us,
              token_us > 0 ? 100.0 * ops_us / token_us : 0.0);
  out += Line("| outside the ops | | %.1f | %.1f%% | | | |\n", token_us - ops_us,
              token_us > 0 ? 100.0 * (token_us - ops_us) / token_us : 0.0);
  out += Line("| token (the timed runs) | | %.1f | 100%% | | | |\n", token_us);
  if (dispatches > 0) {
    out += Line(
        "\ndevice: %.1f dispatches and %.1f waits per token (a batch of recorded dispatches runs, "
        "and its time falls, on the op that waits for it)\n",
        dispatches * per_token, waits * per_token);
  }
  return out;
}

nlohmann::json ProfileJson(const BenchProfile& p) {
  const double per_token = p.tokens > 0 ? 1.0 / p.tokens : 0.0;
  nlohmann::json ops = nlohmann::json::array();
  for (const ProfilingBackend::OpTotals& op : p.ops) {
    ops.push_back({{"op", op.name},
                   {"calls_per_token", op.calls * per_token},
                   {"us_per_token", op.seconds * per_token * 1e6},
                   {"wait_us_per_token", op.wait_seconds * per_token * 1e6},
                   {"worker_sleeps_per_token", op.worker_sleeps * per_token},
                   {"weight_bytes_per_token", op.weight_bytes * per_token},
                   {"kv_bytes_per_token", op.kv_bytes * per_token},
                   {"device_dispatches_per_token", op.device_dispatches * per_token},
                   {"device_waits_per_token", op.device_waits * per_token}});
  }
  return {
      {"test", p.test}, {"tokens", p.tokens}, {"token_us", p.token_seconds * 1e6}, {"ops", ops}};
}

}  // namespace kvserve
