#include "server/openai_routes.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>
#include <optional>
#include <random>
#include <thread>

#include "server/completion_job.h"
#include "server/completion_response.h"
#include "server/tool_choice_grammar.h"

namespace kvserve {

using nlohmann::json;

namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(250);
constexpr double kKeepAliveSeconds = 2.0;  // SSE comment when nothing was sent for this long

uint64_t RandomSeed() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  return rng();
}

// The engine's finish reasons that OpenAI's API has no word for are cut-offs by the server.
std::string ClientFinishReason(FinishReason reason) {
  if (reason == FinishReason::kStop) return "stop";
  return "length";  // kTimeout (--request-timeout) and kAbort (shutdown deadline)
}

// One choice as it accumulates.
struct ChoiceProgress {
  int prompt_index = 0;
  std::string text;  // chat with a parser: the content only
  std::vector<LogprobEntry> logprobs;
  std::string finish_reason;
  std::string stop_string;  // the stop string that ended the choice, if one did
  int dropped_tokens = 0;   // context shifts (reported as "truncated")
  bool sent_first = false;
  // Chat: splits reasoning and tool calls out of the text; null: the text is all content.
  std::unique_ptr<ChatOutputParser> parser;
  std::string reasoning;
  std::vector<ParsedToolCall> calls;
  // The thinking budget: the tokens generated so far, how many were inside the reasoning block,
  // and once the block was closed by force, the tokens the continuation took as prompt.
  std::vector<int32_t> generated;
  // Generated tokens inside the reasoning block, tags included (usage, and the thinking budget).
  int reasoning_tokens = 0;
  bool budget_spent = false;
  int continued_tokens = 0;
};

// What closing a reasoning block by force needs: the choices' engine requests as submitted.
struct ThinkingBudget {
  int tokens = -1;  // -1: none
  // What closes the block: kThinkClose, gpt-oss's kHarmonyClose or Gemma 4's kThoughtClose.
  std::string close;
  std::vector<Request> requests;
  const Tokenizer* tokenizer = nullptr;
};

// A piece of generated text through the choice's parser (the end of the output with `finish`),
// added to the choice; returns what it gave.
ChatOutputDelta Feed(ChoiceProgress& choice, const std::string& text, bool finish) {
  ChatOutputDelta delta;
  if (choice.parser == nullptr) {
    delta.content = text;
  } else {
    delta = choice.parser->Push(text);
    if (finish) {
      ChatOutputDelta last = choice.parser->Finish();
      delta.reasoning += last.reasoning;
      delta.content += last.content;
      for (ParsedToolCall& call : last.calls) delta.calls.push_back(std::move(call));
    }
  }
  choice.text += delta.content;
  choice.reasoning += delta.reasoning;
  choice.calls.insert(choice.calls.end(), delta.calls.begin(), delta.calls.end());
  return delta;
}

// Counts a generated token that `delta` came from as reasoning when it was inside the block.
void CountReasoning(ChoiceProgress& choice, const ChatOutputDelta& delta) {
  if (choice.parser != nullptr && (choice.parser->thinking() || !delta.reasoning.empty())) {
    ++choice.reasoning_tokens;
  }
}

// The text forced into a reasoning block that ran out of budget: its closing tag, set apart as
// thinking models write it.
constexpr char kThinkClose[] = "\n</think>\n\n";
// gpt-oss: the analysis message ends and the final answer's message starts.
constexpr char kHarmonyClose[] = "<|end|><|start|>assistant<|channel|>final<|message|>";
// Gemma 4: the thought channel ends as its template writes one.
constexpr char kThoughtClose[] = "\n<channel|>";

// Counts `event`'s token against the budget; when the choice has spent it inside its reasoning
// block, closes the block: the choice's request is continued (CompletionJob::Continue) with the
// tokens generated so far and the closing tag's tokens as prompt (the prefix cache holds what
// was computed), so the answer follows. Returns what the forced tag gave the parser.
ChatOutputDelta SpendThinking(const RequestEvent& event, int index, const ThinkingBudget& budget,
                              CompletionJob& job, ChoiceProgress& choice) {
  if (budget.tokens < 0 || choice.budget_spent || choice.parser == nullptr) return {};
  choice.generated.push_back(event.token);
  // CountReasoning has counted this token already.
  if (!choice.parser->thinking() || choice.reasoning_tokens < budget.tokens) return {};
  choice.budget_spent = true;
  const Request& original = budget.requests[static_cast<size_t>(index)];
  const std::vector<int32_t> close =
      budget.tokenizer->Encode(budget.close, /*add_special=*/false, /*parse_special=*/true);
  const int used =
      choice.continued_tokens + static_cast<int>(choice.generated.size() + close.size());
  if (used >= original.max_tokens) return {};  // no room left for an answer
  Request next = original;
  next.id = original.id + "-answer";
  next.prompt.insert(next.prompt.end(), choice.generated.begin(), choice.generated.end());
  next.prompt.insert(next.prompt.end(), close.begin(), close.end());
  next.max_tokens = original.max_tokens - used;
  if (job.Continue(index, std::move(next))) return {};  // not possible now: thinking goes on
  choice.continued_tokens = used;
  choice.generated.clear();
  return Feed(choice, budget.close, /*finish=*/false);
}

