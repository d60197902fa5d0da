// A rendered conversation: the template's text with a record of which bytes came from the
// messages themselves (their content and roles), so that encoding can read control tokens out of
// the template's markup but never out of what a user wrote.
//
//   ChatText out;
//   out += "<|im_start|>";                       // markup
//   out.AppendAll({"<|im_start|>", MessageText(m.role), "\n", MessageText(m.content)});
//   tokenizer.Encode(out.text(), false, out.message_ranges());
//
// A plain value; not thread-safe while being appended to.
#pragma once

#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/special_tokens.h"

namespace kvserve {

// Text that came from a message, to be appended to a ChatText as such.
struct MessageText {
  explicit MessageText(std::string_view message_text) : text(message_text) {}
  std::string_view text;
};

class ChatText {
 public:
  // One piece of AppendAll: markup (implicit from any string) or MessageText.
  struct Piece {
    Piece(std::string_view text) : text(text) {}    // NOLINT: implicit by design
    Piece(const char* text) : text(text) {}         // NOLINT
    Piece(const std::string& text) : text(text) {}  // NOLINT
    Piece(MessageText message) : text(message.text), from_message(true) {}  // NOLINT
    std::string_view text;
    bool from_message = false;
  };

  ChatText& operator+=(std::string_view markup);
  void AppendMessage(std::string_view message_text);
  void AppendAll(std::initializer_list<Piece> pieces) { AppendAll(std::span(pieces)); }
  void AppendAll(std::span<const Piece> pieces);

  const std::string& text() const { return text_; }
  // The bytes that came from messages: sorted, disjoint, adjacent pieces merged.
  const std::vector<TextRange>& message_ranges() const { return message_ranges_; }

 private:
  std::string text_;
  std::vector<TextRange> message_ranges_;
};

}  // namespace kvserve
