// What a request's stream delivered, read to its finish event: the shared collector of the
// engine tests (tokens, log-probabilities, top log-probabilities, text, finish, usage).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/request.h"

namespace kvserve::testing {

struct StreamOutput {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::vector<std::vector<TokenLogprob>> top;
  std::string text;
  FinishReason finish_reason = FinishReason::kNone;
  Usage usage;
  std::chrono::steady_clock::time_point finish_time;
};

// Reads `stream` up to its finish event, waiting at most `wait` for each event; an event that
// does not come fails the test and returns what arrived.
inline StreamOutput CollectStream(RequestStream& stream, std::chrono::milliseconds wait) {
  StreamOutput out;
  for (;;) {
    auto event = stream.Next(wait);
    EXPECT_TRUE(event.has_value()) << "no event within " << wait.count() << " ms";
    if (!event) return out;
    out.text += event->text;
    if (event->kind == RequestEvent::Kind::kFinish) {
      out.finish_reason = event->finish_reason;
      out.usage = event->usage;
      out.finish_time = event->time;
      return out;
    }
    out.tokens.push_back(event->token);
    out.logprobs.push_back(event->logprob);
    out.top.push_back(event->top_logprobs);
  }
}

}  // namespace kvserve::testing
