// The handlers behind the OpenAI-compatible endpoints: /v1/completions, /v1/chat/completions,
// /v1/models, /tokenize, /detokenize and DELETE /v1/sessions/{id}. Auth, readiness and routing
// live in HttpServer; these only turn a request into engine work and the result into JSON or SSE.
//
// Called from many HTTP threads at once; every member is const or thread-safe.
#pragma once

#include <httplib.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/embedder.h"
#include "engine/engine.h"
#include "grammar/grammar_cache.h"
#include "server/api_error.h"
#include "server/completion_request.h"
#include "server/metrics.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace kvserve {

// What the routes serve. Everything is borrowed and must outlive the routes.
struct ServedModel {
  Engine* engine = nullptr;
  const Tokenizer* tokenizer = nullptr;
  const ChatTemplate* chat_template = nullptr;
  std::string id;       // the name clients pass as "model"
  int64_t created = 0;  // Unix seconds, for /v1/models
  // POST /v1/embeddings (embeddings_route.h): null when the model computes none; with the
  // server's --pooling.
  Embedder* embedder = nullptr;
  Pooling pooling = Pooling::kMean;
};

struct RouteOptions {
  double request_timeout_s = 0;  // 0 = none; Request::timeout_s of every request
  int max_prompt_tokens = 0;     // 0 = the context; a longer prompt is a 400
  // --reasoning-format: kDeepSeek splits <think> blocks out of chat answers of templates that
  // know them (ChatTemplate::knows_think); a request's "reasoning_format" overrides it.
  ReasoningFormat reasoning_format = ReasoningFormat::kDeepSeek;
  // --reasoning-budget: tokens a reasoning block may take before the server closes it; -1 = none.
  // A request's "reasoning_budget_tokens" overrides it.
  int reasoning_budget = -1;
};

class OpenAiRoutes {
 public:
  // `metrics` is borrowed. `in_flight` counts streaming responses still being written (the
  // shutdown path waits for it to reach 0); borrowed too.
  OpenAiRoutes(ServedModel model, RouteOptions options, ServerMetrics& metrics,
               std::atomic<int>& in_flight);

  // `tenant` is the caller's tag from ApiKeys::Check: it scopes cache salts and sessions.
  // `body` is the request body, read by HttpServer within --max-body.
  void Completions(const httplib::Request& request, const std::string& body,
                   httplib::Response& response, CompletionKind kind, const std::string& tenant);
  void Models(httplib::Response& response) const;
  void Model(const std::string& id, httplib::Response& response) const;
  void Tokenize(const std::string& body, httplib::Response& response) const;
  void Detokenize(const std::string& body, httplib::Response& response) const;
  // llama-server's POST /apply-template: {"messages": [...]} -> {"prompt": rendered text with the
  // generation cue}, nothing generated.
  void ApplyTemplate(const std::string& body, httplib::Response& response) const;
  void DeleteSession(const std::string& session_id, const std::string& tenant,
                     httplib::Response& response);

  const ServedModel& model() const { return model_; }

 private:
  // tool_choice "required" or a named function: the grammar of the calls, and the control
  // tokens' text the answer starts with (Mistral's [TOOL_CALLS]; "" for the others); a 400 when
  // it conflicts with response_format or a tool's schema is refused.
  std::optional<ApiError> ForceToolCalls(const CompletionRequest& request, ToolFormat format,
                                         std::shared_ptr<TokenMasker>& grammar,
                                         std::string& answer_prefix);
  nlohmann::json ModelJson() const;
  ChatOutputOptions ChatOutput(const CompletionRequest& request, const ChatTemplate& chat) const;

  ServedModel model_;
  RouteOptions options_;
  ServerMetrics& metrics_;
  std::atomic<int>& in_flight_;
  std::atomic<uint64_t> next_id_{1};
  std::unique_ptr<GrammarCache> grammars_;  // structured output's compiled grammars
  std::string id_prefix_;  // random per process, so ids do not repeat across restarts
};

void ReplyJson(httplib::Response& response, int status, const nlohmann::json& body);
void ReplyError(httplib::Response& response, const ApiError& error);

}  // namespace kvserve
