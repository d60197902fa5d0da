// Server metrics in the Prometheus text exposition format (version 0.0.4), names modelled on
// vLLM's: engine gauges and counters come from EngineStats at scrape time; latency histograms and
// per-reason request counts are recorded by the HTTP threads; process_* come from /proc/self.
//
// Thread-safe: Observe* and Render may be called from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"

namespace kvserve {

// A cumulative histogram: counts per upper bound (seconds), plus +Inf, sum and count.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void Observe(double value);
  // Appends # HELP, # TYPE and the _bucket/_sum/_count lines.
  void Render(std::string_view name, std::string_view help, std::string& out) const;
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;    // ascending
  std::vector<uint64_t> counts_;  // [bounds_.size() + 1], not cumulative; last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

struct ProcessStats {
  uint64_t resident_bytes = 0;
  double cpu_seconds = 0;   // user + system
  double start_time_s = 0;  // since the Unix epoch
  int open_fds = 0;
  // Bytes the C allocator has handed out and not had back (glibc's mallinfo2: arena chunks in
  // use, thread caches included, plus mmapped chunks); -1 without glibc. Unlike resident memory
  // it does not keep the high-water mark of the allocator's fragmentation.
  int64_t heap_in_use_bytes = -1;
};

// Reads /proc/self/stat, /proc/self/statm, /proc/self/fd and the allocator; zeros (heap: -1)
// where unavailable.
ProcessStats ReadProcessStats();

class ServerMetrics {
 public:
  // `replica` non-empty: Render adds kvserve:replica_info{replica="..."} 1.
  explicit ServerMetrics(std::string replica = "");

  void ObserveTimeToFirstToken(double seconds);
  void ObserveInterTokenLatency(double seconds);
  // A request left the engine: its end-to-end latency and finish reason.
  void ObserveRequest(double seconds, FinishReason reason);
  void CountHttpResponse(int status);

  std::string Render(const EngineStats& stats) const;

 private:
  // Finished requests by reason, HTTP responses by status, the latency histograms (locks mutex_).
  void RenderRequests(std::string& out) const;
  std::string replica_;  // label value, escaped for the exposition format
  mutable std::mutex mutex_;
  Histogram time_to_first_token_;
  Histogram inter_token_latency_;
  Histogram e2e_latency_;
  std::map<std::string, uint64_t, std::less<>> finished_;  // finish reason -> count
  std::map<int, uint64_t> http_responses_;                 // status code -> count
};

}  // namespace kvserve
