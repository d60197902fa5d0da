#include "tokenizer/chat_text.h"

namespace kvserve {

ChatText& ChatText::operator+=(std::string_view markup) {
  text_.append(markup);
  return *this;
}

void ChatText::AppendMessage(std::string_view message_text) {
  if (message_text.empty()) return;
  const size_t begin = text_.size();
  text_.append(message_text);
  if (!message_ranges_.empty()) {
    TextRange& last = message_ranges_.back();
    if (last.begin + last.length == begin) {
      last.length += message_text.size();
      return;
    }
  }
  message_ranges_.push_back(TextRange{begin, message_text.size()});
}

void ChatText::AppendAll(std::span<const Piece> pieces) {
  for (const Piece& piece : pieces) {
    if (piece.from_message) {
      AppendMessage(piece.text);
    } else {
      text_.append(piece.text);
    }
  }
}

}  // namespace kvserve
