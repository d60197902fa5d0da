// The web UI's files (webui/ in the source tree), compiled into the binary: CMake's
// cmake/embed-webui.cmake writes them into the generated webui_assets.cc at build time.
#pragma once

#include <span>
#include <string_view>

namespace kvserve {

struct WebUiAsset {
  std::string_view name;          // file name under webui/, like "index.html"
  std::string_view content_type;  // from the extension
  std::string_view body;          // the file's bytes
};

// Every file of webui/, sorted by name; static storage.
std::span<const WebUiAsset> WebUiAssets();

}  // namespace kvserve