// A finished choice's usage as the client sees it: a continued choice's forced and earlier
// tokens are completion tokens, not prompt.
Usage ChoiceUsage(const ChoiceProgress& choice, Usage usage) {
  usage.prompt_tokens -= choice.continued_tokens;
  usage.completion_tokens += choice.continued_tokens;
  usage.cached_tokens = std::min(usage.cached_tokens, usage.prompt_tokens);
  return usage;
}

// "tool_calls" when calls were parsed out of a choice that ended.
std::string ChoiceFinishReason(const ChoiceProgress& choice, FinishReason reason) {
  return choice.calls.empty() ? ClientFinishReason(reason) : "tool_calls";
}

// delta.tool_calls chunks for calls [first, end) of a choice: the id, type and name with empty
// arguments, then the arguments, as OpenAI streams them.
std::string CallChunks(const ResponseShaper& shaper, int choice_index,
                       const std::vector<ParsedToolCall>& calls, size_t first, bool usage_null) {
  std::string text;
  for (size_t i = first; i < calls.size(); ++i) {
    const int index = static_cast<int>(i);
    ChoiceDelta head{.index = choice_index,
                     .tool_calls = {{.index = index, .id = calls[i].id, .name = calls[i].name}}};
    ChoiceDelta arguments{.index = choice_index,
                          .tool_calls = {{.index = index, .arguments = calls[i].arguments}}};
    text += Sse(shaper.Chunk(head, usage_null)) + Sse(shaper.Chunk(arguments, usage_null));
  }
  return text;
}

// Everything a completion needs after parsing: token prompts and engine requests.
struct PreparedCompletion {
  CompletionRequest request;
  std::vector<std::vector<int32_t>> prompt_tokens;  // one per prompt
  std::vector<Request> engine_requests;             // prompt-major, n per prompt
  std::vector<ChoiceProgress> choices;              // parallel to engine_requests
};

void AddLogprob(const RequestEvent& event, ChoiceProgress& choice) {
  choice.logprobs.push_back(LogprobEntry{.token = event.token,
                                         .logprob = event.logprob,
                                         .top = event.top_logprobs,
                                         .text_offset = choice.text.size()});
}

UsageTotals SumUsage(const std::vector<Usage>& usages, const std::vector<ChoiceProgress>& choices,
                     int n) {
  UsageTotals totals;
  for (const ChoiceProgress& choice : choices) totals.reasoning_tokens += choice.reasoning_tokens;
  for (size_t i = 0; i < usages.size(); ++i) {
    if (static_cast<int>(i) % n == 0) {
      totals.prompt_tokens += usages[i].prompt_tokens;
      totals.cached_tokens += usages[i].cached_tokens;
    }
    totals.completion_tokens += usages[i].completion_tokens;
    totals.drafted_tokens += usages[i].drafted_tokens;
    totals.accepted_tokens += usages[i].accepted_tokens;
    totals.dropped_tokens += usages[i].dropped_tokens;
  }
  return totals;
}

// State of one streamed response, shared with httplib's content provider.
struct StreamState {
  std::unique_ptr<CompletionJob> job;
  ThinkingBudget budget;
  std::unique_ptr<ResponseShaper> shaper;
  std::vector<ChoiceProgress> choices;
  std::vector<Usage> usages;
  int n = 1;
  bool include_usage = false;
  bool logprobs = false;
  bool started = false;
  bool finished = false;
  std::chrono::steady_clock::time_point last_write = std::chrono::steady_clock::now();
};

