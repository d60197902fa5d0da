#include "server/completion_job.h"

#include <algorithm>

namespace kvserve {

CompletionJob::CompletionJob(Engine& engine, ServerMetrics& metrics, Clock::time_point arrival)
    : engine_(engine), metrics_(metrics), arrival_(arrival) {}

CompletionJob::~CompletionJob() { AbortAll(); }

ApiError CompletionJob::SubmitError(const Status& status) {
  const std::string& message = status.message();
  switch (status.code()) {
    case StatusCode::kResourceExhausted:
      return ApiError::TooManyRequests("server busy: " + message, 1);
    case StatusCode::kUnavailable:
      return ApiError::Unavailable("server is shutting down: " + message);
    case StatusCode::kNotFound:
      return ApiError::NotFound(message);
    case StatusCode::kInternal:
    case StatusCode::kFailedPrecondition:
      return ApiError::Internal(message);
    case StatusCode::kOk:
    case StatusCode::kInvalidArgument:
      break;
  }
  return ApiError::BadRequest(message);
}

std::optional<ApiError> CompletionJob::Submit(std::vector<Request> requests) {
  for (Request& request : requests) {
    std::string id = request.id;
    auto stream = engine_.Submit(std::move(request));
    if (!stream.ok()) {
      AbortAll();
      return SubmitError(stream.status());
    }
    choices_.push_back(Choice{.id = std::move(id), .stream = std::move(stream).value()});
    ++unfinished_;
  }
  return std::nullopt;
}

std::optional<ApiError> CompletionJob::Continue(int index, Request request) {
  Choice& choice = choices_.at(static_cast<size_t>(index));
  if (choice.finished) return ApiError::BadRequest("choice " + std::to_string(index) + " ended");
  std::string id = request.id;
  auto stream = engine_.Submit(std::move(request));
  if (!stream.ok()) return SubmitError(stream.status());
  engine_.Abort(choice.id);  // its finish event goes to the old stream, which nobody reads
  choice.id = std::move(id);
  choice.stream = std::move(stream).value();
  return std::nullopt;
}

void CompletionJob::AbortAll() {
  for (Choice& choice : choices_) {
    if (!choice.finished) {
      engine_.Abort(choice.id);
      choice.finished = true;
      metrics_.ObserveRequest(std::chrono::duration<double>(Clock::now() - arrival_).count(),
                              FinishReason::kAbort);
    }
  }
  unfinished_ = 0;
}

void CompletionJob::Record(Choice& choice, const RequestEvent& event) {
  // When the engine produced the event (RequestStream::Push stamps it), else when we saw it.
  const Clock::time_point now =
      event.time.time_since_epoch().count() != 0 ? event.time : Clock::now();
  if (event.kind == RequestEvent::Kind::kToken) {
    if (!choice.any_token) {
      metrics_.ObserveTimeToFirstToken(std::chrono::duration<double>(now - arrival_).count());
    } else {
      metrics_.ObserveInterTokenLatency(
          std::chrono::duration<double>(now - choice.last_token).count());
    }
    choice.any_token = true;
    choice.last_token = now;
    return;
  }
  choice.finished = true;
  --unfinished_;
  metrics_.ObserveRequest(std::chrono::duration<double>(now - arrival_).count(),
                          event.finish_reason);
}

std::optional<CompletionJob::Event> CompletionJob::Next(std::chrono::milliseconds timeout) {
  if (unfinished_ == 0) return std::nullopt;
  const size_t n = choices_.size();
  if (unfinished_ == 1) {
    for (size_t i = 0; i < n; ++i) {
      Choice& choice = choices_[i];
      if (choice.finished) continue;
      auto event = choice.stream->Next(timeout);
      if (!event) return std::nullopt;
      Record(choice, *event);
      return Event{static_cast<int>(i), std::move(*event)};
    }
    return std::nullopt;
  }
  // Several choices: poll each without waiting, then wait briefly on one, until `timeout`.
  const Clock::time_point deadline = Clock::now() + timeout;
  while (true) {
    for (size_t k = 0; k < n; ++k) {
      const size_t i = (next_ + k) % n;
      Choice& choice = choices_[i];
      if (choice.finished) continue;
      if (auto event = choice.stream->Next(std::chrono::milliseconds(0))) {
        next_ = (i + 1) % n;
        Record(choice, *event);
        return Event{static_cast<int>(i), std::move(*event)};
      }
    }
    const Clock::time_point now = Clock::now();
    if (now >= deadline) return std::nullopt;
    const size_t i = next_;
    next_ = (next_ + 1) % n;
    if (choices_[i].finished) continue;
    const auto wait = std::min<std::chrono::milliseconds>(
        std::chrono::milliseconds(2),
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now));
    if (auto event = choices_[i].stream->Next(wait)) {
      Record(choices_[i], *event);
      return Event{static_cast<int>(i), std::move(*event)};
    }
  }
}

}  // namespace kvserve
