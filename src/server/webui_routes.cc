#include "server/webui_routes.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "engine/block_map.h"
#include "server/api_error.h"
#include "server/kv_map.h"
#include "server/openai_routes.h"
#include "server/webui_assets.h"

namespace kvserve {

namespace {

constexpr auto kSnapshotWait = std::chrono::seconds(5);  // one engine step at most, in practice
constexpr double kKeepAliveSeconds = 2.0;
constexpr int kMinIntervalMs = 100;
constexpr int kMaxIntervalMs = 5000;
constexpr int kDefaultIntervalMs = 250;

// Scripts, styles and connections only from this origin: model output that slipped past the
// page's renderer still could not run or load anything.
constexpr const char* kContentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const WebUiAsset* FindAsset(std::string_view name) {
  for (const WebUiAsset& asset : WebUiAssets()) {
    if (asset.name == name) return &asset;
  }
  return nullptr;
}

void ReplyAsset(std::string_view name, httplib::Response& response) {
  const WebUiAsset* asset = FindAsset(name);
  if (asset == nullptr) {
    ReplyError(response, ApiError::NotFound("no web UI file '" + std::string(name) + "'"));
    return;
  }
  response.status = 200;
  response.set_header("Content-Security-Policy", kContentSecurityPolicy);
  response.set_header("X-Content-Type-Options", "nosniff");
  response.set_header("Referrer-Policy", "no-referrer");
  response.set_header("Cache-Control", "no-cache");
  response.set_content(std::string(asset->body), std::string(asset->content_type));
}

// ?interval_ms=N, or nullopt after replying 400.
std::optional<int> ReadInterval(const httplib::Request& request, httplib::Response& response) {
  if (!request.has_param("interval_ms")) return kDefaultIntervalMs;
  const std::string text = request.get_param_value("interval_ms");
  int value = 0;
  const bool digits =
      !text.empty() && text.size() <= 6 &&
      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (digits) value = std::stoi(text);
  if (!digits || value < kMinIntervalMs || value > kMaxIntervalMs) {
    ReplyError(response,
               ApiError::BadRequest("interval_ms '" + text + "' is not a whole number in [" +
                                        std::to_string(kMinIntervalMs) + ", " +
                                        std::to_string(kMaxIntervalMs) + "]",
                                    "interval_ms"));
    return std::nullopt;
  }
  return value;
}

// One open map stream, shared with httplib's content provider.
struct MapStream {
  Engine* engine = nullptr;
  std::string tenant;
  std::chrono::milliseconds interval{kDefaultIntervalMs};
  std::function<bool()> serving;
  std::string last;  // the last snapshot sent, to skip unchanged ones
  std::chrono::steady_clock::time_point last_write = std::chrono::steady_clock::now();
  bool first = true;
};

// Writes the next snapshot (or a keep-alive); false when the stream should end.
bool PumpMap(MapStream& stream, httplib::DataSink& sink) {
  if (!stream.first) std::this_thread::sleep_for(stream.interval);
  stream.first = false;
  if (!stream.serving()) return false;
  auto write = [&](const std::string& text) {
    stream.last_write = std::chrono::steady_clock::now();
    return sink.write(text.data(), text.size());
  };
  std::shared_ptr<const BlockMap> map = stream.engine->SnapshotBlocks(kSnapshotWait);
  if (map != nullptr) {
    std::string json = DumpJson(KvMapJson(*map, stream.tenant));
    if (json != stream.last) {
      const bool ok = write("event: kvmap\ndata: " + json + "\n\n");
      stream.last = std::move(json);
      return ok;
    }
  }
  const double idle =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - stream.last_write).count();
  if (idle >= kKeepAliveSeconds) return write(": keep-alive\n\n");
  return true;
}

}  // namespace

bool IsWebUiPagePath(const std::string& path) {
  return path == "/" || path == "/index.html" || path.rfind("/webui/", 0) == 0;
}

void InstallWebUiRoutes(httplib::Server& server, WebUiHooks hooks) {
  auto shared = std::make_shared<WebUiHooks>(std::move(hooks));
  auto open_streams = std::make_shared<std::atomic<int>>(0);
  server.Get("/", [](const httplib::Request&, httplib::Response& response) {
    ReplyAsset("index.html", response);
  });
  server.Get("/index.html", [](const httplib::Request&, httplib::Response& response) {
    ReplyAsset("index.html", response);
  });
  server.Get(R"(/webui/([A-Za-z0-9_.-]+))",
             [](const httplib::Request& request, httplib::Response& response) {
               ReplyAsset(request.matches[1].str(), response);
             });
  server.Get("/v1/kv-map", [shared](const httplib::Request& request, httplib::Response& response) {
    Engine* engine = shared->ready(response);
    if (engine == nullptr) return;
    auto tenant = shared->authorize(request, response);
    if (!tenant) return;
    if (!engine->generates()) {
      ReplyError(response, ApiError::NotFound("an encoder-only model keeps no KV cache to map"));
      return;
    }
    std::shared_ptr<const BlockMap> map = engine->SnapshotBlocks(kSnapshotWait);
    if (map == nullptr) {
      ReplyError(response, ApiError::Unavailable("the engine did not answer in time"));
      return;
    }
    response.set_header("Cache-Control", "no-store");
    ReplyJson(response, 200, KvMapJson(*map, *tenant));
  });
  server.Get("/v1/kv-map/stream", [shared, open_streams](const httplib::Request& request,
                                                         httplib::Response& response) {
    Engine* engine = shared->ready(response);
    if (engine == nullptr) return;
    auto tenant = shared->authorize(request, response);
    if (!tenant) return;
    if (!engine->generates()) {
      ReplyError(response, ApiError::NotFound("an encoder-only model keeps no KV cache to map"));
      return;
    }
    auto interval = ReadInterval(request, response);
    if (!interval) return;
    if (open_streams->fetch_add(1) >= kMaxKvMapStreams) {
      open_streams->fetch_sub(1);
      ReplyError(response, ApiError::TooManyRequests("too many open KV map streams (at most " +
                                                         std::to_string(kMaxKvMapStreams) + ")",
                                                     5));
      return;
    }
    auto stream = std::make_shared<MapStream>();
    stream->engine = engine;
    stream->tenant = *tenant;
    stream->interval = std::chrono::milliseconds(*interval);
    stream->serving = shared->serving;
    response.status = 200;
    response.set_header("Cache-Control", "no-store");
    response.set_chunked_content_provider(
        "text/event-stream",
        [stream](size_t /*offset*/, httplib::DataSink& sink) { return PumpMap(*stream, sink); },
        [open_streams](bool /*success*/) { open_streams->fetch_sub(1); });
  });
}

}  // namespace kvserve