// Writes as much of the stream as is ready; false when the client is gone.
bool PumpStream(StreamState& state, httplib::DataSink& sink) {
  auto write = [&](const std::string& text) {
    state.last_write = std::chrono::steady_clock::now();
    return sink.write(text.data(), text.size());
  };
  const bool usage_null = state.include_usage;
  if (!state.started) {
    state.started = true;
    if (state.shaper != nullptr) {
      // Chat: a first chunk per choice that names the role, as OpenAI sends it.
      std::string text;
      for (size_t i = 0; i < state.choices.size(); ++i) {
        if (state.choices[i].sent_first) continue;
        ChoiceDelta delta{.index = static_cast<int>(i), .first = true};
        state.choices[i].sent_first = true;
        text += Sse(state.shaper->Chunk(delta, usage_null));
      }
      if (!text.empty() && !write(text)) return false;
    }
  }
  if (state.job->done()) {
    std::string tail;
    if (state.include_usage)
      tail += Sse(state.shaper->UsageChunk(SumUsage(state.usages, state.choices, state.n)));
    tail += kSseDone;
    if (!write(tail)) return false;
    state.finished = true;
    sink.done();
    return true;
  }
  auto next = state.job->Next(kPollInterval);
  if (!next) {
    const double idle =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - state.last_write).count();
    // A comment line keeps proxies from timing out and tells us early when the client is gone.
    if (idle >= kKeepAliveSeconds && !write(": keep-alive\n\n")) return false;
    return true;
  }
  ChoiceProgress& choice = state.choices[next->choice];
  const RequestEvent& event = next->event;
  ChoiceDelta delta{.index = next->choice};
  const size_t first_call = choice.calls.size();
  const bool finish = event.kind == RequestEvent::Kind::kFinish;
  if (!finish && state.logprobs) AddLogprob(event, choice);
  ChatOutputDelta parsed = Feed(choice, event.text, finish);
  if (!finish) {
    CountReasoning(choice, parsed);
    ChatOutputDelta forced = SpendThinking(event, next->choice, state.budget, *state.job, choice);
    parsed.reasoning += forced.reasoning;
    parsed.content += forced.content;
  }
  delta.text = std::move(parsed.content);
  delta.reasoning = std::move(parsed.reasoning);
  std::string text;
  if (!finish) {
    if (state.logprobs) delta.logprobs = {choice.logprobs.back()};
    if (!delta.text.empty() || !delta.reasoning.empty() || !delta.logprobs.empty()) {
      text = Sse(state.shaper->Chunk(delta, usage_null));
    }
    text += CallChunks(*state.shaper, next->choice, choice.calls, first_call, usage_null);
    return text.empty() || write(text);  // empty: held back; nothing to say
  }
  state.usages[next->choice] = ChoiceUsage(choice, event.usage);
  if (choice.calls.size() > first_call) {  // the text first, then the calls, then the finish
    if (!delta.text.empty() || !delta.reasoning.empty()) {
      text = Sse(state.shaper->Chunk(delta, usage_null));
    }
    text += CallChunks(*state.shaper, next->choice, choice.calls, first_call, usage_null);
    delta = ChoiceDelta{.index = next->choice};
  }
  delta.finish_reason = ChoiceFinishReason(choice, event.finish_reason);
  delta.stop_string = event.stop_string;
  delta.dropped_tokens = event.usage.dropped_tokens;
  return write(text + Sse(state.shaper->Chunk(delta, usage_null)));
}

// The answer's forced start (control tokens' text) as the prompts' last tokens.
void AppendAnswerPrefix(const Tokenizer& tokenizer, const std::string& answer_prefix,
                        std::vector<std::vector<int32_t>>& prompts) {
  if (answer_prefix.empty()) return;
  const std::vector<int32_t> prefix =
      tokenizer.Encode(answer_prefix, /*add_special=*/false, /*parse_special=*/true);
  for (std::vector<int32_t>& tokens : prompts)
    tokens.insert(tokens.end(), prefix.begin(), prefix.end());
}

}  // namespace

void ReplyJson(httplib::Response& response, int status, const json& body) {
  response.status = status;
  response.set_content(DumpJson(body), "application/json");
}

void ReplyError(httplib::Response& response, const ApiError& error) {
  response.status = error.http_status;
  if (error.retry_after_s > 0) {
    response.set_header("Retry-After", std::to_string(error.retry_after_s));
  }
  response.set_content(error.Body(), "application/json");
}

OpenAiRoutes::OpenAiRoutes(ServedModel model, RouteOptions options, ServerMetrics& metrics,
                           std::atomic<int>& in_flight)
    : model_(std::move(model)),
      options_(options),
      metrics_(metrics),
      in_flight_(in_flight),
      grammars_(std::make_unique<GrammarCache>(GrammarVocab::FromTokenizer(*model_.tokenizer))) {
  char prefix[17];
  std::snprintf(prefix, sizeof(prefix), "%08x", static_cast<unsigned>(RandomSeed()));
  id_prefix_ = prefix;
}

json OpenAiRoutes::ModelJson() const {
  return {{"id", model_.id},
          {"object", "model"},
          {"created", model_.created},
          {"owned_by", "kvserve"},
          {"max_model_len", model_.engine->n_ctx()}};
}

void OpenAiRoutes::Models(httplib::Response& response) const {
  ReplyJson(response, 200, {{"object", "list"}, {"data", json::array({ModelJson()})}});
}

