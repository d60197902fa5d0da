// How `kvserve chat` shows a reply as it streams: as the model wrote it, or for a harmony template
// (gpt-oss) its channels parsed (server/chat_output.h): the analysis channel as reasoning (dim on
// a terminal; on the error stream otherwise, so a pipe gets only the answers) and the final
// channel as the reply, kept apart for the conversation's next turn.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

#include "server/chat_output.h"

namespace kvserve {

class ChatDisplay {
 public:
  // `out` and `err` are borrowed; `terminal`: out is a terminal (reasoning shown there, dim).
  ChatDisplay(bool harmony, FILE* out, FILE* err, bool terminal);

  // `text`: the next piece of the reply; `last`: the reply ended (text is ignored).
  void Show(std::string_view text, bool last);

  bool harmony() const { return harmony_; }
  // harmony: the final channel and the analysis shown so far.
  const std::string& content() const { return content_; }
  const std::string& reasoning() const { return reasoning_; }

 private:
  bool harmony_;
  FILE* out_;
  FILE* err_;
  bool terminal_;
  bool dim_ = false;  // the terminal shows dim text now (reasoning)
  ChatOutputParser parser_;
  std::string content_, reasoning_;
};

}  // namespace kvserve
