// Why a request ended. The engine reports one with the last event of every request.
#pragma once

#include <cstdint>

namespace kvserve {

enum class FinishReason : uint8_t {
  kNone,     // not finished
  kStop,     // an end-of-generation token, a stop token id or a stop string
  kLength,   // max_tokens, or the context is full
  kAbort,    // the caller aborted it (client gone, shutdown deadline)
  kTimeout,  // Request::timeout_s passed
};

// "stop", "length", "abort", "timeout" ("" for kNone).
const char* FinishReasonName(FinishReason reason);

}  // namespace kvserve