void OpenAiRoutes::Model(const std::string& id, httplib::Response& response) const {
  if (id != model_.id) {
    ReplyError(response, ApiError::NotFound("model '" + id + "' does not exist; this server " +
                                                "serves '" + model_.id + "'",
                                            "model_not_found"));
    return;
  }
  ReplyJson(response, 200, ModelJson());
}

namespace {

// The request's JSON, checked against this server's model; the session id may come from the
// X-Session-Id header.
std::optional<ApiError> ReadCompletionRequest(const httplib::Request& http_request,
                                              const std::string& text, CompletionKind kind,
                                              const ServedModel& model,
                                              CompletionRequest& request) {
  json body;
  if (auto error = ParseJsonBody(text, body)) return error;
  if (auto error = ParseCompletionRequest(body, kind, model.tokenizer->n_vocab(), request)) {
    return error;
  }
  KeepToolKeyOrder(text, request.tools);
  if (kind == CompletionKind::kChat) {
    if (Status s = model.chat_template->CheckToolUse(request.messages, request.tools); !s.ok()) {
      return ApiError::BadRequest(s.message(),
                                  s.message().starts_with("'tools'") ? "tools" : "messages");
    }
  }
  if (auto error = ParseOutputFormat(body, text, request.output)) return error;
  if (!request.model.empty() && request.model != model.id) {
    return ApiError::NotFound(
        "model '" + request.model + "' does not exist; this " + "server serves '" + model.id + "'",
        "model_not_found");
  }
  if (request.session_id.empty())
    request.session_id = http_request.get_header_value("X-Session-Id");
  if (request.session_id.size() > kMaxIdBytes) {
    return ApiError::BadRequest(
        "X-Session-Id is longer than " + std::to_string(kMaxIdBytes) + " bytes", "session_id");
  }
  return std::nullopt;
}

// What the prompts become besides their tokens: context shifting on or off, the tokens it keeps
// pinned, and the stop strings (the chat template's added).
struct PromptPlan {
  bool shift = false;
  int pinned = 0;
  std::vector<std::string> stop;
};

// Prompts -> token ids (prepared.prompt_tokens), and the plan that goes with them.
PromptPlan EncodePrompts(const ServedModel& model, CompletionKind kind,
                         PreparedCompletion& prepared) {
  const CompletionRequest& request = prepared.request;
  const Tokenizer& tokenizer = *model.tokenizer;
  PromptPlan plan{.shift = request.context_overflow.value_or(
                               model.engine->options().context_overflow) == ContextOverflow::kShift,
                  .pinned = request.pinned_prefix_tokens.value_or(0),
                  .stop = request.stop};
  if (kind == CompletionKind::kText) {
    for (const PromptInput& prompt : request.prompts) {
      prepared.prompt_tokens.push_back(prompt.is_tokens
                                           ? prompt.tokens
                                           : tokenizer.Encode(prompt.text, /*add_special=*/true,
                                                              /*parse_special=*/true));
    }
    return plan;
  }
  const ChatTemplate& chat = *model.chat_template;
  const ChatRenderOptions render{.reasoning_effort = request.reasoning_effort,
                                 .enable_thinking = request.enable_thinking};
  prepared.prompt_tokens.push_back(chat.EncodeConversation(
      tokenizer, request.messages, /*add_generation_prompt=*/true, request.tools, render));
  if (plan.shift && !request.pinned_prefix_tokens && request.messages.front().role == "system") {
    // Pinned by default: the tokens the rendered system message shares with the prompt.
    const std::vector<int32_t> system = chat.EncodeConversation(
        tokenizer, std::span(request.messages).first(1), false, request.tools, render);
    const std::vector<int32_t>& prompt = prepared.prompt_tokens.back();
    plan.pinned = static_cast<int>(
        std::mismatch(system.begin(), system.end(), prompt.begin(), prompt.end()).first -
        system.begin());
  }
  for (std::string& s : chat.stop_strings()) {
    if (std::find(plan.stop.begin(), plan.stop.end(), s) == plan.stop.end()) {
      plan.stop.push_back(std::move(s));
    }
  }
  return plan;
}

// A prompt of n_prompt tokens against the limits and the context: sets *max_tokens, the
// answer's token budget, or returns the error that names the parameter (`where`: "prompt",
// "prompt[2]", "messages").
std::optional<ApiError> FitToContext(const CompletionRequest& request, CompletionKind kind,
                                     int n_prompt, int n_ctx, bool shift, int max_prompt_tokens,
                                     const std::string& where, int* max_tokens) {
  const bool text_kind = kind == CompletionKind::kText;
  const char* param = text_kind ? "prompt" : "messages";
  if (n_prompt == 0) return ApiError::BadRequest("'" + where + "' is empty (0 tokens)", param);
  if (max_prompt_tokens > 0 && n_prompt > max_prompt_tokens) {
    return ApiError::BadRequest("'" + where + "' is " + std::to_string(n_prompt) +
                                    " tokens; this server takes at most " +
                                    std::to_string(max_prompt_tokens) + " (--max-prompt-tokens)",
                                param);
  }
  if (!shift && FitContext(n_prompt, 1, n_ctx) == ContextFit::kPromptFills) {
    return ApiError::BadRequest("'" + where + "' is " + std::to_string(n_prompt) +
                                    " tokens; this model's context holds " + std::to_string(n_ctx) +
                                    " tokens, and the completion needs at least one",
                                param);
  }
  int budget = request.max_tokens.value_or(text_kind ? 16 : CompletionRoom(n_prompt, n_ctx));
  if (!request.max_tokens) budget = std::min(budget, CompletionRoom(n_prompt, n_ctx));
  // Shifting, the context bounds no answer; chat's default is at least half a context.
  if (shift && !request.max_tokens && !text_kind) budget = std::max(budget, n_ctx / 2);
  if (!shift && FitContext(n_prompt, budget, n_ctx) != ContextFit::kFits) {
    return ApiError::BadRequest("this model's maximum context length is " + std::to_string(n_ctx) +
                                    " tokens, but " + std::to_string(n_prompt + budget) +
                                    " were requested (" + std::to_string(n_prompt) +
                                    " in the prompt, " + std::to_string(budget) +
                                    " in max_tokens); lower max_tokens or shorten the prompt",
                                "max_tokens");
  }
  *max_tokens = budget;
  return std::nullopt;
}

}  // namespace

