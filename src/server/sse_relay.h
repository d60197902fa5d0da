// Moves a streamed reply from one httplib::Response to another through a translator of its event
// text: how /v1/messages and /v1/responses turn the chat route's SSE stream into their own.
//
//   RelayStream(chat_reply, client_reply, [stream](std::string_view sse) {
//     return stream->Push(sse);  // chat events in, the API's events out
//   });
//
// The translator runs on the HTTP thread that writes the stream, one piece at a time.
#pragma once

#include <httplib.h>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace kvserve {

using SseTranslator = std::function<std::string(std::string_view)>;

// `from` must hold a chunked content provider (a stream); it and its resource releaser move to
// `to` (status 200, text/event-stream, Cache-Control no-cache), and `from` is left without them.
void RelayStream(httplib::Response& from, httplib::Response& to, SseTranslator translate);

// Appends `piece` (any bytes of an SSE stream) to `buffer` and moves out the events it completes:
// the text before each blank line, without it.
std::vector<std::string> TakeSseEvents(std::string& buffer, std::string_view piece);

}  // namespace kvserve
