#include "server/http_server.h"

#include <algorithm>
#include <thread>

#include "server/webui_routes.h"

namespace kvserve {

namespace {

bool IsOpenPath(const std::string& path, bool metrics_auth, bool webui) {
  return path == "/health" || (!metrics_auth && path == "/metrics") ||
         (webui && IsWebUiPagePath(path));
}

// Routes that read their body through ReadBody (and so within --max-body even when chunked).
bool ReadsBodyWithLimit(const httplib::Request& request) {
  return request.method == "POST" &&
         (request.path == "/v1/completions" || request.path == "/v1/chat/completions" ||
          request.path == "/tokenize" || request.path == "/detokenize" ||
          request.path == "/apply-template");
}

}  // namespace

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
  Install();
}

HttpServer::~HttpServer() { Stop(); }

std::optional<std::string> HttpServer::Authorize(const httplib::Request& request,
                                                 httplib::Response& response) const {
  auto tenant = options_.api_keys.Check(request.get_header_value("Authorization"));
  if (!tenant) {
    const bool sent = request.has_header("Authorization");
    ReplyError(response,
               ApiError::Unauthorized(sent ? "invalid API key in the Authorization header"
                                           : "missing API key: send 'Authorization: Bearer KEY'"));
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

  server_.set_pre_routing_handler(
      [this](const httplib::Request& request, httplib::Response& response) {
        // httplib would read a chunked body of any size for the other routes: refuse it unread.
        if (!ReadsBodyWithLimit(request) &&
            request.get_header_value("Transfer-Encoding").find("chunked") != std::string::npos) {
          ReplyError(response,
                     ApiError::BadRequest("a chunked request body is accepted only by the POST "
                                          "API routes, not by " +
                                          request.method + " " + request.path));
          return httplib::Server::HandlerResponse::Handled;
        }
        if (IsOpenPath(request.path, options_.metrics_auth, options_.webui)) {
          return httplib::Server::HandlerResponse::Unhandled;
        }
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

  server_.Get("/health", [this](const httplib::Request&, httplib::Response& response) {
    switch (state_.load()) {
      case State::kReady: {
        Engine* engine = routes_->model().engine;
        const EngineStats stats = engine ? engine->Stats() : EngineStats{};
        const StepWatchdog::Verdict verdict = watchdog_.Observe(
            stats.steps, stats.running + stats.waiting > 0, StepWatchdog::Clock::now());
        if (verdict.stuck) {
          return ReplyJson(response, 503,
                           {{"status", "stuck"},
                            {"stalled_s", verdict.stalled_s},
                            {"running", stats.running},
                            {"waiting", stats.waiting}});
        }
        return ReplyJson(response, 200, {{"status", "ok"}});
      }
      case State::kLoading:
        return ReplyJson(response, 503, {{"status", "loading"}});
      case State::kDraining:
        return ReplyJson(response, 503, {{"status", "draining"}});
    }
  });
  server_.Get("/metrics", [this](const httplib::Request&, httplib::Response& response) {
    EngineStats stats;
    if (state_.load() != State::kLoading && routes_) stats = routes_->model().engine->Stats();
    response.set_content(metrics_.Render(stats), "text/plain; version=0.0.4; charset=utf-8");
  });
  server_.Get("/v1/models", [this](const httplib::Request&, httplib::Response& response) {
    if (OpenAiRoutes* routes = Ready(response)) routes->Models(response);
  });
  server_.Get(R"(/v1/models/([^/]+))",
              [this](const httplib::Request& request, httplib::Response& response) {
                if (OpenAiRoutes* routes = Ready(response)) {
                  routes->Model(request.matches[1].str(), response);
                }
              });
  auto completions = [this](CompletionKind kind) {
    return [this, kind](const httplib::Request& request, httplib::Response& response,
                        const httplib::ContentReader& reader) {
      std::string body;
      if (!ReadBody(reader, body, response)) return;
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
    };
  };
  server_.Post("/v1/completions", completions(CompletionKind::kText));
  server_.Post("/v1/chat/completions", completions(CompletionKind::kChat));
  server_.Post("/tokenize", [this](const httplib::Request&, httplib::Response& response,
                                   const httplib::ContentReader& reader) {
    std::string body;
    if (!ReadBody(reader, body, response)) return;
    if (OpenAiRoutes* routes = Ready(response)) routes->Tokenize(body, response);
  });
  server_.Post("/detokenize", [this](const httplib::Request&, httplib::Response& response,
                                     const httplib::ContentReader& reader) {
    std::string body;
    if (!ReadBody(reader, body, response)) return;
    if (OpenAiRoutes* routes = Ready(response)) routes->Detokenize(body, response);
  });
  server_.Post("/apply-template", [this](const httplib::Request&, httplib::Response& response,
                                         const httplib::ContentReader& reader) {
    std::string body;
    if (!ReadBody(reader, body, response)) return;
    if (OpenAiRoutes* routes = Ready(response)) routes->ApplyTemplate(body, response);
  });
  server_.Delete(R"(/v1/sessions/([^/]+))",
                 [this](const httplib::Request& request, httplib::Response& response) {
                   OpenAiRoutes* routes = Ready(response);
                   if (!routes) return;
                   if (auto tenant = Authorize(request, response)) {
                     routes->DeleteSession(request.matches[1].str(), *tenant, response);
                   }
                 });
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
