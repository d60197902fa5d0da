#include "server/metrics.h"

#include <dirent.h>
#include <malloc.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>

namespace kvserve {

namespace {

// Prometheus renders floats in Go's notation; %.17g round-trips and parses there too.
std::string Number(double x) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.17g", x);
  return buffer;
}

void Header(std::string_view name, std::string_view type, std::string_view help, std::string& out) {
  out.append("# HELP ").append(name).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

// A label value in the exposition format: backslash, double quote and newline escaped.
std::string LabelValue(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out.append("\\n");
      continue;
    }
    out.push_back(c);
  }
  return out;
}

void Sample(std::string_view name, std::string_view labels, double value, std::string& out) {
  out.append(name);
  if (!labels.empty()) out.append("{").append(labels).append("}");
  out.append(" ").append(Number(value)).append("\n");
}

const std::vector<double> kTtftBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08,
                                          0.1,   0.25,  0.5,  0.75, 1.0,  2.5,  5.0,
                                          7.5,   10.0,  20.0, 40.0, 80.0};
const std::vector<double> kItlBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                         0.075,  0.1,   0.15,   0.2,   0.3,  0.4,   0.5,
                                         0.75,   1.0,   2.5,    5.0,   10.0};
const std::vector<double> kE2eBuckets = {0.01, 0.05, 0.1,   0.3,   0.5,   0.8,  1.0,
                                         2.5,  5.0,  10.0,  15.0,  20.0,  30.0, 40.0,
                                         50.0, 60.0, 120.0, 240.0, 480.0, 960.0};

void Gauge(std::string_view name, std::string_view help, double value, std::string& out) {
  Header(name, "gauge", help, out);
  Sample(name, "", value, out);
}

void Counter(std::string_view name, std::string_view help, double value, std::string& out) {
  Header(name, "counter", help, out);
  Sample(name, "", value, out);
}

// The engine's state: requests, KV blocks, sessions, prefix cache, tokens, steps, shifts.
void RenderEngine(const EngineStats& stats, std::string& out) {
  Gauge("kvserve:num_requests_running", "Requests in the running batch.", stats.running, out);
  Gauge("kvserve:num_requests_waiting", "Requests waiting to be scheduled.", stats.waiting, out);
  Gauge("kvserve:kv_cache_usage_perc", "Fraction of KV blocks in use (1 = full).",
        stats.blocks_total > 0 ? static_cast<double>(stats.blocks_used) / stats.blocks_total : 0,
        out);
  Header("kvserve:kv_cache_blocks", "gauge",
         "KV blocks by state: used (referenced), cached (reusable prefix), free.", out);
  Sample("kvserve:kv_cache_blocks", "state=\"used\"", stats.blocks_used, out);
  Sample("kvserve:kv_cache_blocks", "state=\"cached\"", stats.blocks_cached, out);
  Sample("kvserve:kv_cache_blocks", "state=\"free\"", stats.blocks_free, out);
  Gauge("kvserve:kv_cache_blocks_total", "KV blocks in the pool.", stats.blocks_total, out);
  Gauge("kvserve:num_sessions", "Sessions whose blocks are pinned.", stats.sessions, out);
  Counter("kvserve:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.",
          static_cast<double>(stats.prefix_queries_tokens), out);
  Counter("kvserve:prefix_cache_hits_total", "Prompt tokens served from the prefix cache.",
          static_cast<double>(stats.prefix_hits_tokens), out);
  Counter("kvserve:num_preemptions_total", "Sequences preempted for lack of KV blocks.",
          static_cast<double>(stats.preemptions), out);
  Counter("kvserve:prompt_tokens_total", "Prompt tokens computed (not served from cache).",
          static_cast<double>(stats.prompt_tokens), out);
  Counter("kvserve:generation_tokens_total", "Tokens generated.",
          static_cast<double>(stats.generation_tokens), out);
  Counter("kvserve:engine_steps_total", "Engine steps run.", static_cast<double>(stats.steps), out);
  Counter("kvserve:context_shift_requests_total",
          "Requests that dropped tokens to stay within the context (--context-overflow shift).",
          static_cast<double>(stats.shifted_requests), out);
  Counter("kvserve:context_shift_dropped_tokens_total", "Tokens dropped by context shifts.",
          static_cast<double>(stats.shift_dropped_tokens), out);
  Counter("kvserve:context_shifts_total",
          "Context shifts (prompt cuts at admission and cuts during generation).",
          static_cast<double>(stats.context_shifts), out);
  Counter("kvserve:context_shift_recomputed_tokens_total",
          "Kept tokens recomputed at their new positions after context shifts.",
          static_cast<double>(stats.shift_recomputed_tokens), out);
}

