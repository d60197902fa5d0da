// `kvserve serve`: the OpenAI-compatible HTTP server over the serving engine. The listener comes
// up first (/health says 503 while the model loads); SIGTERM or SIGINT drains: /health turns 503,
// new requests get 503, running ones finish (up to --shutdown-timeout), then the process exits 0.
// /livez stays 200 through loading and draining; only a stuck engine (--watchdog-s) fails it.
#include <pthread.h>
#include <signal.h>

#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <ctime>
#include <thread>

#include "cli/chat_flags.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/model_options.h"
#include "cli/pooling_flag.h"
#include "engine/engine.h"
#include "server/http_server.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "util/crash_handler.h"

namespace kvserve {

FlagTable ServeFlagTable() {
  return {
      .usage = "serve -m MODEL [flags]",
      .groups = {
          {"server",
           {{.name = "--host",
             .value_name = "ADDR",
             .default_text = "127.0.0.1",
             .help = "address to listen on"},
            {.name = "--port",
             .value_name = "N",
             .default_text = "8080",
             .help = "port; 0 picks a free one, printed on stderr"},
            {.name = "--alias",
             .value_name = "NAME",
             .default_text = "the file name without .gguf",
             .help = "model id that clients pass as \"model\""},
            {.name = "--replica-name",
             .value_name = "NAME",
             .default_text = "the host name",
             .help = "sent as X-Kvserve-Replica on every response and as kvserve:replica_info"},
            {.name = "--api-key", .value_name = "KEY", .help = "require Authorization: Bearer KEY"},
            {.name = "--api-key-file",
             .value_name = "FILE",
             .help = "require one of the keys in FILE (one per line, # comments)"},
            {.name = "--metrics-auth", .help = "/metrics needs the key too"},
            {.name = "--no-webui", .help = "no web page at / and no KV map at /v1/kv-map"},
            {.name = "--ssl-cert",
             .value_name = "FILE",
             .help = "serve HTTPS with this PEM certificate (chain); needs --ssl-key"},
            {.name = "--ssl-key",
             .value_name = "FILE",
             .help = "the PEM private key of --ssl-cert"},
            {.name = "--max-queue",
             .value_name = "N",
             .default_text = "1024",
             .help = "requests waiting at most; beyond it 429"},
            {.name = "--request-timeout",
             .alias = "--timeout",
             .value_name = "SECONDS",
             .default_text = "0, none",
             .help = "a request running longer ends with finish_reason length"},
            {.name = "--max-prompt-tokens",
             .value_name = "N",
             .default_text = "0, the context",
             .help = "longer prompts get 400"},
            {.name = "--reasoning-format",
             .value_name = "none|deepseek",
             .default_text = "deepseek",
             .help = "deepseek: a thinking model's <think> block becomes reasoning_content; none: "
                     "it stays in the content"},
            {.name = "--reasoning-budget",
             .value_name = "N",
             .default_text = "-1, none",
             .help = "with --reasoning-format deepseek: after N tokens inside a <think> block "
                     "the server closes it (forces </think>) and the answer follows"},
            {.name = "--max-concurrent-per-key",
             .value_name = "N",
             .default_text = "0, no limit",
             .help = "requests in flight per API key (all clients when no keys); beyond it 429"},
            {.name = "--session-ttl",
             .value_name = "SECONDS",
             .default_text = "300",
             .help = "how long a session's blocks stay pinned after its last request"},
            {.name = "--max-body",
             .value_name = "SIZE",
             .default_text = "4MiB",
             .help = "larger request bodies get 413"},
            {.name = "--read-timeout",
             .value_name = "SECONDS",
             .default_text = "10",
             .help = "a request must arrive (head, and body) within this of its first byte; "
                     "then 408"},
            {.name = "--write-timeout",
             .value_name = "SECONDS",
             .default_text = "10",
             .help = "a client that reads nothing of its answer for this long is cut off"},
            {.name = "--max-connections",
             .value_name = "N",
             .default_text = "512",
             .help = "open connections at most; beyond it 503 (idle ones hold no thread)"},
            {.name = "--http-threads",
             .value_name = "N",
             .default_text = "0, max(16, 2 * --max-num-seqs + 8)",
             .help = "HTTP worker threads, one per open connection"},
            {.name = "--watchdog-s",
             .value_name = "SECONDS",
             .default_text = "30",
             .help = "/health, /readyz and /livez say 503 when the engine made no step for this "
                     "long with work pending; 0 = off"},
            ChatTemplateFlag(),
            {.name = "--shutdown-timeout",
             .value_name = "SECONDS",
             .default_text = "30",
             .help = "on SIGTERM/SIGINT, how long running requests may take to finish"}}},
          ModelFlags(),
          EngineFlags(kServeMaxStepMs, kServeMaxStepDecodes),
          KvDiskFlags(),
          ContextOverflowFlags(),
          SpecFlags(kServeSpec),
          PoolingFlag()}};
}

namespace {

Result<int> IntFlag(const Args& args, const std::string& flag, int fallback, int lo, int hi) {
  auto value = args.GetInt(flag, fallback);
  if (!value.ok()) return value.status();
  if (*value < lo || *value > hi) {
    return Result<int>::InvalidArgument("flag " + flag + ": " + std::to_string(*value) +
                                        " is not in [" + std::to_string(lo) + ", " +
                                        std::to_string(hi) + "]");
  }
  return static_cast<int>(*value);
}

Result<double> SecondsFlag(const Args& args, const std::string& flag, double fallback) {
  auto value = args.GetDouble(flag, fallback);
  if (!value.ok()) return value.status();
  if (!(*value >= 0) || *value > 1e7) {
    return Result<double>::InvalidArgument("flag " + flag + ": " + std::to_string(*value) +
                                           " seconds is out of range");
  }
  return *value;
}

// The host name (a pod's name under Kubernetes), or "kvserve" where it cannot be read.
std::string HostName() {
  char buffer[256] = {};
  if (gethostname(buffer, sizeof(buffer) - 1) != 0 || buffer[0] == '\0') return "kvserve";
  return buffer;
}

// A replica name goes into an HTTP header and a Prometheus label: 1..253 bytes of [A-Za-z0-9._:-].
Status CheckReplicaName(const std::string& name) {
  const bool ok_size = !name.empty() && name.size() <= 253;
  bool ok_chars = true;
  for (char c : name) {
    ok_chars = ok_chars && (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' ||
                            c == ':' || c == '-');
  }
  if (ok_size && ok_chars) return Status::Ok();
  return Status::InvalidArgument("flag --replica-name: '" + name +
                                 "' must be 1 to 253 characters of A-Z a-z 0-9 . _ : -");
}

struct ServeOptions {
  HttpServerOptions http;
  EngineOptions engine;
  std::string alias;
  std::string chat_template;
  double shutdown_timeout_s = 30;
};

Result<ServeOptions> ReadServeOptions(const Args& args, const ModelOptions& model) {
  ServeOptions o;
  auto engine = ReadEngineOptions(args, model, kServeMaxStepMs, kServeMaxStepDecodes, kServeSpec);
  if (!engine.ok()) return engine.status();
  o.engine = *engine;
  o.http.host = args.GetOr("--host", "127.0.0.1");
  auto port = IntFlag(args, "--port", 8080, 0, 65535);
  auto queue = IntFlag(args, "--max-queue", 1024, 1, 1 << 20);
  auto http_threads = IntFlag(args, "--http-threads", 0, 0, 4096);
  auto read_timeout = IntFlag(args, "--read-timeout", 10, 1, 3600);
  auto max_connections = IntFlag(args, "--max-connections", 512, 1, 1 << 16);
  auto write_timeout = IntFlag(args, "--write-timeout", 10, 1, 3600);
  auto max_prompt_tokens = IntFlag(args, "--max-prompt-tokens", 0, 0, 1 << 24);
  auto per_key = IntFlag(args, "--max-concurrent-per-key", 0, 0, 1 << 20);
  auto reasoning_budget = IntFlag(args, "--reasoning-budget", -1, -1, 1 << 24);
  auto request_timeout = SecondsFlag(args, "--request-timeout", 0);
  auto session_ttl = SecondsFlag(args, "--session-ttl", 300);
  auto shutdown = SecondsFlag(args, "--shutdown-timeout", 30);
  auto watchdog = SecondsFlag(args, "--watchdog-s", 30);
  for (const Status& s :
       {port.status(), queue.status(), http_threads.status(), read_timeout.status(),
        max_connections.status(), request_timeout.status(), session_ttl.status(), shutdown.status(),
        watchdog.status(), write_timeout.status(), max_prompt_tokens.status(), per_key.status(),
        reasoning_budget.status()}) {
    if (!s.ok()) return s;
  }
  o.http.port = *port;
  o.http.watchdog_s = *watchdog;
  o.http.read_timeout_s = *read_timeout;
  o.http.max_connections = *max_connections;
  o.http.write_timeout_s = *write_timeout;
  o.http.routes.max_prompt_tokens = *max_prompt_tokens;
  o.http.max_concurrent_per_key = *per_key;
  o.http.routes.request_timeout_s = *request_timeout;
  const std::string reasoning = args.GetOr("--reasoning-format", "deepseek");
  const auto reasoning_format = ReasoningFormatNamed(reasoning);
  if (!reasoning_format) {
    return Status::InvalidArgument("--reasoning-format must be none or deepseek, got '" +
                                   reasoning + "'");
  }
  o.http.routes.reasoning_format = *reasoning_format;
  if (*reasoning_budget == 0) {
    return Status::InvalidArgument("--reasoning-budget must be -1 (none) or at least 1, got 0");
  }
  o.http.routes.reasoning_budget = *reasoning_budget;
  o.http.metrics_auth = args.Has("--metrics-auth");
  o.http.replica_name = args.GetOr("--replica-name", HostName());
  if (Status s = CheckReplicaName(o.http.replica_name); !s.ok()) return s;
  o.http.webui = !args.Has("--no-webui");
  // One thread per open connection: room for every running and some waiting streams.
  o.http.threads = *http_threads > 0 ? *http_threads : std::max(16, 2 * o.engine.max_num_seqs + 8);
  o.http.max_body_bytes = 4u << 20;
  if (auto text = args.Get("--max-body")) {
    auto size = ParseSize("--max-body", *text);
    if (!size.ok()) return size.status();
    o.http.max_body_bytes = *size;
  }
  o.http.tls_cert_file = args.GetOr("--ssl-cert", "");
  o.http.tls_key_file = args.GetOr("--ssl-key", "");
  if (o.http.tls_cert_file.empty() != o.http.tls_key_file.empty()) {
    return Result<ServeOptions>::InvalidArgument("give --ssl-cert and --ssl-key together");
  }
  if (args.Has("--api-key") && args.Has("--api-key-file")) {
    return Result<ServeOptions>::InvalidArgument("give --api-key or --api-key-file, not both");
  }
  if (auto key = args.Get("--api-key")) {
    auto keys = ApiKeys::FromList({*key});
    if (!keys.ok())
      return Result<ServeOptions>::InvalidArgument("flag --api-key: " + keys.message());
    o.http.api_keys = std::move(keys).value();
  } else if (auto file = args.Get("--api-key-file")) {
    auto keys = ApiKeys::FromFile(*file);
    if (!keys.ok()) return keys.status();
    o.http.api_keys = std::move(keys).value();
  }
  o.engine.max_queue = *queue;
  o.engine.session_ttl_s = *session_ttl;
  o.alias = args.GetOr("--alias", "");
  o.chat_template = args.GetOr("--chat-template", "");
  o.shutdown_timeout_s = *shutdown;
  return o;
}

std::string ModelId(const std::string& path) {
  std::string name = path.substr(path.find_last_of('/') + 1);
  if (name.size() > 5 && name.substr(name.size() - 5) == ".gguf") name.resize(name.size() - 5);
  return name;
}

// Blocks SIGINT and SIGTERM in this thread and every thread started after (the main thread waits
// for them with sigwait) and ignores SIGPIPE (a client gone mid-write is an error return).
sigset_t BlockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return signals;
}

void PrintReady(const ServeOptions& options, const std::string& model_id, const Engine& engine,
                const ChatTemplate& chat, int port) {
  std::fprintf(stderr,
               "kvserve serve: ready: model '%s', context %d, %d KV blocks of %d tokens, chat "
               "template %s, %s, replica %s\n",
               model_id.c_str(), engine.n_ctx(), engine.Stats().blocks_total, engine.block_size(),
               std::string(chat.name()).c_str(),
               options.http.api_keys.enabled() ? "API key required" : "no API key",
               options.http.replica_name.c_str());
  if (options.http.webui) {
    std::fprintf(stderr, "kvserve serve: web UI at http://%s:%d/\n", options.http.host.c_str(),
                 port);
  }
}

// Waits for SIGINT or SIGTERM, then drains: the server refuses new work, the engine finishes its
// requests (up to the shutdown timeout), the streams write their last events, and both stop.
void ServeUntilSignal(const sigset_t& signals, double shutdown_timeout_s, HttpServer& server,
                      Engine& engine, std::thread& http_thread) {
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  std::fprintf(stderr, "kvserve serve: %s: draining (up to %.0f s)\n",
               signal_number == SIGTERM ? "SIGTERM" : "SIGINT", shutdown_timeout_s);
  server.BeginDrain();
  engine.Drain(std::chrono::milliseconds(static_cast<int64_t>(shutdown_timeout_s * 1000.0)));
  // The engine is done; give the HTTP threads a moment to write the last events.
  server.WaitForStreams(std::chrono::seconds(5));
  server.Stop();
  http_thread.join();
  std::fprintf(stderr, "kvserve serve: stopped\n");
}

}  // namespace

