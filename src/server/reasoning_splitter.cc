#include "server/reasoning_splitter.h"

#include <algorithm>

namespace kvserve {

namespace {

constexpr std::string_view kWhitespace = " \t\n\r";
constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

size_t PartialTag(std::string_view text, std::string_view tag) {
  for (size_t k = std::min(text.size(), tag.size() - 1); k > 0; --k) {
    if (text.substr(text.size() - k) == tag.substr(0, k)) return k;
  }
  return 0;
}

}  // namespace

ReasoningOutput ReasoningSplitter::Push(std::string_view text) {
  ReasoningOutput out;
  pending_.append(text);
  Drain(false, out);
  return out;
}

ReasoningOutput ReasoningSplitter::Finish() {
  ReasoningOutput out;
  Drain(true, out);
  held_ws_.clear();  // the reasoning's trailing whitespace
  return out;
}

void ReasoningSplitter::Drain(bool final, ReasoningOutput& out) {
  if (state_ == State::kStart) {
    const size_t start = pending_.find_first_not_of(kWhitespace);
    const std::string_view rest =
        start == std::string::npos ? std::string_view() : std::string_view(pending_).substr(start);
    if (!final && rest.size() < kOpen.size() && kOpen.substr(0, rest.size()) == rest) return;
    if (rest.substr(0, kOpen.size()) == kOpen) {
      pending_.erase(0, start + kOpen.size());
      state_ = State::kThinking;
    } else {
      state_ = starts_inside_ ? State::kThinking : State::kContent;
      content_begun_ = !starts_inside_;  // output without a block is kept as it is
    }
  }
  if (state_ == State::kThinking) {
    const size_t close = pending_.find(kClose);
    const size_t take = close != std::string::npos ? close
                        : final                    ? pending_.size()
                                                   : pending_.size() - PartialTag(pending_, kClose);
    std::string text = held_ws_ + pending_.substr(0, take);
    if (!reasoning_begun_) {
      const size_t first = text.find_first_not_of(kWhitespace);
      text.erase(0, first == std::string::npos ? text.size() : first);
      reasoning_begun_ = !text.empty();
    }
    const size_t last = text.find_last_not_of(kWhitespace);
    const size_t keep = last == std::string::npos ? 0 : last + 1;
    out.reasoning += text.substr(0, keep);
    held_ws_ = text.substr(keep);
    if (close == std::string::npos) {
      pending_.erase(0, take);
      return;
    }
    pending_.erase(0, close + kClose.size());
    held_ws_.clear();
    state_ = State::kContent;
  }
  if (!content_begun_) {
    const size_t first = pending_.find_first_not_of(kWhitespace);
    pending_.erase(0, first == std::string::npos ? pending_.size() : first);
    content_begun_ = !pending_.empty();
  }
  out.content += pending_;
  pending_.clear();
}

}  // namespace kvserve
