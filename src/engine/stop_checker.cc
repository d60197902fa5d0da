#include "engine/stop_checker.h"

#include <algorithm>

namespace kvserve {

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone:
      return "";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAbort:
      return "abort";
    case FinishReason::kTimeout:
      return "timeout";
  }
  return "";
}

StopChecker::StopChecker(const Request& request, const Tokenizer& tokenizer, int n_ctx)
    : tokenizer_(tokenizer),
      ignore_eos_(request.ignore_eos),
      stop_token_ids_(request.stop_token_ids),
      max_tokens_(request.max_tokens),
      n_ctx_(n_ctx),
      decoder_(tokenizer, request.decode),
      strings_(request.stop) {}

StopChecker::Outcome StopChecker::Push(int32_t token, int n_generated, int n_tokens) {
  Outcome out;
  const bool end_of_generation = !ignore_eos_ && tokenizer_.IsEndOfGeneration(token);
  const bool stop_token =
      std::find(stop_token_ids_.begin(), stop_token_ids_.end(), token) != stop_token_ids_.end();
  if (end_of_generation || stop_token) {
    out.finish = FinishReason::kStop;
    out.tail = strings_.Push(decoder_.Flush());
    out.stop_string = strings_.matched();
    return out;
  }
  out.append = true;
  out.text = strings_.Push(decoder_.Push(token));
  if (strings_.stopped()) {
    out.finish = FinishReason::kStop;
  } else if (n_generated + 1 >= max_tokens_ || n_tokens >= n_ctx_) {
    out.tail = strings_.Push(decoder_.Flush());
    if (strings_.stopped()) {
      out.finish = FinishReason::kStop;
    } else {
      out.tail += strings_.Flush();
      out.finish = FinishReason::kLength;
    }
  }
  if (out.finish == FinishReason::kStop) out.stop_string = strings_.matched();
  return out;
}

}  // namespace kvserve