// How a chat choice's text is read: reasoning split out (the request's reasoning_format, else
// the server's for templates of thinking models) and tool calls parsed (tools offered and
// tool_choice not "none").
ChatOutputOptions OpenAiRoutes::ChatOutput(const CompletionRequest& request,
                                           const ChatTemplate& chat) const {
  const ReasoningFormat reasoning = request.reasoning_format.value_or(options_.reasoning_format);
  const bool parse_tools = !request.tools.empty() && request.tool_choice != ToolChoice::kNone;
  const ToolFormat format = parse_tools ? chat.tool_format() : ToolFormat::kNone;
  return ChatOutputOptions{
      .split_reasoning = reasoning == ReasoningFormat::kDeepSeek &&
                         (request.reasoning_format.has_value() || chat.knows_think()),
      .prompt_opens_think = chat.prompt_opens_think(),
      .harmony = chat.family() == ChatFamily::kHarmony,
      .gemma4 = chat.family() == ChatFamily::kGemma4,
      .tool_format = format,
      .parallel_tool_calls = request.parallel_tool_calls,
      .tools = format == ToolFormat::kQwenXml ? request.tools : std::vector<ChatTool>{}};
}

namespace {

// Waits for every choice, then answers with the whole completion.
void ReplyWhole(CompletionJob& job, const ResponseShaper& shaper, const ThinkingBudget& budget,
                PreparedCompletion& prepared, httplib::Response& response) {
  const CompletionRequest& request = prepared.request;
  const size_t n_choices = prepared.choices.size();
  std::vector<Usage> usages(n_choices);
  while (!job.done()) {
    auto next = job.Next(std::chrono::seconds(1));
    if (!next) continue;
    ChoiceProgress& choice = prepared.choices[next->choice];
    const RequestEvent& event = next->event;
    if (event.kind == RequestEvent::Kind::kToken) {
      if (request.logprobs) AddLogprob(event, choice);
      CountReasoning(choice, Feed(choice, event.text, /*finish=*/false));
      SpendThinking(event, next->choice, budget, job, choice);
      continue;
    }
    Feed(choice, event.text, /*finish=*/true);
    choice.finish_reason = ChoiceFinishReason(choice, event.finish_reason);
    choice.stop_string = event.stop_string;
    choice.dropped_tokens = event.usage.dropped_tokens;
    usages[next->choice] = ChoiceUsage(choice, event.usage);
  }
  std::vector<ChoiceResult> results;
  for (size_t i = 0; i < n_choices; ++i) {
    results.push_back(ChoiceResult{.index = static_cast<int>(i),
                                   .text = std::move(prepared.choices[i].text),
                                   .finish_reason = prepared.choices[i].finish_reason,
                                   .stop_string = std::move(prepared.choices[i].stop_string),
                                   .logprobs = std::move(prepared.choices[i].logprobs),
                                   .dropped_tokens = prepared.choices[i].dropped_tokens,
                                   .reasoning = std::move(prepared.choices[i].reasoning),
                                   .tool_calls = std::move(prepared.choices[i].calls)});
  }
  ReplyJson(response, 200, shaper.Whole(results, SumUsage(usages, prepared.choices, request.n)));
}

// Answers with server-sent events as the tokens come; `in_flight` counts the open streams.
void ReplyStream(std::unique_ptr<CompletionJob> job, std::unique_ptr<ResponseShaper> shaper,
                 ThinkingBudget budget, PreparedCompletion& prepared, CompletionKind kind,
                 std::atomic<int>& in_flight, httplib::Response& response) {
  auto state = std::make_shared<StreamState>();
  state->job = std::move(job);
  state->budget = std::move(budget);
  state->shaper = std::move(shaper);
  state->choices = std::move(prepared.choices);
  state->usages.resize(state->choices.size());
  state->n = prepared.request.n;
  state->include_usage = prepared.request.include_usage;
  state->logprobs = prepared.request.logprobs;
  if (kind == CompletionKind::kText) {
    for (ChoiceProgress& choice : state->choices) choice.sent_first = true;  // no role chunk
  }
  response.status = 200;
  response.set_header("Cache-Control", "no-cache");
  in_flight.fetch_add(1);
  std::atomic<int>* counter = &in_flight;
  response.set_chunked_content_provider(
      "text/event-stream",
      [state](size_t /*offset*/, httplib::DataSink& sink) {
        if (state->finished) return false;
        if (!PumpStream(*state, sink)) {
          state->job->AbortAll();  // the client is gone: free its blocks now
          return false;
        }
        return true;
      },
      [state, counter](bool /*success*/) {
        state->job->AbortAll();  // no-op when every choice finished
        counter->fetch_sub(1);
      });
}

}  // namespace

