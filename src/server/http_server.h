// The HTTP front of `kvserve serve`: cpp-httplib's server with our limits (body size, read and
// write timeouts, a fixed thread pool), API-key auth, readiness, and the routes. HTTP threads
// parse, enqueue and stream; the engine thread generates; neither blocks the other.
//
//   HttpServer server(options);
//   server.Bind();                     // port 0 picks a free port: server.port()
//   std::thread t([&] { server.Run(); });
//   server.SetModel(served_model);     // /health turns 200, the API opens
//   ...
//   server.BeginDrain();               // /health 503, new requests 503
//   engine->Drain(timeout); server.WaitForStreams(deadline); server.Stop(); t.join();
//
// Thread rules: Bind, SetModel, BeginDrain, Stop from the owner's thread; Run on one thread.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <regex>
#include <span>
#include <string>
#include <vector>

#include "server/api_error.h"
#include "server/auth.h"
#include "server/http_listener.h"
#include "server/metrics.h"
#include "server/openai_routes.h"
#include "server/step_watchdog.h"
#include "server/tenant_limiter.h"
#include "util/status.h"

namespace kvserve {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                   // 0 = any free port
  ApiKeys api_keys;                  // none: no auth
  bool metrics_auth = false;         // /metrics needs the key too
  size_t max_body_bytes = 4u << 20;  // larger bodies get 413
  int max_concurrent_per_key = 0;    // completions in flight per tenant; beyond it 429; 0 = any
  int threads = 32;                  // HTTP worker threads (one per request being answered)
  int max_connections = 512;         // open at once; beyond it 503 and closed
  int read_timeout_s = 10;           // a request must arrive within this from its first byte
  int write_timeout_s = 10;          // a client that reads nothing for this long is cut off
  int keep_alive_timeout_s = 5;      // an idle connection is closed after this
  std::string tls_cert_file;         // HTTPS when both are set (PEM)
  std::string tls_key_file;
  // /health says 503 "stuck" when the engine made no step for this long with work pending; 0 = off
  double watchdog_s = 30;
  std::string replica_name;  // non-empty: every response carries X-Kvserve-Replica
  RouteOptions routes;
  bool webui = true;  // the page at / and /v1/kv-map (server/webui_routes.h)
};

// Anthropic's Messages API route; its errors, 401s included, take Anthropic's error shape.
inline constexpr char kMessagesPath[] = "/v1/messages";

class HttpServer {
 public:
  enum class State { kLoading, kReady, kDraining };

  explicit HttpServer(HttpServerOptions options);
  ~HttpServer();

  // Binds the listening socket; port() is then known.
  Status Bind();
  // Serves until Stop(). Returns false if the listener failed.
  bool Run();
  // Serves the model; /health turns 200. `model` members are borrowed.
  void SetModel(ServedModel model);
  // /health and the API answer 503 from now on; requests already running continue.
  void BeginDrain();
  // Waits until no streamed response is being written, or `timeout` passed; true if none is.
  bool WaitForStreams(std::chrono::milliseconds timeout);
  // Closes the listener and ends Run() (after the connections being served finish).
  void Stop();

  int port() const { return port_; }
  State state() const { return state_.load(); }
  ServerMetrics& metrics() { return metrics_; }

 private:
  // Who may call a route: anyone, anyone unless --metrics-auth, or a holder of an API key.
  enum class Access { kOpen, kOpenUnlessMetricsAuth, kApiKey };
  // A route's handler: the request, its body (read within --max-body when the route reads one;
  // empty otherwise) and the response to fill.
  using Handler = void (HttpServer::*)(const httplib::Request&, const std::string& body,
                                       httplib::Response&);
  // One API route. RouteTable() is the one list of them: Install registers each, and the checks
  // before routing (auth, chunked bodies) read the same entries.
  struct Route {
    const char* method;  // "GET", "POST", "DELETE"
    const char* path;    // exact, or a pattern with ([^/]+) captures (httplib's syntax)
    bool reads_body;     // reads its body (chunked too) within --max-body; others refuse chunked
    Access access;
    Handler handler;
  };
  static std::span<const Route> RouteTable();
  // The table's entry for this method and path, or nullptr (a web UI route or no route).
  const Route* FindRoute(const std::string& method, const std::string& path) const;
  bool IsOpen(const httplib::Request& request) const;

  void Install();
  void InstallHooks();
  void InstallRoute(const Route& route);

  // The step watchdog's verdict for /health, /readyz and /livez: the 503 body when stuck.
  std::optional<nlohmann::json> StuckReport();

  // The routes' handlers (RouteTable).
  void Health(const httplib::Request&, const std::string&, httplib::Response& response);
  void Livez(const httplib::Request&, const std::string&, httplib::Response& response);
  void Metrics(const httplib::Request&, const std::string&, httplib::Response& response);
  void ListModels(const httplib::Request&, const std::string&, httplib::Response& response);
  void GetModel(const httplib::Request& request, const std::string&, httplib::Response& response);
  void TextCompletions(const httplib::Request& request, const std::string& body,
                       httplib::Response& response);
  void ChatCompletions(const httplib::Request& request, const std::string& body,
                       httplib::Response& response);
  void Completions(const httplib::Request& request, const std::string& body,
                   httplib::Response& response, CompletionKind kind);
  // POST /v1/messages (server/anthropic_messages.h).
  void Messages(const httplib::Request& request, const std::string& body,
                httplib::Response& response);
  // POST /v1/responses (server/responses_api.h), stateless.
  void Responses(const httplib::Request& request, const std::string& body,
                 httplib::Response& response);
  void Tokenize(const httplib::Request&, const std::string& body, httplib::Response& response);
  void Embeddings(const httplib::Request&, const std::string& body, httplib::Response& response);
  void Detokenize(const httplib::Request&, const std::string& body, httplib::Response& response);
  void ApplyTemplate(const httplib::Request&, const std::string& body, httplib::Response& response);
  void DeleteSession(const httplib::Request& request, const std::string&,
                     httplib::Response& response);
  // The caller's tenant tag, or nullopt after replying 401.
  std::optional<std::string> Authorize(const httplib::Request& request,
                                       httplib::Response& response) const;
  // Reads the body through `reader`, at most max_body_bytes of it (httplib limits only bodies
  // with a Content-Length; a chunked body could otherwise grow without end). False after replying
  // 413 or 400.
  bool ReadBody(const httplib::ContentReader& reader, std::string& body,
                httplib::Response& response) const;
  // The routes when ready, or nullptr after replying 503.
  OpenAiRoutes* Ready(httplib::Response& response);

  HttpServerOptions options_;
  HttpListener server_;  // httplib's routes over our sockets (idle and slow clients hold no thread)
  ServerMetrics metrics_;
  TenantLimiter limiter_;  // --max-concurrent-per-key
  StepWatchdog watchdog_;  // --watchdog-s, fed by /health
  std::atomic<int> in_flight_streams_{0};
  std::atomic<State> state_{State::kLoading};
  std::unique_ptr<OpenAiRoutes> routes_;    // set once by SetModel before state_ turns kReady
  std::vector<std::regex> route_patterns_;  // [RouteTable().size()], for FindRoute
  int port_ = -1;
};

}  // namespace kvserve
