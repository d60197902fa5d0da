// The /health, /readyz and /livez watchdog over the engine's step loop (`--watchdog-s`): the engine
// is stuck when its step counter has not moved for the timeout while work was pending (requests
// running or waiting) all that time. An idle engine is never stuck, however long it idles; a long
// step (a big prefill chunk on a slow machine) is stuck only if it takes longer than the timeout.
//
// It is fed by whoever asks (each /health, /readyz or /livez), not by a thread of its own: a stall
// is known from the first observation that sees the same step count with work pending, so it turns
// unhealthy at the first probe at least `timeout_s` after that observation.
//
//   StepWatchdog watchdog(30.0);
//   StepWatchdog::Verdict v = watchdog.Observe(stats.steps, stats.running + stats.waiting > 0,
//                                              StepWatchdog::Clock::now());
//   if (v.stuck) reply 503;
//
// Thread rules: Observe may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>

namespace kvserve {

class StepWatchdog {
 public:
  using Clock = std::chrono::steady_clock;

  struct Verdict {
    bool stuck = false;
    double stalled_s = 0;  // how long the step count has not moved with work pending
  };

  // `timeout_s` <= 0 turns the watchdog off (never stuck).
  explicit StepWatchdog(double timeout_s) : timeout_s_(timeout_s) {}

  // `steps`: the engine's step counter now; `pending`: requests running or waiting now; `now`:
  // the time of the observation (monotonic; the tests pass their own).
  Verdict Observe(uint64_t steps, bool pending, Clock::time_point now);

  double timeout_s() const { return timeout_s_; }

 private:
  const double timeout_s_;
  std::mutex mutex_;  // guards the fields below
  bool seen_ = false;
  uint64_t last_steps_ = 0;
  // Since when the step count has stood still with work pending; only valid while stalled_.
  Clock::time_point stalled_since_;
  bool stalled_ = false;
};

}  // namespace kvserve
