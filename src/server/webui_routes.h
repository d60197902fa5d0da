// The web UI of `kvserve serve` (off with --no-webui): the page and the KV map endpoints.
//
//   GET /                      the page (webui/index.html, compiled into the binary)
//   GET /webui/NAME            its other files
//   GET /v1/kv-map             one block-map snapshot (server/kv_map.h), JSON
//   GET /v1/kv-map/stream      Server-Sent Events: `event: kvmap` with a snapshot whenever it
//                              changed, at most one per ?interval_ms= (100 to 5000, default 250),
//                              and a `: keep-alive` comment every 2 s otherwise
//
// The page and its files are open (a browser cannot send a bearer token when it navigates; the
// page asks for the key and sends it on every API call); the map needs the key like the API and
// names only the caller's own requests and sessions. At most kMaxKvMapStreams streams are open
// at once (429 beyond): each holds an HTTP thread.
#pragma once

#include <httplib.h>

#include <functional>
#include <optional>
#include <string>

#include "engine/engine.h"

namespace kvserve {

inline constexpr int kMaxKvMapStreams = 8;

// What the routes need from HttpServer; each callback replies itself when it says no.
struct WebUiHooks {
  // The engine when the model is ready; nullptr after replying 503.
  std::function<Engine*(httplib::Response&)> ready;
  // The caller's tenant tag; nullopt after replying 401.
  std::function<std::optional<std::string>(const httplib::Request&, httplib::Response&)> authorize;
  // False once the server drains or stops: open streams end.
  std::function<bool()> serving;
};

// Paths that need no API key: the page and its files.
bool IsWebUiPagePath(const std::string& path);

// Registers the routes above on `server`; `hooks` are copied into the handlers.
void InstallWebUiRoutes(httplib::Server& server, WebUiHooks hooks);

}  // namespace kvserve