// The KV disk tier's counters (only when it is on).
void RenderDiskTier(const EngineStats& stats, std::string& out) {
  Counter("kvserve:kv_disk_hits_total", "KV disk tier block reads that found a valid file.",
          static_cast<double>(stats.kv_disk_hits), out);
  Counter("kvserve:kv_disk_misses_total", "KV disk tier block reads that found none.",
          static_cast<double>(stats.kv_disk_misses), out);
  Counter("kvserve:kv_disk_reads_total", "KV blocks read back from the disk tier.",
          static_cast<double>(stats.kv_disk_hits), out);
  Counter("kvserve:kv_disk_read_bytes_total", "KV block bytes read from the disk tier.",
          static_cast<double>(stats.kv_disk_read_bytes), out);
  Counter("kvserve:kv_disk_writes_total", "KV blocks written to the disk tier.",
          static_cast<double>(stats.kv_disk_writes), out);
  Counter("kvserve:kv_disk_write_bytes_total", "KV block bytes written to the disk tier.",
          static_cast<double>(stats.kv_disk_write_bytes), out);
  Counter("kvserve:kv_disk_write_failures_total",
          "KV disk tier writes that failed (full disk, unwritable directory).",
          static_cast<double>(stats.kv_disk_write_failures), out);
  Counter("kvserve:kv_disk_rejected_total",
          "KV disk tier files found invalid (checksum, size, version) and deleted.",
          static_cast<double>(stats.kv_disk_rejected), out);
  Counter("kvserve:kv_disk_restored_tokens_total", "Prompt tokens read back from the disk tier.",
          static_cast<double>(stats.kv_disk_restored_tokens), out);
  Gauge("kvserve:kv_disk_bytes_used", "Bytes of the KV disk tier's block files.",
        static_cast<double>(stats.kv_disk_bytes_used), out);
}

// Speculative decoding: drafts, drafted and accepted tokens, acceptance by draft position.
void RenderSpeculation(const EngineStats& stats, std::string& out) {
  Counter("kvserve:spec_decode_num_drafts_total", "Verifies of drafted tokens.",
          static_cast<double>(stats.spec_drafts), out);
  Counter("kvserve:spec_decode_num_draft_tokens_total", "Tokens drafted by speculative decoding.",
          static_cast<double>(stats.spec_draft_tokens), out);
  Counter("kvserve:spec_decode_num_accepted_tokens_total", "Drafted tokens accepted.",
          static_cast<double>(stats.spec_accepted_tokens), out);
  Header("kvserve:spec_decode_num_accepted_tokens_per_pos", "counter",
         "Drafted tokens accepted, by position in the draft (0 = first).", out);
  for (size_t pos = 0; pos < stats.spec_accepted_by_position.size(); ++pos) {
    Sample("kvserve:spec_decode_num_accepted_tokens_per_pos",
           "position=\"" + std::to_string(pos) + "\"",
           static_cast<double>(stats.spec_accepted_by_position[pos]), out);
  }
}

// The process: memory, CPU time, start time, open files, heap.
void RenderProcess(std::string& out) {
  const ProcessStats process = ReadProcessStats();
  Gauge("process_resident_memory_bytes", "Resident memory size in bytes.",
        static_cast<double>(process.resident_bytes), out);
  Counter("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
          process.cpu_seconds, out);
  Gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
        process.start_time_s, out);
  Gauge("process_open_fds", "Number of open file descriptors.", process.open_fds, out);
  if (process.heap_in_use_bytes >= 0)
    Gauge("kvserve:heap_in_use_bytes",
          "Bytes the C allocator has handed out and not had back (glibc mallinfo2).",
          static_cast<double>(process.heap_in_use_bytes), out);
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::Render(std::string_view name, std::string_view help, std::string& out) const {
  Header(name, "histogram", help, out);
  const std::string bucket = std::string(name) + "_bucket";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    Sample(bucket, "le=\"" + Number(bounds_[i]) + "\"", static_cast<double>(cumulative), out);
  }
  cumulative += counts_.back();
  Sample(bucket, "le=\"+Inf\"", static_cast<double>(cumulative), out);
  Sample(std::string(name) + "_sum", "", sum_, out);
  Sample(std::string(name) + "_count", "", static_cast<double>(count_), out);
}

