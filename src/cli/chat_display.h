// How `kvserve chat` shows a reply as it streams: as the model wrote it, or for a template whose
// output has channels, gpt-oss's harmony and Gemma 4's, parsed (server/chat_output.h): the
// reasoning (harmony's analysis channel, Gemma 4's thought blocks) dim on a terminal, on the
// error stream otherwise (so a pipe gets only the answers), and the answer as the reply, kept
// apart for the conversation's next turn.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

#include "server/chat_output.h"

namespace kvserve {

class ChatDisplay {
 public:
  // `format`: the template's (ChatTemplate::tool_format); kHarmony and kGemma4 are parsed, the
  // others shown as written. `out` and `err` are borrowed; `terminal`: out is a terminal
  // (reasoning shown there, dim).
  ChatDisplay(ToolFormat format, FILE* out, FILE* err, bool terminal);

  // `text`: the next piece of the reply; `last`: the reply ended (text is ignored).
  void Show(std::string_view text, bool last);

  bool parses() const { return parses_; }
  // When it parses: the answer and the reasoning shown so far.
  const std::string& content() const { return content_; }
  const std::string& reasoning() const { return reasoning_; }

 private:
  bool parses_;
  FILE* out_;
  FILE* err_;
  bool terminal_;
  bool dim_ = false;  // the terminal shows dim text now (reasoning)
  ChatOutputParser parser_;
  std::string content_, reasoning_;
};

}  // namespace kvserve