std::optional<ApiError> OpenAiRoutes::ForceToolCalls(const CompletionRequest& request,
                                                     ToolFormat format,
                                                     std::shared_ptr<TokenMasker>& grammar,
                                                     std::string& answer_prefix) {
  if (grammar) {
    return ApiError::BadRequest(
        "'tool_choice' \"required\" or a named function does not go with '" + request.output.field +
            "': give one of them",
        "tool_choice");
  }
  auto forced = ForcedToolCallGrammar(format, request.tools, request.forced_tools,
                                      request.parallel_tool_calls);
  if (!forced.ok()) {
    return ApiError::BadRequest(
        forced.message(), forced.message().starts_with("tool_choice") ? "tool_choice" : "tools");
  }
  if (!*forced) return std::nullopt;  // a template without tool calls
  auto compiled = grammars_->Get(GrammarSource::kGbnf, (*forced)->gbnf);
  if (!compiled.ok()) return ApiError::BadRequest(compiled.message(), "tools");
  grammar = *compiled;
  answer_prefix = (*forced)->answer_prefix;
  // Qwen 3.5's cue opens <think>: the forced calls come after an empty reasoning block, as the
  // template writes it with thinking off ("<think>\n\n</think>\n\n"), not inside it.
  if (model_.chat_template->prompt_opens_think()) answer_prefix = "\n</think>\n\n" + answer_prefix;
  return std::nullopt;
}

