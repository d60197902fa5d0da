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
//
// gpt-oss (harmony) and Gemma 4 replies have channels: the reasoning (the analysis channel, the
// thought blocks) is shown dim on a terminal, on stderr when stdout is not one (so a pipe gets
// only the answers), the answer as the reply, and the conversation keeps the two apart as its
// template writes them.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cli/chat_display.h"
#include "cli/chat_flags.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/model_options.h"
#include "cli/sampling_flags.h"
#include "engine/completion.h"
#include "engine/engine.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/jinja_strings.h"
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
                     SamplingFlags(),
                     ContextOverflowFlags("shift")}};
}

namespace {

struct ChatOptions {
  std::string template_name;  // empty: from the model
  std::string system;
  Request request;    // max_tokens and sampling of every reply
  bool shift = true;  // --context-overflow shift: drop old turns, shift long replies
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
  const std::string overflow = args.GetOr("--context-overflow", "shift");
  if (overflow != "shift" && overflow != "error") {
    return Result<ChatOptions>::InvalidArgument("flag --context-overflow: '" + overflow +
                                                "' is not one of error, shift");
  }
  o.shift = overflow == "shift";
  return o;
}

struct Turn {
  std::string text;       // the reply, stop string excluded (harmony: its final channel)
  std::string reasoning;  // harmony: its analysis channel
  int n_prompt = 0;
  int n_reused = 0;   // prompt tokens served by the cache
  int n_dropped = 0;  // tokens the engine's context shifts dropped
};

// Generates one reply to the rendered conversation `prompt` (token ids) as one engine request of
// the conversation's session, streaming it to stdout. The engine ends it at end-of-generation
// tokens, the template's stop strings (never shown), -n, or (without `shift`) the context; with
// `shift` the engine keeps the first n_pinned tokens (the system message) and drops the oldest
// after them where the prompt or the reply outgrows the context.
Result<Turn> Reply(Engine& engine, const ChatTemplate& tmpl, Request request,
                   const std::vector<int32_t>& prompt, int n_ctx, bool shift, int n_pinned) {
  if (!shift && FitContext(static_cast<int64_t>(prompt.size()), 1, n_ctx) != ContextFit::kFits) {
    return Status::InvalidArgument("prompt of " + std::to_string(prompt.size()) +
                                   " tokens exceeds the context size " + std::to_string(n_ctx) +
                                   " less one token for the reply");
  }
  request.prompt = prompt;
  if (shift) {
    request.context_overflow = ContextOverflow::kShift;
    request.pinned_prefix_tokens = n_pinned;
  } else {
    request.context_overflow = ContextOverflow::kError;
    request.max_tokens = std::min(request.max_tokens, CompletionRoom(prompt.size(), n_ctx));
  }
  request.stop = tmpl.stop_strings();
  request.session_id = "chat";
  request.decode = {.render_special = true, .at_text_start = false};
  const auto submitted = std::chrono::steady_clock::now();
  auto stream = engine.Submit(std::move(request));
  if (!stream.ok()) return stream.status();
  ChatDisplay display(tmpl.tool_format(), stdout, stderr, isatty(fileno(stdout)) != 0);
  auto done = Complete(**stream, submitted,
                       [&](const RequestEvent& event) { display.Show(event.text, false); });
  if (!done.ok()) return done.status();
  display.Show("", true);
  Turn turn{.text = done->text,
            .n_prompt = done->usage.prompt_tokens,
            .n_reused = done->usage.cached_tokens,
            .n_dropped = done->usage.dropped_tokens};
  if (display.parses()) {
    turn.text = display.content();
    turn.reasoning = display.reasoning();
  }
  return turn;
}

// The chat-level policy (with shift): while the rendered conversation leaves less than `reserve`
// tokens of the context for the reply, the oldest turn after the system message (a user message
// and the reply to it) goes; the latest user message always stays. Returns the messages dropped.
int DropOldestTurns(const ChatTemplate& tmpl, const Tokenizer& tok,
                    std::vector<ChatMessage>& messages, int n_ctx, int reserve) {
  const size_t first = !messages.empty() && messages.front().role == "system" ? 1 : 0;
  int dropped = 0;
  while (messages.size() > first + 1) {
    const size_t n_prompt = tmpl.EncodeConversation(tok, messages, true).size();
    if (static_cast<int>(n_prompt) + reserve <= n_ctx) break;
    size_t end = first + 1;  // the oldest turn: up to the next user message
    while (end < messages.size() - 1 && messages[end].role != "user") ++end;
    dropped += static_cast<int>(end - first);
    messages.erase(messages.begin() + static_cast<std::ptrdiff_t>(first),
                   messages.begin() + static_cast<std::ptrdiff_t>(end));
  }
  return dropped;
}

// The prompt tokens of the rendered system message (the prefix it shares with `prompt`); 0 when
// the conversation has none.
int SystemPrefixTokens(const ChatTemplate& tmpl, const Tokenizer& tok,
                       const std::vector<ChatMessage>& messages,
                       const std::vector<int32_t>& prompt) {
  if (messages.empty() || messages.front().role != "system") return 0;
  const std::vector<int32_t> system =
      tmpl.EncodeConversation(tok, std::span(messages).first(1), false);
  return static_cast<int>(
      std::mismatch(system.begin(), system.end(), prompt.begin(), prompt.end()).first -
      system.begin());
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
  if (Status text = (*model)->CheckGeneratesText(); !text.ok()) return fail(text.message(), 2);
  auto tokenizer = Tokenizer::FromGguf((*model)->file());
  if (!tokenizer.ok()) return fail(tokenizer.message(), 1);
  const Tokenizer& tok = **tokenizer;
  auto tmpl = ChatTemplate::ForModel((*model)->file(), tok, options->template_name);
  if (!tmpl.ok()) return fail(tmpl.message(), 2);
  if ((*model)->cross_group() >= 0) {
    return fail("the model (" + (*model)->config().arch +
                    ") is an encoder-decoder: each request is one input and one answer (kvserve "
                    "run, or serve's /v1/completions), not a conversation",
                2);
  }
  if (!tmpl->warning().empty()) std::fprintf(stderr, "kvserve chat: %s\n", tmpl->warning().c_str());

  const bool interactive = isatty(fileno(stdin)) != 0;
  if (interactive) {
    std::fprintf(stderr, "chat template: %s; end with Ctrl-D or /exit\n",
                 std::string(tmpl->name()).c_str());
  }
  // Block size 1: the prefix cache then reuses every token the conversation shares with the
  // previous turn, as far as the tokens agree, not only whole blocks of 16.
  EngineOptions engine_options = SingleStreamEngineOptions(*model_options, 1, false);
  Status overflow = ReadContextOverflowOptions(*args, engine_options, ContextOverflow::kShift);
  if (!overflow.ok()) return fail(overflow.message(), 2);
  auto engine = Engine::Create(**model, tok, engine_options);
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
    if (jinja::Strip(line).empty()) continue;
    messages.push_back({"user", line});
    const int n_ctx = model_options->n_ctx;
    int n_dropped_messages = 0;
    if (options->shift) {
      n_dropped_messages =
          DropOldestTurns(*tmpl, tok, messages, n_ctx, std::min(request.max_tokens, n_ctx / 2));
    }
    const std::vector<int32_t> prompt = tmpl->EncodeConversation(tok, messages, true);
    auto turn = Reply(**engine, *tmpl, request, prompt, n_ctx, options->shift,
                      SystemPrefixTokens(*tmpl, tok, messages, prompt));
    ++request.sampling.seed;  // each turn draws from its own random stream
    if (!turn.ok()) {
      std::fputs("\n", stdout);
      return fail(turn.message(), 1);
    }
    std::fputs("\n", stdout);
    std::fflush(stdout);
    ChatMessage reply{"assistant", std::string(jinja::Strip(turn->text))};
    if (!turn->reasoning.empty()) reply.reasoning = turn->reasoning;
    messages.push_back(std::move(reply));
    std::fprintf(stderr, "[prompt: %d tokens, %d reused from cache, %d computed]\n", turn->n_prompt,
                 turn->n_reused, turn->n_prompt - turn->n_reused);
    if (n_dropped_messages > 0 || turn->n_dropped > 0) {
      std::fprintf(stderr, "[context: %d oldest messages dropped, %d tokens shifted out]\n",
                   n_dropped_messages, turn->n_dropped);
    }
  }
  return 0;
}

}  // namespace kvserve
