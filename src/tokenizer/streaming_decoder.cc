#include "tokenizer/streaming_decoder.h"

namespace kvserve {

StreamingDecoder::StreamingDecoder(const Tokenizer& tokenizer, Options options)
    : tokenizer_(&tokenizer),
      options_(options),
      strip_space_(options.at_text_start && tokenizer.add_space_prefix()) {}

std::string StreamingDecoder::Push(int32_t token) {
  std::string piece = tokenizer_->TokenPiece(token, options_.render_special);
  if (strip_space_ && !piece.empty()) {
    if (piece[0] == ' ') piece.erase(0, 1);
    strip_space_ = false;
  }
  return sanitizer_.Feed(piece);
}

std::string StreamingDecoder::Flush() {
  std::string rest = sanitizer_.Finish();
  strip_space_ = options_.at_text_start && tokenizer_->add_space_prefix();
  return rest;
}

}  // namespace kvserve
