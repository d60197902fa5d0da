#include "engine/generation.h"

#include <algorithm>
#include <chrono>

namespace kvserve {

namespace {
double MillisecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}
}  // namespace

Result<GenerationResult> Generate(SequenceRunner& runner, const Tokenizer& tokenizer,
                                  std::span<const int32_t> prompt, const GenerationOptions& options,
                                  const std::function<bool(int32_t)>& on_token) {
  if (prompt.empty()) return Status::InvalidArgument("the prompt is empty");
  KVSERVE_RETURN_IF_ERROR(options.sampling.Validate(tokenizer.n_vocab()));
  GenerationResult result;
  result.n_prompt = static_cast<int>(prompt.size());
  if (result.n_prompt > runner.n_ctx()) {
    return Status::InvalidArgument("prompt of " + std::to_string(prompt.size()) +
                                   " tokens exceeds the context size " +
                                   std::to_string(runner.n_ctx()));
  }
  // Reuse the common prefix, but always recompute the last prompt token: its logits are needed.
  const std::vector<int32_t>& cached = runner.tokens();
  size_t reuse = 0;
  if (options.use_cache) {
    while (reuse < cached.size() && reuse + 1 < prompt.size() && cached[reuse] == prompt[reuse]) {
      ++reuse;
    }
  }
  runner.Truncate(static_cast<int>(reuse));
  result.n_reused = static_cast<int>(reuse);

  const auto prompt_start = std::chrono::steady_clock::now();
  auto logits = options.use_cache ? runner.Append(prompt.subspan(reuse))
                                  : runner.AppendRecompute(prompt.subspan(reuse));
  if (!logits.ok()) return logits.status();
  result.prompt_ms = MillisecondsSince(prompt_start);

  const auto decode_start = std::chrono::steady_clock::now();
  Sampler sampler(options.sampling, tokenizer.n_vocab());
  result.finish_reason = "length";
  for (int i = 0; i < options.max_tokens; ++i) {
    const int32_t token = sampler.Sample(*logits, runner.tokens()).token;
    if (!options.ignore_eos && tokenizer.IsEndOfGeneration(token)) {
      result.finish_reason = "stop";
      break;
    }
    result.tokens.push_back(token);
    if (!on_token(token)) {
      result.finish_reason = "stop";
      break;
    }
    if (i + 1 == options.max_tokens || runner.n_past() >= runner.n_ctx()) break;
    logits = options.use_cache ? runner.Append(std::span(&token, 1))
                               : runner.AppendRecompute(std::span(&token, 1));
    if (!logits.ok()) return logits.status();
  }
  result.decode_ms = MillisecondsSince(decode_start);
  return result;
}

}  // namespace kvserve
