#include "cli/chat_display.h"

namespace kvserve {

ChatDisplay::ChatDisplay(ToolFormat format, FILE* out, FILE* err, bool terminal)
    : parses_(format == ToolFormat::kHarmony || format == ToolFormat::kGemma4),
      out_(out),
      err_(err),
      terminal_(terminal),
      parser_(ChatOutputOptions{.split_reasoning = true,
                                .harmony = format == ToolFormat::kHarmony,
                                .gemma4 = format == ToolFormat::kGemma4}) {}

void ChatDisplay::Show(std::string_view text, bool last) {
  if (!parses_) {
    std::fwrite(text.data(), 1, text.size(), out_);
    std::fflush(out_);
    return;
  }
  const ChatOutputDelta d = last ? parser_.Finish() : parser_.Push(text);
  if (!d.reasoning.empty()) {
    if (terminal_ && !dim_) std::fputs("\033[2m", out_);  // dim until the answer
    dim_ = terminal_;
    reasoning_ += d.reasoning;
    std::fputs(d.reasoning.c_str(), terminal_ ? out_ : err_);
  }
  if (dim_ && (!d.content.empty() || last)) {
    std::fputs("\033[0m", out_);
    dim_ = false;
  }
  if (!d.content.empty()) {
    // A line break between what the model thought and its answer.
    if (content_.empty() && !reasoning_.empty()) std::fputc('\n', terminal_ ? out_ : err_);
    content_ += d.content;
    std::fputs(d.content.c_str(), out_);
  }
  std::fflush(out_);
}

}  // namespace kvserve
