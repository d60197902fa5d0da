#include "server/sse_relay.h"

#include <utility>

namespace kvserve {

void RelayStream(httplib::Response& from, httplib::Response& to, SseTranslator translate) {
  httplib::ContentProvider provider = std::move(from.content_provider_);
  to.status = 200;
  to.set_header("Cache-Control", "no-cache");
  to.set_chunked_content_provider(
      "text/event-stream",
      [translate = std::move(translate), provider](size_t offset, httplib::DataSink& sink) {
        httplib::DataSink inner;
        inner.write = [&](const char* data, size_t n) {
          const std::string events = translate(std::string_view(data, n));
          return events.empty() || sink.write(events.data(), events.size());
        };
        inner.done = [&] { sink.done(); };
        inner.is_writable = [&] { return sink.is_writable(); };
        return provider(offset, 0, inner);  // a chunked provider ignores the length
      },
      std::move(from.content_provider_resource_releaser_));
  // ~Response runs its releaser: `from`'s must not end the stream that `to` now owns.
  from.content_provider_resource_releaser_ = nullptr;
  from.content_provider_ = nullptr;
}

std::vector<std::string> TakeSseEvents(std::string& buffer, std::string_view piece) {
  buffer.append(piece);
  std::vector<std::string> events;
  size_t start = 0;
  for (size_t end = buffer.find("\n\n"); end != std::string::npos;
       end = buffer.find("\n\n", start)) {
    events.push_back(buffer.substr(start, end - start));
    start = end + 2;
  }
  buffer.erase(0, start);
  return events;
}

}  // namespace kvserve
