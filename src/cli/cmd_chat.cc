// `kvserve chat`: a conversation in the terminal. Each user line is appended to the conversation,
// the whole conversation is rendered with the model's chat template and tokenized, and the reply
// is one request of the conversation's session on an engine that lives across turns, so the part
// of the prompt the cache already holds (everything up to the new turn, when the template renders
// earlier turns the same way) is reused instead of recomputed. Replies stream to stdout; after each
// reply stderr gets
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
#include "cli/engine_flags.h"
#include "cli/model_options.h"
#include "cli/sampling_flags.h"
#include "engine/completion.h"
#include "engine/engine.h"
#include "tokenizer/chat_template.h"
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
  Request request;  // max_tokens and sampling of every reply
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
  o.request.max_tokens = static_cast<int>(*n);
  o.request.sampling = *sampling;
  return o;
}

struct Turn {
  std::string text;  // the reply, stop string excluded
  int n_prompt = 0;
  int n_reused = 0;  // prompt tokens served by the cache
};

// Generates one reply to the rendered conversation `prompt` (token ids) as one engine request of
// the conversation's session, streaming it to stdout. The engine ends it at end-of-generation
// tokens, the template's stop strings (never shown), -n, or the context.
Result<Turn> Reply(Engine& engine, const ChatTemplate& tmpl, Request request,
                   const std::vector<int32_t>& prompt, int n_ctx) {
  if (static_cast<int>(prompt.size()) > n_ctx) {
    return Status::InvalidArgument("prompt of " + std::to_string(prompt.size()) +
                                   " tokens exceeds the context size " + std::to_string(n_ctx));
  }
  request.prompt = prompt;
  request.max_tokens = std::min(request.max_tokens, n_ctx - static_cast<int>(prompt.size()) + 1);
  request.stop = tmpl.stop_strings();
  request.session_id = "chat";
  request.decode = {.render_special = true, .at_text_start = false};
  const auto submitted = std::chrono::steady_clock::now();
  auto stream = engine.Submit(std::move(request));
  if (!stream.ok()) return stream.status();
  auto done = Complete(**stream, submitted, [](const RequestEvent& event) {
    std::fputs(event.text.c_str(), stdout);
    std::fflush(stdout);
  });
  if (!done.ok()) return done.status();
  return Turn{.text = done->text,
              .n_prompt = done->usage.prompt_tokens,
              .n_reused = done->usage.cached_tokens};
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
  // Block size 1: the prefix cache then reuses every token the conversation shares with the
  // previous turn, as far as the tokens agree, not only whole blocks of 16.
  auto engine = Engine::Create(**model, tok, SingleStreamEngineOptions(*model_options, 1, false));
  if (!engine.ok()) return fail(engine.message(), 1);
  std::vector<ChatMessage> messages;
  if (!options->system.empty()) messages.push_back({"system", options->system});
  Request request = options->request;
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
    auto turn = Reply(**engine, *tmpl, request, prompt, model_options->n_ctx);
    ++request.sampling.seed;  // each turn draws from its own random stream
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
