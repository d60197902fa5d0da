// `kvserve chat`: a conversation in the terminal. Each user line is appended to the conversation,
// the whole conversation is rendered with the model's chat template and tokenized, and the reply
// is generated on one SequenceRunner that lives across turns, so the part of the prompt the cache
// already holds (everything up to the new turn, when the template renders earlier turns the same
// way) is reused instead of recomputed. Replies stream to stdout; after each reply stderr gets
//   [prompt: 57 tokens, 41 reused from cache, 16 computed]
// Reading ends at EOF or a line "/exit". With stdin from a pipe nothing but the replies (one line
// break after each) goes to stdout, for scripts and tests.
//
// Stopping: at end-of-generation tokens, and at the template's stop strings (held back while
// they might be starting, never shown).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "cli/chat_flags.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/sampling_flags.h"
#include "engine/generation.h"
#include "engine/stop_checker.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/tokenizer.h"

namespace kvserve {

FlagTable ChatFlagTable() {
  return {.usage = "chat -m MODEL [flags]",
          .groups = {{"chat",
                      {ChatTemplateFlag(),
                       {.name = "--system",
                        .value_name = "TEXT",
                        .help = "system message at the start of the conversation"},
                       {.name = "--n-predict",
                        .alias = "-n",
                        .value_name = "N",
                        .default_text = "256",
                        .help = "tokens per reply at most"}}},
                     ModelFlags(),
                     SamplingFlags()}};
}

namespace {

struct ChatOptions {
  std::string template_name;  // empty: from the model
  std::string system;
  GenerationOptions generation;
};

Result<ChatOptions> ReadChatOptions(const Args& args) {
  ChatOptions o;
  o.template_name = args.GetOr("--chat-template", "");
  o.system = args.GetOr("--system", "");
  auto n = args.GetInt("--n-predict", 256);
  if (!n.ok()) return n.status();
  auto sampling = ReadSamplingParams(args);
  if (!sampling.ok()) return sampling.status();
  if (*n < 1 || *n > (1 << 24)) {
    return Result<ChatOptions>::InvalidArgument("flag -n: " + std::to_string(*n) +
                                                " is out of range (1 to 16777216)");
  }
  o.generation.max_tokens = static_cast<int>(*n);
  o.generation.sampling = *sampling;
  return o;
}

struct Turn {
  std::string text;  // the reply, stop string excluded
  int n_prompt = 0;
  int n_reused = 0;
  int n_generated = 0;
  std::string finish_reason;  // "stop" or "length"
};

// Generates one reply to the rendered conversation `sequence` (token ids), streaming it to stdout
// and ending at the template's stop strings (never shown) or an end-of-generation token.
Result<Turn> Reply(SequenceRunner& runner, const Tokenizer& tokenizer, const ChatTemplate& tmpl,
                   const std::vector<int32_t>& sequence, const GenerationOptions& options) {
  Turn turn;
  turn.n_prompt = static_cast<int>(sequence.size());
  StreamingDecoder decoder(tokenizer, {.render_special = true, .at_text_start = false});
  StopChecker stop(tmpl.stop_strings());
  auto show = [&](const std::string& text) {
    turn.text += text;
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
  };
  auto result = Generate(runner, tokenizer, sequence, options, [&](int32_t token) {
    show(stop.Push(decoder.Push(token)));
    return !stop.stopped();
  });
  if (!result.ok()) return result.status();
  show(stop.Push(decoder.Flush()));
  show(stop.Flush());
  turn.n_reused = result->n_reused;
  turn.n_generated = static_cast<int>(result->tokens.size());
  turn.finish_reason = result->finish_reason;
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
  auto args = Args::Parse(argv, ChatFlagTable());
  if (!args.ok()) return fail(args.message(), 2);
  if (!args->positional().empty()) {
    return fail("unexpected argument '" + args->positional()[0] + "'", 2);
  }
  auto model_options = ReadModelOptions(*args);
  if (!model_options.ok()) return fail(model_options.message(), 2);
  auto options = ReadChatOptions(*args);
  if (!options.ok()) return fail(options.message(), 2);
  auto model = OpenModel(*model_options);
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
  SequenceRunner runner(**model, model_options->kv_type, model_options->n_ctx,
                        model_options->n_threads);
  std::vector<ChatMessage> messages;
  if (!options->system.empty()) messages.push_back({"system", options->system});
  GenerationOptions generation = options->generation;
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
    auto turn = Reply(runner, tok, *tmpl, prompt, generation);
    ++generation.sampling.seed;  // each turn draws from its own random stream
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