void OpenAiRoutes::Completions(const httplib::Request& http_request, const std::string& text,
                               httplib::Response& response, CompletionKind kind,
                               const std::string& tenant) {
  const auto arrival = std::chrono::steady_clock::now();
  PreparedCompletion prepared;
  CompletionRequest& request = prepared.request;
  if (auto error = ReadCompletionRequest(http_request, text, kind, model_, request)) {
    return ReplyError(response, *error);
  }
  std::shared_ptr<TokenMasker> grammar;
  if (request.output.source) {
    auto compiled = grammars_->Get(*request.output.source, request.output.text);
    if (!compiled.ok())
      return ReplyError(response, ApiError::BadRequest(compiled.message(), request.output.field));
    grammar = *compiled;
  }
  const PromptPlan plan = EncodePrompts(model_, kind, prepared);
  const bool text_kind = kind == CompletionKind::kText;
  const ChatOutputOptions output =
      text_kind ? ChatOutputOptions{} : ChatOutput(request, *model_.chat_template);
  const bool parse_output = !text_kind && (output.split_reasoning || output.harmony ||
                                           output.tool_format != ToolFormat::kNone);
  // Mistral's forced calls start with [TOOL_CALLS], a control token: it ends the prompt as the
  // answer's first token, and each choice's parser reads it first.
  std::string answer_prefix;
  if (!request.forced_tools.empty()) {
    if (auto error = ForceToolCalls(request, output.tool_format, grammar, answer_prefix)) {
      return ReplyError(response, *error);
    }
  }
  AppendAnswerPrefix(*model_.tokenizer, answer_prefix, prepared.prompt_tokens);
  const std::vector<int32_t> decoder_prompt = model_.tokenizer->Encode(
      request.decoder_prompt, /*add_special=*/false, /*parse_special=*/false);
  const std::string id = std::string(text_kind ? "cmpl-" : "chatcmpl-") + id_prefix_ +
                         std::to_string(next_id_.fetch_add(1, std::memory_order_relaxed));
  for (size_t p = 0; p < prepared.prompt_tokens.size(); ++p) {
    const std::vector<int32_t>& tokens = prepared.prompt_tokens[p];
    const char* param = text_kind ? "prompt" : "messages";
    const std::string where =
        prepared.prompt_tokens.size() > 1 ? "prompt[" + std::to_string(p) + "]" : param;
    int max_tokens = 0;
    // An encoder-decoder's prompt is the encoder's input: the context bounds it alone, and the
    // answer by the decoder's own tokens.
    const bool encoder_decoder = model_.engine->encoder_decoder();
    const int n_ctx = model_.engine->n_ctx();
    if (encoder_decoder && static_cast<int>(tokens.size()) > n_ctx) {
      return ReplyError(response,
                        ApiError::BadRequest("'" + where + "' is " + std::to_string(tokens.size()) +
                                                 " tokens; this model's encoder reads "
                                                 "at most " +
                                                 std::to_string(n_ctx),
                                             param));
    }
    const int n_context_prompt = encoder_decoder ? 1 + static_cast<int>(decoder_prompt.size())
                                                 : static_cast<int>(tokens.size());
    if (auto error = FitToContext(request, kind, n_context_prompt, n_ctx, plan.shift,
                                  options_.max_prompt_tokens, where, &max_tokens)) {
      return ReplyError(response, *error);
    }
    for (int j = 0; j < request.n; ++j) {
      Request r;
      r.id = id + "-" + std::to_string(p * request.n + j);
      r.prompt = tokens;
      r.decoder_prompt = decoder_prompt;
      r.max_tokens = max_tokens;
      r.sampling = request.sampling;
      r.sampling.seed =
          request.seeded ? request.sampling.seed + static_cast<uint64_t>(j) : RandomSeed();
      r.stop = plan.stop;
      r.ignore_eos = request.ignore_eos;
      r.speculative = request.speculative;
      r.context_overflow = plan.shift ? ContextOverflow::kShift : ContextOverflow::kError;
      r.pinned_prefix_tokens = plan.pinned;
      r.logprobs = request.logprobs;
      r.grammar = grammar;
      r.cache_salt = tenant + "/" + request.cache_salt;
      if (!request.session_id.empty()) r.session_id = tenant + "/" + request.session_id;
      r.timeout_s = options_.request_timeout_s;
      // Llama 3's <|python_tag|>, Mistral's [TOOL_CALLS], gpt-oss's channel markup and Gemma 4's
      // channel and call markers are control tokens: keep their text.
      r.decode.render_special = output.harmony || output.gemma4 ||
                                output.tool_format == ToolFormat::kLlama3 ||
                                output.tool_format == ToolFormat::kMistral;
      prepared.engine_requests.push_back(std::move(r));
      ChoiceProgress choice{.prompt_index = static_cast<int>(p)};
      if (parse_output) {
        choice.parser = std::make_unique<ChatOutputParser>(output);
        if (!answer_prefix.empty()) choice.parser->Push(answer_prefix);  // a marker: no content
      }
      prepared.choices.push_back(std::move(choice));
    }
  }

  ThinkingBudget budget{.tokens = output.split_reasoning
                                      ? request.reasoning_budget.value_or(options_.reasoning_budget)
                                      : -1,
                        .close = output.harmony  ? kHarmonyClose
                                 : output.gemma4 ? kThoughtClose
                                                 : kThinkClose,
                        .tokenizer = model_.tokenizer};
  if (budget.tokens >= 0) budget.requests = prepared.engine_requests;
  auto job = std::make_unique<CompletionJob>(*model_.engine, metrics_, arrival);
  if (auto error = job->Submit(std::move(prepared.engine_requests))) {
    return ReplyError(response, *error);
  }
  auto shaper = std::make_unique<ResponseShaper>(kind, id, model_.id,
                                                 static_cast<int64_t>(std::time(nullptr)),
                                                 *model_.tokenizer, request.logprobs);
  if (!request.stream) return ReplyWhole(*job, *shaper, budget, prepared, response);
  ReplyStream(std::move(job), std::move(shaper), std::move(budget), prepared, kind, in_flight_,
              response);
}

