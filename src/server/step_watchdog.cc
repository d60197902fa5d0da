#include "server/step_watchdog.h"

namespace kvserve {

StepWatchdog::Verdict StepWatchdog::Observe(uint64_t steps, bool pending, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool moved = !seen_ || steps != last_steps_;
  seen_ = true;
  last_steps_ = steps;
  if (moved || !pending) {
    // Progress since the last observation, or nothing to do: not stalled. With work pending, a
    // stall can only have begun now.
    stalled_ = pending;
    stalled_since_ = now;
    return {};
  }
  if (!stalled_) {
    stalled_ = true;
    stalled_since_ = now;
  }
  Verdict verdict;
  verdict.stalled_s = std::chrono::duration<double>(now - stalled_since_).count();
  verdict.stuck = timeout_s_ > 0 && verdict.stalled_s >= timeout_s_;
  return verdict;
}

}  // namespace kvserve
