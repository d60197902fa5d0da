#include "server/http_server.h"

#include <algorithm>
#include <thread>

#include "server/anthropic_messages.h"
#include "server/anthropic_stream.h"
#include "server/embeddings_route.h"
#include "server/responses_api.h"
#include "server/responses_stream.h"
#include "server/webui_routes.h"

namespace kvserve {

HttpServer::HttpServer(HttpServerOptions options)
    : options_(std::move(options)),
      server_(
          ListenerOptions{.workers = std::max(2, options_.threads),
                          .max_connections = std::max(1, options_.max_connections),
                          .request_timeout_s = static_cast<double>(options_.read_timeout_s),
                          .idle_timeout_s = static_cast<double>(options_.keep_alive_timeout_s),
                          .write_timeout_s = static_cast<double>(options_.write_timeout_s),
                          .max_body_bytes = options_.max_body_bytes,
                          .on_refused = [this](int status) { metrics_.CountHttpResponse(status); },
                          .tls_cert_file = options_.tls_cert_file,
                          .tls_key_file = options_.tls_key_file}),
      metrics_(options_.replica_name),
      limiter_(options_.max_concurrent_per_key),
      watchdog_(options_.watchdog_s) {
  for (const Route& route : RouteTable()) route_patterns_.emplace_back(route.path);
  Install();
}

std::span<const HttpServer::Route> HttpServer::RouteTable() {
  static const Route kRoutes[] = {
      {"GET", "/health", false, Access::kOpen, &HttpServer::Health},
      {"GET", "/readyz", false, Access::kOpen, &HttpServer::Health},
      {"GET", "/livez", false, Access::kOpen, &HttpServer::Livez},
      {"GET", "/metrics", false, Access::kOpenUnlessMetricsAuth, &HttpServer::Metrics},
      {"GET", "/v1/models", false, Access::kApiKey, &HttpServer::ListModels},
      {"GET", "/v1/models/([^/]+)", false, Access::kApiKey, &HttpServer::GetModel},
      {"POST", "/v1/completions", true, Access::kApiKey, &HttpServer::TextCompletions},
      {"POST", "/v1/chat/completions", true, Access::kApiKey, &HttpServer::ChatCompletions},
      {"POST", "/v1/embeddings", true, Access::kApiKey, &HttpServer::Embeddings},
      {"POST", "/tokenize", true, Access::kApiKey, &HttpServer::Tokenize},
      {"POST", "/detokenize", true, Access::kApiKey, &HttpServer::Detokenize},
      {"POST", "/apply-template", true, Access::kApiKey, &HttpServer::ApplyTemplate},
      {"POST", kMessagesPath, true, Access::kApiKey, &HttpServer::Messages},
      {"POST", "/v1/responses", true, Access::kApiKey, &HttpServer::Responses},
      {"DELETE", "/v1/sessions/([^/]+)", false, Access::kApiKey, &HttpServer::DeleteSession},
  };
  return kRoutes;
}

const HttpServer::Route* HttpServer::FindRoute(const std::string& method,
                                               const std::string& path) const {
  const std::span<const Route> routes = RouteTable();
  for (size_t i = 0; i < routes.size(); ++i) {
    if (method == routes[i].method && std::regex_match(path, route_patterns_[i])) {
      return &routes[i];
    }
  }
  return nullptr;
}

// Open: a route whose access allows it without a key, or a page of the web UI. Everything else,
// unknown paths included, needs the key (an unknown path is not revealed to a caller without one).
bool HttpServer::IsOpen(const httplib::Request& request) const {
  if (options_.webui && IsWebUiPagePath(request.path)) return true;
  const Route* route = FindRoute(request.method, request.path);
  if (route == nullptr) {
    // HEAD and OPTIONS of an open GET route are as open as the route.
    route = FindRoute("GET", request.path);
    if (route == nullptr) return false;
  }
  return route->access == Access::kOpen ||
         (route->access == Access::kOpenUnlessMetricsAuth && !options_.metrics_auth);
}

HttpServer::~HttpServer() { Stop(); }

std::optional<std::string> HttpServer::Authorize(const httplib::Request& request,
                                                 httplib::Response& response) const {
  // Anthropic's clients send the key as `x-api-key: KEY`; it counts only when no Authorization
  // header was sent, so one request never has two keys to choose between.
  const bool bearer = request.has_header("Authorization");
  const bool x_api_key = !bearer && request.has_header("x-api-key");
  auto tenant =
      options_.api_keys.Check(x_api_key ? "Bearer " + request.get_header_value("x-api-key")
                                        : request.get_header_value("Authorization"));
  if (!tenant) {
    const ApiError error = ApiError::Unauthorized(
        bearer      ? "invalid API key in the Authorization header"
        : x_api_key ? "invalid API key in the x-api-key header"
                    : "missing API key: send 'Authorization: Bearer KEY' (or 'x-api-key: KEY')");
    ReplyError(response, error);
    if (request.path == kMessagesPath) {
      response.set_content(DumpJson(AnthropicErrorJson(error)), "application/json");
    }
    response.set_header("WWW-Authenticate", "Bearer");
  }
  return tenant;
}

bool HttpServer::ReadBody(const httplib::ContentReader& reader, std::string& body,
                          httplib::Response& response) const {
  bool too_large = false;
  const bool ok = reader([&](const char* data, size_t n) {
    if (body.size() + n > options_.max_body_bytes) {
      too_large = true;
      return false;
    }
    body.append(data, n);
    return true;
  });
  if (ok) return true;
  if (too_large || response.status == 413) {
    ReplyError(response, ApiError::PayloadTooLarge(options_.max_body_bytes));
  } else {
    ReplyError(response, ApiError::BadRequest("could not read the request body (malformed, or "
                                              "the client stopped sending)"));
  }
  return false;
}

OpenAiRoutes* HttpServer::Ready(httplib::Response& response) {
  switch (state_.load()) {
    case State::kReady:
      return routes_.get();
    case State::kLoading:
      ReplyError(response, ApiError::Unavailable("the model is still loading"));
      return nullptr;
    case State::kDraining:
      ReplyError(response, ApiError::Unavailable("the server is shutting down"));
      return nullptr;
  }
  return nullptr;
}

void HttpServer::Install() {
  server_.set_payload_max_length(options_.max_body_bytes);  // timeouts: ListenerOptions
  // Copied into every response, errors and streams included, so a proxy's routing can be seen.
  if (!options_.replica_name.empty()) {
    server_.set_default_headers({{"X-Kvserve-Replica", options_.replica_name}});
  }
  InstallHooks();
  for (const Route& route : RouteTable()) InstallRoute(route);
  if (options_.webui) {
    InstallWebUiRoutes(
        server_,
        WebUiHooks{.ready = [this](httplib::Response& response) -> Engine* {
                     OpenAiRoutes* routes = Ready(response);
                     return routes ? routes->model().engine : nullptr;
                   },
                   .authorize =
                       [this](const httplib::Request& request, httplib::Response& response) {
                         return Authorize(request, response);
                       },
                   .serving = [this] { return state_.load() == State::kReady; }});
  }
}

void HttpServer::InstallRoute(const Route& route) {
  const Handler handler = route.handler;
  const std::string method = route.method;
  if (route.reads_body) {
    server_.Post(route.path,
                 [this, handler](const httplib::Request& request, httplib::Response& response,
                                 const httplib::ContentReader& reader) {
                   std::string body;
                   if (ReadBody(reader, body, response)) (this->*handler)(request, body, response);
                 });
    return;
  }
  auto call = [this, handler](const httplib::Request& request, httplib::Response& response) {
    (this->*handler)(request, std::string(), response);
  };
  if (method == "GET") {
    server_.Get(route.path, call);
  } else if (method == "DELETE") {
    server_.Delete(route.path, call);
  } else {
    server_.Post(route.path, call);
  }
}

// The checks before routing, the error and exception bodies, and the response counter.
void HttpServer::InstallHooks() {
  server_.set_pre_routing_handler(
      [this](const httplib::Request& request, httplib::Response& response) {
        // httplib would read a chunked body of any size for the other routes: refuse it unread.
        const Route* route = FindRoute(request.method, request.path);
        if ((route == nullptr || !route->reads_body) &&
            request.get_header_value("Transfer-Encoding").find("chunked") != std::string::npos) {
          ReplyError(response,
                     ApiError::BadRequest("a chunked request body is accepted only by the POST "
                                          "API routes, not by " +
                                          request.method + " " + request.path));
          return httplib::Server::HandlerResponse::Handled;
        }
        if (IsOpen(request)) return httplib::Server::HandlerResponse::Unhandled;
        if (!Authorize(request, response)) return httplib::Server::HandlerResponse::Handled;
        return httplib::Server::HandlerResponse::Unhandled;
      });
  // Called for every response with status >= 400; fills in a body where httplib left none
  // (unknown route, body too large, malformed request).
  server_.set_error_handler(httplib::Server::HandlerWithResponse(
      [this](const httplib::Request& request, httplib::Response& response) {
        if (!response.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        ApiError error;
        switch (response.status) {
          case 404:
            error = ApiError::NotFound("no route for " + request.method + " " + request.path);
            break;
          case 413:
            error = ApiError::PayloadTooLarge(options_.max_body_bytes);
            break;
          default:
            error = ApiError{.http_status = response.status,
                             .message = "malformed HTTP request (status " +
                                        std::to_string(response.status) + ")"};
            if (response.status >= 500) error.type = "server_error";
        }
        ReplyError(response, error);
        return httplib::Server::HandlerResponse::Handled;
      }));
  server_.set_exception_handler(
      [](const httplib::Request&, httplib::Response& response, std::exception_ptr exception) {
        std::string what = "unknown exception";
        try {
          if (exception) std::rethrow_exception(exception);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        ReplyError(response, ApiError::Internal("internal error: " + what));
      });
  server_.set_logger([this](const httplib::Request&, const httplib::Response& response) {
    metrics_.CountHttpResponse(response.status);
  });
}

// The step watchdog's verdict now: the 503 body of a stuck engine, or nullopt. Loading: no engine
// yet, nothing to judge.
std::optional<nlohmann::json> HttpServer::StuckReport() {
  if (state_.load() == State::kLoading || !routes_) return std::nullopt;
  Engine* engine = routes_->model().engine;
  const EngineStats stats = engine ? engine->Stats() : EngineStats{};
  const StepWatchdog::Verdict verdict =
      watchdog_.Observe(stats.steps, stats.running + stats.waiting > 0, StepWatchdog::Clock::now());
  if (!verdict.stuck) return std::nullopt;
  return nlohmann::json{{"status", "stuck"},
                        {"stalled_s", verdict.stalled_s},
                        {"running", stats.running},
                        {"waiting", stats.waiting}};
}

// /health and /readyz: ready for traffic. 503 while loading, while draining, and when stuck.
void HttpServer::Health(const httplib::Request&, const std::string&, httplib::Response& response) {
  switch (state_.load()) {
    case State::kReady:
      if (auto stuck = StuckReport()) return ReplyJson(response, 503, *stuck);
      return ReplyJson(response, 200, {{"status", "ok"}});
    case State::kLoading:
      return ReplyJson(response, 503, {{"status", "loading"}});
    case State::kDraining:
      return ReplyJson(response, 503, {{"status", "draining"}});
  }
}

// /livez: the process answers and its engine is not stuck. Loading and draining are alive (a
// restart would not help them); only a step loop that stopped with work pending is not.
void HttpServer::Livez(const httplib::Request&, const std::string&, httplib::Response& response) {
  if (auto stuck = StuckReport()) return ReplyJson(response, 503, *stuck);
  const State state = state_.load();
  ReplyJson(response, 200,
            {{"status", "alive"},
             {"state", state == State::kReady     ? "ready"
                       : state == State::kLoading ? "loading"
                                                  : "draining"}});
}

void HttpServer::Metrics(const httplib::Request&, const std::string&, httplib::Response& response) {
  EngineStats stats;
  if (state_.load() != State::kLoading && routes_) stats = routes_->model().engine->Stats();
  response.set_content(metrics_.Render(stats), "text/plain; version=0.0.4; charset=utf-8");
}

void HttpServer::ListModels(const httplib::Request&, const std::string&,
                            httplib::Response& response) {
  if (OpenAiRoutes* routes = Ready(response)) routes->Models(response);
}

void HttpServer::GetModel(const httplib::Request& request, const std::string&,
                          httplib::Response& response) {
  if (OpenAiRoutes* routes = Ready(response)) routes->Model(request.matches[1].str(), response);
}

void HttpServer::TextCompletions(const httplib::Request& request, const std::string& body,
                                 httplib::Response& response) {
  Completions(request, body, response, CompletionKind::kText);
}

void HttpServer::ChatCompletions(const httplib::Request& request, const std::string& body,
                                 httplib::Response& response) {
  Completions(request, body, response, CompletionKind::kChat);
}

void HttpServer::Completions(const httplib::Request& request, const std::string& body,
                             httplib::Response& response, CompletionKind kind) {
  OpenAiRoutes* routes = Ready(response);
  if (!routes) return;
  auto tenant = Authorize(request, response);
  if (!tenant) return;
  std::shared_ptr<TenantLimiter::Lease> lease = limiter_.Acquire(*tenant);
  if (!lease) {
    ApiError error = ApiError::TooManyRequests(
        "this API key already has " + std::to_string(limiter_.limit()) +
            " requests in flight (--max-concurrent-per-key); retry when one has finished",
        1);
    error.code = "too_many_concurrent_requests";
    return ReplyError(response, error);
  }
  routes->Completions(request, body, response, kind, *tenant);
  // A streamed answer outlives this call: the lease goes with the stream's resources, which
  // httplib releases when the response is done (written, or the client gone).
  if (response.content_provider_) {
    auto release = std::move(response.content_provider_resource_releaser_);
    response.content_provider_resource_releaser_ = [lease, release](bool success) {
      if (release) release(success);
    };
  }
}

// Anthropic's Messages API: the request translated into a chat completion's, run through the
// chat route (its auth, per-key limit, template, parser and engine), the answer translated back.
void HttpServer::Messages(const httplib::Request& request, const std::string& body,
                          httplib::Response& response) {
  nlohmann::json parsed, chat;
  std::optional<ApiError> error = ParseJsonBody(body, parsed);
  if (!error) error = AnthropicToChat(parsed, chat);
  if (error) return ReplyJson(response, error->http_status, AnthropicErrorJson(*error));
  httplib::Response answer;
  Completions(request, DumpJson(chat), answer, CompletionKind::kChat);
  ReplyAnthropic(answer, chat.value("stop", nlohmann::json()), response);
}

// OpenAI's Responses API, stateless: the request translated into a chat completion's, run through
// the chat route, the answer translated back into a response object or its events.
void HttpServer::Responses(const httplib::Request& request, const std::string& body,
                           httplib::Response& response) {
  nlohmann::json parsed, chat;
  std::optional<ApiError> error = ParseJsonBody(body, parsed);
  if (!error) error = ResponsesToChat(parsed, chat);
  if (error) return ReplyError(response, *error);
  httplib::Response answer;
  Completions(request, DumpJson(chat), answer, CompletionKind::kChat);
  ReplyResponses(answer, ResponseShell(parsed), response);
}

void HttpServer::Embeddings(const httplib::Request&, const std::string& body,
                            httplib::Response& response) {
  OpenAiRoutes* routes = Ready(response);
  if (routes == nullptr) return;
  const ServedModel& model = routes->model();
  if (model.embedder == nullptr) {
    return ReplyError(response,
                      ApiError::BadRequest("this server computes no embeddings", "model"));
  }
  ServeEmbeddings(body, *model.embedder, *model.tokenizer, model.pooling, model.id, response);
}

void HttpServer::Tokenize(const httplib::Request&, const std::string& body,
                          httplib::Response& response) {
  if (OpenAiRoutes* routes = Ready(response)) routes->Tokenize(body, response);
}

void HttpServer::Detokenize(const httplib::Request&, const std::string& body,
                            httplib::Response& response) {
  if (OpenAiRoutes* routes = Ready(response)) routes->Detokenize(body, response);
}

void HttpServer::ApplyTemplate(const httplib::Request&, const std::string& body,
                               httplib::Response& response) {
  if (OpenAiRoutes* routes = Ready(response)) routes->ApplyTemplate(body, response);
}

void HttpServer::DeleteSession(const httplib::Request& request, const std::string&,
                               httplib::Response& response) {
  OpenAiRoutes* routes = Ready(response);
  if (!routes) return;
  if (auto tenant = Authorize(request, response)) {
    routes->DeleteSession(request.matches[1].str(), *tenant, response);
  }
}

Status HttpServer::Bind() {
  if (options_.port < 0 || options_.port > 65535) {
    return Status::InvalidArgument("--port " + std::to_string(options_.port) +
                                   " is not in [0, 65535]");
  }
  auto port = server_.Bind(options_.host, options_.port);
  if (!port.ok()) return port.status();
  port_ = *port;
  return Status::Ok();
}

bool HttpServer::Run() { return server_.Serve(); }

void HttpServer::SetModel(ServedModel model) {
  routes_ = std::make_unique<OpenAiRoutes>(std::move(model), options_.routes, metrics_,
                                           in_flight_streams_);
  state_.store(State::kReady);
}

void HttpServer::BeginDrain() { state_.store(State::kDraining); }

bool HttpServer::WaitForStreams(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (in_flight_streams_.load() > 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

void HttpServer::Stop() { server_.Halt(); }

}  // namespace kvserve
