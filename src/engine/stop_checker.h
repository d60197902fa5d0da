// The stop rules of one sequence, in one place: end-of-generation tokens (unless ignore_eos), the
// request's stop token ids (never emitted), its stop strings (never emitted, even split across
// tokens), max_tokens and the context size. It also turns tokens into text (UTF-8 held back until
// complete). The engine's Postprocess pushes every sampled token through it; `run`, `chat`, the
// server and `bench` all go through the engine, so nothing else decides when generation stops.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/finish_reason.h"
#include "engine/request.h"
#include "engine/stop_strings.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/tokenizer.h"

namespace kvserve {

class StopChecker {
 public:
  // `tokenizer` is borrowed. n_ctx: the most tokens whose K/V the sequence may hold; the token
  // sampled when they are all taken is the last (it is never fed back).
  StopChecker(const Request& request, const Tokenizer& tokenizer, int n_ctx);

  struct Outcome {
    bool append = false;  // the token joins the sequence and is emitted
    std::string text;     // text of the token's event (may be empty while text is held back)
    FinishReason finish = FinishReason::kNone;
    std::string tail;         // held-back text released by the finish, for the finish event
    std::string stop_string;  // kStop by one of the request's stop strings: that string
  };
  // The outcome of sampling `token` for a sequence that held `n_tokens` tokens, `n_generated` of
  // them generated, before it.
  Outcome Push(int32_t token, int n_generated, int n_tokens);

 private:
  const Tokenizer& tokenizer_;
  bool ignore_eos_;
  std::vector<int32_t> stop_token_ids_;
  int max_tokens_;
  int n_ctx_;
  StreamingDecoder decoder_;
  StopStrings strings_;
};

}  // namespace kvserve
