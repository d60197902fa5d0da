// One client request's choices inside the engine: submits them together, hands their events back
// in arrival order, records latency metrics, and aborts whatever is unfinished when the job is
// dropped (client gone, error, shutdown).
//
//   CompletionJob job(engine, metrics);
//   if (auto error = job.Submit(std::move(requests))) return Reply(*error);
//   while (!job.done()) if (auto event = job.Next(100ms)) ...
//
// Used by one HTTP thread at a time; the engine pushes into the streams from its own thread.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/api_error.h"
#include "server/metrics.h"

namespace kvserve {

class CompletionJob {
 public:
  using Clock = std::chrono::steady_clock;

  struct Event {
    int choice = 0;  // index into the submitted requests
    RequestEvent event;
  };

  // `engine` and `metrics` are borrowed and must outlive the job.
  CompletionJob(Engine& engine, ServerMetrics& metrics, Clock::time_point arrival = Clock::now());
  ~CompletionJob();  // aborts unfinished choices
  CompletionJob(const CompletionJob&) = delete;
  CompletionJob& operator=(const CompletionJob&) = delete;

  // Submits every request (ids must be unique); on an error nothing stays queued. Engine errors
  // map to HTTP by their code (SubmitError).
  std::optional<ApiError> Submit(std::vector<Request> requests);

  // Replaces choice `index`'s engine request with `request` (a continuation: the old prompt, the
  // tokens generated so far and forced ones), aborting the old one; later events of the choice
  // come from the new request. On an error the old request goes on untouched.
  std::optional<ApiError> Continue(int index, Request request);

  // The next event of any choice; nullopt when `timeout` passed first or every choice is done.
  std::optional<Event> Next(std::chrono::milliseconds timeout);
  bool done() const { return unfinished_ == 0; }
  void AbortAll();

  // Maps an Engine::Submit error to HTTP by its code: resource exhausted (queue full) -> 429,
  // unavailable (shutting down) -> 503, not found -> 404, internal -> 500, otherwise 400.
  static ApiError SubmitError(const Status& status);

 private:
  struct Choice {
    std::string id;
    std::shared_ptr<RequestStream> stream;
    bool finished = false;
    bool any_token = false;
    Clock::time_point last_token;
  };

  void Record(Choice& choice, const RequestEvent& event);

  Engine& engine_;
  ServerMetrics& metrics_;
  Clock::time_point arrival_;
  std::vector<Choice> choices_;
  int unfinished_ = 0;
  size_t next_ = 0;  // round-robin start for several choices
};

}  // namespace kvserve
