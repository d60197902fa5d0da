// `kvserve chat`: a conversation in the terminal. Each user line is appended to the conversation,
// the whole conversation is rendered with the model's chat template and tokenized, and the reply
// is generated on one SequenceRunner that lives across turns, so the part of the prompt the cache
// already holds (everything up to the new turn, when the template renders earlier turns the same
// way) is reused instead of recomputed. Replies stream to stdout; after each reply stderr gets
//   [prompt: 57 tokens, 41 reused from cache, 16 computed]
// Reading ends at EOF or a line "/exit". With stdin from a pipe nothing but the replies (one line
// break after each) goes to stdout, for scripts and tests.
//
// Stopping: Generate ends at end-of-generation tokens; to end at the template's stop strings as
// well, each token is its own Generate call (max_tokens = 1). Generate reuses the cached prefix,
// so every such call runs one decode step, not a new prefill. Each call gets its own sampler, so
// token i of the session is drawn with seed + i.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "engine/generation.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/tokenizer.h"

namespace kvserve {

namespace {

struct ChatOptions {
  std::string template_name;  // empty: from the model
  std::string system;
  GenerationOptions generation;
};

Args::Spec ChatSpec() {
  Args::Spec spec{
      .value_flags = {"--chat-template", "--system", "--n-predict", "--temp", "--seed", "--top-k",
                      "--top-p", "--min-p", "--repeat-penalty"},
      .bool_flags = {},
      .aliases = {{"-n", "--n-predict"}},
  };
  AddModelFlags(spec);
  return spec;
}

Result<ChatOptions> ReadChatOptions(const Args& args) {
  ChatOptions o;
  o.template_name = args.GetOr("--chat-template", "");
  o.system = args.GetOr("--system", "");
  auto n = args.GetInt("--n-predict", 256);
  auto seed = args.GetInt("--seed", 0xC0FFEE);
  auto top_k = args.GetInt("--top-k", 0);
  auto temp = args.GetDouble("--temp", 0.8);
  auto top_p = args.GetDouble("--top-p", 1.0);
  auto min_p = args.GetDouble("--min-p", 0.0);
  auto repeat = args.GetDouble("--repeat-penalty", 1.0);
  for (const Status& s : {n.status(), seed.status(), top_k.status(), temp.status(), top_p.status(),
                          min_p.status(), repeat.status()}) {
    if (!s.ok()) return s;
  }
  if (*n < 1 || *n > (1 << 24)) {
    return Result<ChatOptions>::Error("flag -n: " + std::to_string(*n) +
                                      " is out of range (1 to 16777216)");
  }
  o.generation.max_tokens = static_cast<int>(*n);
  SamplingParams& s = o.generation.sampling;
  s.temperature = static_cast<float>(*temp);
  s.top_k = static_cast<int>(*top_k);
  s.top_p = static_cast<float>(*top_p);
  s.min_p = static_cast<float>(*min_p);
  s.repetition_penalty = static_cast<float>(*repeat);
  s.seed = static_cast<uint64_t>(*seed);
  return o;
}

// Holds back generated text that could be the start of a stop string, and cuts the text at the
// first complete one. Push/Finish return what is safe to show.
class StopFilter {
 public:
  explicit StopFilter(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  std::string Push(std::string_view piece) {
    if (stopped_) return "";
    pending_ += piece;
    size_t cut = std::string::npos;
    for (const std::string& stop : stops_) cut = std::min(cut, pending_.find(stop));
    if (cut != std::string::npos) {
      pending_.resize(cut);
      stopped_ = true;
      return Release(pending_.size());
    }
    size_t hold = 0;
    for (const std::string& stop : stops_) {
      for (size_t k = std::min(stop.size() - 1, pending_.size()); k > hold; --k) {
        if (pending_.compare(pending_.size() - k, k, stop, 0, k) == 0) {
          hold = k;
          break;
        }
      }
    }
    return Release(pending_.size() - hold);
  }

  // The end of the reply without a stop string: the held-back text is real.
  std::string Finish(std::string_view rest) {
    if (stopped_) return "";
    pending_ += rest;
    return Release(pending_.size());
  }

  bool stopped() const { return stopped_; }
  const std::string& text() const { return text_; }  // everything released

 private:
  std::string Release(size_t n) {
    std::string out = pending_.substr(0, n);
    pending_.erase(0, n);
    text_ += out;
    return out;
  }

  std::vector<std::string> stops_;
  std::string pending_;
  std::string text_;
  bool stopped_ = false;
};

struct Turn {
  std::string text;  // the reply, stop string excluded
  int n_prompt = 0;
  int n_reused = 0;
  int n_generated = 0;
  std::string finish_reason;  // "stop" or "length"
};

// Generates one reply to the rendered conversation `sequence` (token ids), streaming it to stdout.
// `step` counts the tokens sampled in this session (the per-token seed offset).
Result<Turn> Reply(SequenceRunner& runner, const Tokenizer& tokenizer, const ChatTemplate& tmpl,
                   std::vector<int32_t> sequence, const GenerationOptions& options,
                   uint64_t& step) {
  Turn turn;
  turn.n_prompt = static_cast<int>(sequence.size());
  turn.finish_reason = "length";
  StreamingDecoder decoder(tokenizer, {.render_special = true, .at_text_start = false});
  StopFilter filter(tmpl.stop_strings());
  GenerationOptions one = options;
  one.max_tokens = 1;
  auto show = [](const std::string& text) {
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
  };
  for (int i = 0; i < options.max_tokens; ++i) {
    if (i > 0 && static_cast<int>(sequence.size()) > runner.n_ctx()) break;  // context full
    one.sampling.seed = options.sampling.seed + step++;
    int32_t token = -1;
    auto result = Generate(runner, tokenizer, sequence, one, [&](int32_t t) { token = t; });
    if (!result.ok()) return result.status();
    if (i == 0) turn.n_reused = result->n_reused;
    if (token < 0) {  // an end-of-generation token
      turn.finish_reason = "stop";
      break;
    }
    sequence.push_back(token);
    ++turn.n_generated;
    show(filter.Push(decoder.Push(token)));
    if (filter.stopped()) {
      turn.finish_reason = "stop";
      break;
    }
  }
  show(filter.Finish(decoder.Flush()));
  turn.text = filter.text();
  return turn;
}

std::string_view Strip(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\v\f";
  const size_t first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kSpace) - first + 1);
}

}  // namespace