ProcessStats ReadProcessStats() {
  ProcessStats stats;
  const long page = sysconf(_SC_PAGESIZE);
  const long ticks = sysconf(_SC_CLK_TCK);
  if (std::ifstream statm("/proc/self/statm"); statm) {
    uint64_t size = 0, resident = 0;
    if (statm >> size >> resident) stats.resident_bytes = resident * static_cast<uint64_t>(page);
  }
  if (std::ifstream stat_file("/proc/self/stat"); stat_file) {
    std::string line;
    std::getline(stat_file, line);
    // Fields after the parenthesised command name (which may hold spaces): state is field 3.
    const size_t close = line.rfind(')');
    if (close != std::string::npos && ticks > 0) {
      std::istringstream fields(line.substr(close + 2));
      std::vector<std::string> f;
      std::string word;
      while (fields >> word) f.push_back(word);
      // utime = field 14, stime = 15, starttime = 22; f[0] is field 3.
      if (f.size() > 19) {
        stats.cpu_seconds = (std::stod(f[11]) + std::stod(f[12])) / static_cast<double>(ticks);
        double uptime = 0;
        if (std::ifstream up("/proc/uptime"); up) up >> uptime;
        const double since_boot = std::stod(f[19]) / static_cast<double>(ticks);
        stats.start_time_s = static_cast<double>(std::time(nullptr)) - uptime + since_boot;
      }
    }
  }
  if (DIR* dir = opendir("/proc/self/fd")) {
    while (dirent* entry = readdir(dir)) {
      if (entry->d_name[0] != '.') ++stats.open_fds;
    }
    closedir(dir);
    --stats.open_fds;  // the one opendir holds
  }
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  const struct mallinfo2 heap = mallinfo2();
  stats.heap_in_use_bytes = static_cast<int64_t>(heap.uordblks + heap.hblkhd);
#endif
  return stats;
}

ServerMetrics::ServerMetrics(std::string replica)
    : replica_(LabelValue(replica)),
      time_to_first_token_(kTtftBuckets),
      inter_token_latency_(kItlBuckets),
      e2e_latency_(kE2eBuckets) {}

void ServerMetrics::ObserveTimeToFirstToken(double seconds) {
  std::lock_guard lock(mutex_);
  time_to_first_token_.Observe(seconds);
}

void ServerMetrics::ObserveInterTokenLatency(double seconds) {
  std::lock_guard lock(mutex_);
  inter_token_latency_.Observe(seconds);
}

void ServerMetrics::ObserveRequest(double seconds, FinishReason reason) {
  const std::string_view finish_reason = FinishReasonName(reason);
  std::lock_guard lock(mutex_);
  e2e_latency_.Observe(seconds);
  auto it = finished_.find(finish_reason);
  if (it == finished_.end()) it = finished_.emplace(std::string(finish_reason), 0).first;
  ++it->second;
}

void ServerMetrics::CountHttpResponse(int status) {
  std::lock_guard lock(mutex_);
  ++http_responses_[status];
}

std::string ServerMetrics::Render(const EngineStats& stats) const {
  std::string out;
  out.reserve(16384);
  if (!replica_.empty()) {
    Header("kvserve:replica_info", "gauge", "1, labelled with this replica's --replica-name.", out);
    Sample("kvserve:replica_info", "replica=\"" + replica_ + "\"", 1, out);
  }
  RenderEngine(stats, out);
  if (stats.kv_disk) RenderDiskTier(stats, out);
  RenderSpeculation(stats, out);
  RenderRequests(out);
  RenderProcess(out);
  return out;
}

void ServerMetrics::RenderRequests(std::string& out) const {
  std::lock_guard lock(mutex_);
  Header("kvserve:request_success_total", "counter", "Requests finished, by finish reason.", out);
  for (const char* reason : {"stop", "length"}) {
    if (!finished_.count(reason)) {
      Sample("kvserve:request_success_total", std::string("finished_reason=\"") + reason + "\"", 0,
             out);
    }
  }
  for (const auto& [reason, count] : finished_) {
    Sample("kvserve:request_success_total", "finished_reason=\"" + reason + "\"",
           static_cast<double>(count), out);
  }
  Header("kvserve:http_responses_total", "counter", "HTTP responses by status code.", out);
  for (const auto& [status, count] : http_responses_) {
    Sample("kvserve:http_responses_total", "code=\"" + std::to_string(status) + "\"",
           static_cast<double>(count), out);
  }
  time_to_first_token_.Render("kvserve:time_to_first_token_seconds",
                              "Seconds from request arrival to the first token.", out);
  inter_token_latency_.Render("kvserve:inter_token_latency_seconds",
                              "Seconds between consecutive tokens of a request.", out);
  e2e_latency_.Render("kvserve:e2e_request_latency_seconds",
                      "Seconds from request arrival to its end.", out);
}

}  // namespace kvserve