void OpenAiRoutes::Tokenize(const std::string& text, httplib::Response& response) const {
  json body;
  if (auto error = ParseJsonBody(text, body)) return ReplyError(response, *error);
  auto content = body.find("content");
  if (content == body.end() || !content->is_string()) {
    return ReplyError(response, ApiError::BadRequest("'content' must be a string", "content"));
  }
  bool add_special = false, parse_special = true, with_pieces = false;
  for (auto [name, flag] : {std::pair<const char*, bool*>{"add_special", &add_special},
                            {"parse_special", &parse_special},
                            {"with_pieces", &with_pieces}}) {
    auto it = body.find(name);
    if (it == body.end() || it->is_null()) continue;
    if (!it->is_boolean()) {
      return ReplyError(response, ApiError::BadRequest(
                                      std::string("'") + name + "' must be true or false", name));
    }
    *flag = it->get<bool>();
  }
  const std::vector<int32_t> tokens =
      model_.tokenizer->Encode(content->get<std::string>(), add_special, parse_special);
  json list = json::array();
  for (int32_t id : tokens) {
    if (with_pieces) {
      list.push_back({{"id", id}, {"piece", model_.tokenizer->TokenPiece(id, true)}});
    } else {
      list.push_back(id);
    }
  }
  ReplyJson(response, 200, {{"tokens", list}});
}

void OpenAiRoutes::Detokenize(const std::string& text, httplib::Response& response) const {
  json body;
  if (auto error = ParseJsonBody(text, body)) return ReplyError(response, *error);
  auto tokens = body.find("tokens");
  if (tokens == body.end() || !tokens->is_array()) {
    return ReplyError(response,
                      ApiError::BadRequest("'tokens' must be an array of token ids", "tokens"));
  }
  const int n_vocab = model_.tokenizer->n_vocab();
  std::vector<int32_t> ids;
  ids.reserve(tokens->size());
  for (size_t i = 0; i < tokens->size(); ++i) {
    const json& item = (*tokens)[i];
    const bool in_range = item.is_number_integer() && item.get<int64_t>() >= 0 &&
                          item.get<int64_t>() < n_vocab &&
                          !(item.is_number_unsigned() && item.get<uint64_t>() >= uint64_t(n_vocab));
    if (!in_range) {
      return ReplyError(
          response,
          ApiError::BadRequest("'tokens[" + std::to_string(i) + "]' is " + DumpJson(item) +
                                   ", not a token id in [0, " + std::to_string(n_vocab) + ")",
                               "tokens"));
    }
    ids.push_back(static_cast<int32_t>(item.get<int64_t>()));
  }
  ReplyJson(response, 200, {{"content", model_.tokenizer->Decode(ids)}});
}

void OpenAiRoutes::ApplyTemplate(const std::string& text, httplib::Response& response) const {
  json body;
  if (auto error = ParseJsonBody(text, body)) return ReplyError(response, *error);
  std::vector<ChatMessage> messages;
  if (auto error = ParseChatMessages(body, messages)) return ReplyError(response, *error);
  std::vector<ChatTool> tools;
  if (auto error = ParseChatTools(body, tools)) return ReplyError(response, *error);
  KeepToolKeyOrder(text, tools);
  std::string effort;
  if (auto error = ParseReasoningEffort(body, effort)) return ReplyError(response, *error);
  bool thinking = false;
  if (auto error = ParseChatTemplateKwargs(body, thinking)) return ReplyError(response, *error);
  const ChatTemplate& chat = *model_.chat_template;
  if (Status s = chat.CheckToolUse(messages, tools); !s.ok()) {
    return ReplyError(response, ApiError::BadRequest(s.message(), "tools"));
  }
  ReplyJson(response, 200,
            {{"prompt",
              chat.PromptText(messages, /*add_generation_prompt=*/true, *model_.tokenizer, tools,
                              {.reasoning_effort = effort, .enable_thinking = thinking})}});
}

void OpenAiRoutes::DeleteSession(const std::string& session_id, const std::string& tenant,
                                 httplib::Response& response) {
  if (session_id.empty() || session_id.size() > kMaxIdBytes) {
    return ReplyError(response, ApiError::BadRequest("session id must be 1 to " +
                                                         std::to_string(kMaxIdBytes) + " bytes",
                                                     "session_id"));
  }
  // The engine publishes a pinned session before the request that pinned it reports its finish,
  // so a client deleting right after its reply always finds it.
  if (!model_.engine->ReleaseSession(tenant + "/" + session_id)) {
    return ReplyError(response, ApiError::NotFound("session '" + session_id + "' not found",
                                                   "session_not_found"));
  }
  ReplyJson(response, 200, {{"id", session_id}, {"object", "session"}, {"deleted", true}});
}

}  // namespace kvserve
