#include "engine/completion.h"

#include <algorithm>

namespace kvserve {

namespace {
double Ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}
}  // namespace

double Completion::prompt_tokens_per_s() const {
  const int computed = usage.prompt_tokens - usage.cached_tokens;
  return prompt_ms > 0 ? computed * 1000.0 / prompt_ms : 0.0;
}

double Completion::decode_tokens_per_s() const {
  const int n_decoded = std::max(0, static_cast<int>(tokens.size()) - 1);
  return decode_ms > 0 ? n_decoded * 1000.0 / decode_ms : 0.0;
}

Result<Completion> Complete(RequestStream& stream, std::chrono::steady_clock::time_point submitted,
                            const std::function<void(const RequestEvent&)>& on_event,
                            std::chrono::milliseconds patience) {
  Completion out;
  auto first = submitted, last = submitted;
  for (;;) {
    std::optional<RequestEvent> event = stream.Next(patience);
    if (!event) return Status::Unavailable("no answer from the engine within the time limit");
    if (on_event) on_event(*event);
    out.text += event->text;
    if (event->kind == RequestEvent::Kind::kToken) {
      if (out.tokens.empty()) first = event->time;
      out.tokens.push_back(event->token);
      last = event->time;
      continue;
    }
    if (out.tokens.empty()) first = last = event->time;
    out.finish_reason = event->finish_reason;
    out.usage = event->usage;
    out.prompt_ms = Ms(first - submitted);
    out.decode_ms = Ms(last - first);
    return out;
  }
}

}  // namespace kvserve