int RunServe(const std::vector<std::string>& argv) {
  auto fail = [](const std::string& message, int code) {
    std::fprintf(stderr, "kvserve serve: %s\n", message.c_str());
    return code;
  };
  auto args = Args::Parse(argv, ServeFlagTable());
  if (!args.ok()) return fail(args.message(), 2);
  auto model_options = ReadModelOptions(*args);
  if (!model_options.ok()) return fail(model_options.message(), 2);
  auto options = ReadServeOptions(*args, *model_options);
  if (!options.ok()) return fail(options.message(), 2);
  InstallCrashHandler("kvserve serve");  // a crash prints its stack to the log

  const sigset_t signals = BlockStopSignals();  // before any thread starts

  HttpServer server(options->http);
  if (Status bound = server.Bind(); !bound.ok()) return fail(bound.message(), 1);
  std::thread http_thread([&server] { server.Run(); });
  std::fprintf(stderr, "kvserve serve: listening on %s://%s:%d (loading %s)\n",
               options->http.tls_cert_file.empty() ? "http" : "https", options->http.host.c_str(),
               server.port(), model_options->model_path.c_str());
  auto stop_with = [&](const std::string& message) {
    server.Stop();
    http_thread.join();
    return fail(message, 1);
  };

  auto model = OpenModel(*model_options);
  if (!model.ok()) return stop_with(model.message());
  auto tokenizer = Tokenizer::FromGguf((*model)->file());
  if (!tokenizer.ok()) return stop_with(tokenizer.message());
  auto chat = ChatTemplate::ForModel((*model)->file(), **tokenizer, options->chat_template);
  if (!chat.ok()) return stop_with(chat.message());
  if (!chat->warning().empty())
    std::fprintf(stderr, "kvserve serve: %s\n", chat->warning().c_str());
  EngineOptions engine_options = options->engine;
  engine_options.n_ctx = model_options->n_ctx;  // as LoadModel resolved it
  auto draft = OpenDraftModel(*args, engine_options.spec);
  if (!draft.ok()) return stop_with(draft.message());
  auto engine = Engine::Create(**model, **tokenizer, engine_options);
  if (!engine.ok()) return stop_with(engine.message());
  auto pooling = ReadPooling(*args, **model);
  if (!pooling.ok()) return stop_with(pooling.message());
  // POST /v1/embeddings, beside the engine; a model without them answers why (Embedder).
  Embedder embedder(**model, engine_options.n_threads, engine_options.n_ctx,
                    engine_options.max_batched_tokens);

  const std::string model_id =
      options->alias.empty() ? ModelId(model_options->model_path) : options->alias;
  server.SetModel(ServedModel{.engine = engine->get(),
                              .tokenizer = tokenizer->get(),
                              .chat_template = &*chat,
                              .id = model_id,
                              .created = static_cast<int64_t>(std::time(nullptr)),
                              .embedder = &embedder,
                              .pooling = *pooling});
  PrintReady(*options, model_id, **engine, *chat, server.port());
  ServeUntilSignal(signals, options->shutdown_timeout_s, server, **engine, http_thread);
  return 0;
}

}  // namespace kvserve
