// What a caller hands the engine (Request) and what it gets back (a RequestStream of events).
// Plain data plus one thread-safe queue; no engine internals.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/finish_reason.h"
#include "engine/sampler.h"
#include "grammar/token_masker.h"
#include "tokenizer/streaming_decoder.h"

namespace kvserve {

// What happens when a sequence outgrows the context (docs/kv-cache.md, "Context overflow").
enum class ContextOverflow : uint8_t {
  kDefault,  // the engine's EngineOptions::context_overflow
  kError,    // a prompt plus max_tokens that cannot fit is refused; generation ends at the context
  kShift,    // keep the sinks (and a pinned prefix), drop the oldest tokens after them, go on
};

// The policy called `name`: "error" or "shift", as the --context-overflow flag, batch files and
// the API's context_overflow spell it; nullopt for any other name.
inline std::optional<ContextOverflow> ContextOverflowNamed(std::string_view name) {
  if (name == "error") return ContextOverflow::kError;
  if (name == "shift") return ContextOverflow::kShift;
  return std::nullopt;
}

// The context rule of the engine, the CLI and the API, in this one place: without context shift a
// sequence holds at most n_ctx tokens, prompt and completion together (OpenAI's and vLLM's
// "maximum context length"). (The last completion token's K/V is never stored, so the cache holds
// at most n_ctx - 1 positions of a sequence.)
enum class ContextFit {
  kFits,
  kPromptFills,  // the prompt alone fills the context (or more): no room for a completion
  kTooLong,      // the prompt fits, max_tokens more do not
};
inline ContextFit FitContext(int64_t n_prompt, int64_t max_tokens, int n_ctx) {
  if (n_prompt + max_tokens <= n_ctx) return ContextFit::kFits;
  return n_prompt >= n_ctx ? ContextFit::kPromptFills : ContextFit::kTooLong;
}
// The most completion tokens a prompt of n_prompt tokens leaves room for (0 when it fills it).
inline int CompletionRoom(int64_t n_prompt, int n_ctx) {
  return n_prompt >= n_ctx ? 0 : static_cast<int>(n_ctx - n_prompt);
}

struct Request {
  std::string id;               // caller's id; unique among live requests (empty: engine assigns)
  std::vector<int32_t> prompt;  // token ids, BOS included if the model wants one
  // An encoder-decoder model (the prompt is the encoder's input): tokens the decoder is fed after
  // its start token before it generates (a forced prefix of the answer). Empty otherwise.
  std::vector<int32_t> decoder_prompt;
  int max_tokens = 16;  // tokens to generate at most
  SamplingParams sampling;
  std::vector<std::string> stop;        // stop strings: never emitted, even split across tokens
  std::vector<int32_t> stop_token_ids;  // FinishReason::kStop when sampled (not emitted)
  bool ignore_eos = false;
  bool logprobs = false;  // report the chosen token's logprob (and sampling.top_logprobs alts)
  // Prefix-cache tenant: requests with different salts never share cached blocks.
  std::string cache_salt;
  // Keep this conversation's blocks pinned after the request ends (see
  // EngineOptions::session_ttl_s).
  std::string session_id;
  double timeout_s = 0;  // 0 = none; FinishReason::kTimeout when exceeded
  // Let the engine's proposer draft tokens for this request (when the engine has one). Never
  // changes a token or a logprob: drafts are verified by replaying this request's sampler.
  bool speculative = true;
  ContextOverflow context_overflow = ContextOverflow::kDefault;
  // Constrained decoding (docs/api.md, "Structured output"): every sampled token continues a
  // document of this grammar, and an end-of-generation token comes only when the document is
  // whole. Shared with other requests that use the same grammar (its mask cache too); null: none.
  std::shared_ptr<TokenMasker> grammar;
  // kShift: leading prompt tokens kept through every shift besides the engine's sink tokens
  // (e.g. a system prompt); clamped to the prompt.
  int pinned_prefix_tokens = 0;
  // How tokens become text: `chat` renders special tokens and continues after the prompt (a
  // leading space is real); the default strips SentencePiece's prefix space from the first token.
  StreamingDecoder::Options decode;
};

struct Usage {
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;    // prompt tokens served from the prefix cache
  int drafted_tokens = 0;   // tokens proposed by speculative decoding and verified
  int accepted_tokens = 0;  // of those, emitted (equal to what the sampler chose)
  // Context overflow (kShift): tokens dropped from the sequence (prompt tokens cut at admission
  // and older tokens cut by shifts during generation) and the number of cuts. 0: not truncated.
  int dropped_tokens = 0;
  int context_shifts = 0;
};

struct RequestEvent {
  enum class Kind { kToken, kFinish };
  Kind kind = Kind::kToken;
  // kToken: the sampled token and the text it completes (may be empty while a UTF-8 character or
  // a possible stop string is held back).
  int32_t token = -1;
  std::string text;
  float logprob = 0.0f;
  std::vector<TokenLogprob> top_logprobs;
  // kFinish: why; text holds any held-back tail.
  FinishReason finish_reason = FinishReason::kNone;
  std::string stop_string;  // kFinish by one of Request::stop: that string; "" otherwise
  Usage usage;
  std::chrono::steady_clock::time_point time;  // when the engine produced it (set by Push)
};

// The consumer side of a request's events. The engine thread pushes; any one caller thread pops.
class RequestStream {
 public:
  // Blocks until an event arrives or `timeout` passes; nullopt on timeout.
  std::optional<RequestEvent> Next(std::chrono::milliseconds timeout);
  // Engine side.
  void Push(RequestEvent event);

 private:
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<RequestEvent> events_;
};

}  // namespace kvserve