int RunChat(const std::vector<std::string>& argv) {
  auto fail = [](const std::string& message, int code) {
    std::fprintf(stderr, "kvserve chat: %s\n", message.c_str());
    return code;
  };
  auto args = Args::Parse(argv, ChatSpec());
  if (!args.ok()) return fail(args.message(), 2);
  if (!args->positional().empty()) {
    return fail("unexpected argument '" + args->positional()[0] + "'", 2);
  }
  auto model_options = ReadModelOptions(*args);
  if (!model_options.ok()) return fail(model_options.message(), 2);
  auto options = ReadChatOptions(*args);
  if (!options.ok()) return fail(options.message(), 2);
  auto model = LoadModel(*model_options);
  if (!model.ok()) return fail(model.message(), 1);
  auto tokenizer = Tokenizer::FromGguf((*model)->file());
  if (!tokenizer.ok()) return fail(tokenizer.message(), 1);
  const Tokenizer& tok = **tokenizer;
  auto tmpl = ChatTemplate::ForModel((*model)->file(), options->template_name);
  if (!tmpl.ok()) return fail(tmpl.message(), 2);
  tmpl->set_special_tokens(tok.bos() >= 0 ? tok.TokenPiece(tok.bos(), true) : "",
                           tok.eos() >= 0 ? tok.TokenPiece(tok.eos(), true) : "");
  if (!tmpl->warning().empty()) std::fprintf(stderr, "kvserve chat: %s\n", tmpl->warning().c_str());

  const bool interactive = isatty(fileno(stdin)) != 0;
  if (interactive) {
    std::fprintf(stderr, "chat template: %s; end with Ctrl-D or /exit\n",
                 std::string(tmpl->name()).c_str());
  }
  ThreadPool pool(model_options->n_threads);
  SequenceRunner runner(**model, model_options->kv_type, model_options->n_ctx, pool);
  std::vector<ChatMessage> messages;
  if (!options->system.empty()) messages.push_back({"system", options->system});
  uint64_t step = 0;
  std::string line;
  while (true) {
    if (interactive) {
      std::fputs("> ", stdout);
      std::fflush(stdout);
    }
    if (!std::getline(std::cin, line)) break;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line == "/exit") break;
    if (Strip(line).empty()) continue;
    messages.push_back({"user", line});
    const std::vector<int32_t> prompt = tmpl->EncodePrompt(tok, tmpl->Render(messages, true));
    auto turn = Reply(runner, tok, *tmpl, prompt, options->generation, step);
    if (!turn.ok()) {
      std::fputs("\n", stdout);
      return fail(turn.message(), 1);
    }
    std::fputs("\n", stdout);
    std::fflush(stdout);
    messages.push_back({"assistant", std::string(Strip(turn->text))});
    std::fprintf(stderr, "[prompt: %d tokens, %d reused from cache, %d computed]\n", turn->n_prompt,
                 turn->n_reused, turn->n_prompt - turn->n_reused);
  }
  return 0;
}

}  // namespace kvserve
