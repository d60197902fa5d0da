// A request's whole answer, read from its event stream: the client side of the engine that the
// command line's run, chat, batch files and bench share.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/request.h"
#include "util/status.h"

namespace kvserve {

struct Completion {
  std::vector<int32_t> tokens;  // generated ids (a stop token excluded)
  std::string text;             // the emitted text, held-back tail included
  FinishReason finish_reason = FinishReason::kNone;
  Usage usage;
  double prompt_ms = 0;  // from `submitted` to the first token (or the finish, if none)
  double decode_ms = 0;  // from the first token to the last
  // Tokens per second of the prefill (prompt tokens not served by the cache) and of the decode
  // (tokens after the first).
  double prompt_tokens_per_s() const;
  double decode_tokens_per_s() const;
};

// Reads `stream` until its finish event; `on_event` (when set) sees every event as it arrives,
// e.g. to print text while it streams. Fails when no event comes for `patience`.
Result<Completion> Complete(RequestStream& stream, std::chrono::steady_clock::time_point submitted,
                            const std::function<void(const RequestEvent&)>& on_event = {},
                            std::chrono::milliseconds patience = std::chrono::hours(1));

}  // namespace kvserve
