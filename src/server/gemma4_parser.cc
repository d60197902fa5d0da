#include "server/gemma4_parser.h"

#include <algorithm>
#include <initializer_list>

#include "server/gemma4_arguments.h"

namespace kvserve {

namespace {

constexpr std::string_view kWhitespace = " \t\n\r";
constexpr std::string_view kChannelOpen = "<|channel>";
constexpr std::string_view kChannelClose = "<channel|>";
constexpr std::string_view kThought = "thought";
constexpr std::string_view kCallOpen = "<|tool_call>";
constexpr std::string_view kCallClose = "<tool_call|>";
constexpr std::string_view kQuote = "<|\"|>";
constexpr std::string_view kCallPrefix = "call:";

// Where the call's <tool_call|> is in `text` (after <|tool_call>), skipping <|"|>-quoted strings;
// npos while it has not come.
size_t CallEnd(std::string_view text) {
  size_t pos = 0;
  while (true) {
    const size_t quote = text.find(kQuote, pos);
    const size_t close = text.find(kCallClose, pos);
    if (close < quote) return close;
    if (quote == std::string_view::npos) return std::string_view::npos;
    const size_t end_quote = text.find(kQuote, quote + kQuote.size());
    if (end_quote == std::string_view::npos) return std::string_view::npos;
    pos = end_quote + kQuote.size();
  }
}

// "call:NAME{ARGUMENTS}" as a call (id not set), or nullopt.
std::optional<ParsedToolCall> CallFromBody(std::string_view body) {
  if (!body.starts_with(kCallPrefix)) return std::nullopt;
  body.remove_prefix(kCallPrefix.size());
  const size_t brace = body.find('{');
  if (brace == 0 || brace == std::string_view::npos) return std::nullopt;
  const std::string_view name = body.substr(0, brace);
  if (name.find_first_of(" \t\n\r<>{}:,") != std::string_view::npos) return std::nullopt;
  auto arguments = Gemma4ArgumentsJson(body.substr(brace));
  if (!arguments) return std::nullopt;
  return ParsedToolCall{.name = std::string(name), .arguments = std::move(*arguments)};
}

}  // namespace

Gemma4Output Gemma4Parser::Push(std::string_view text) {
  Gemma4Output out;
  pending_.append(text);
  Drain(false, out);
  return out;
}

Gemma4Output Gemma4Parser::Finish() {
  Gemma4Output out;
  Drain(true, out);
  held_reasoning_.clear();                     // an unclosed block's trailing whitespace
  if (n_calls_ == 0) out.content += held_ws_;  // no calls: the whitespace was content after all
  held_ws_.clear();
  return out;
}

void Gemma4Parser::Drain(bool final, Gemma4Output& out) {
  bool more = true;
  while (more) {
    switch (state_) {
      case State::kText:
        more = DrainText(final, out);
        break;
      case State::kChannelName:
        more = DrainChannelName(final);
        break;
      case State::kThought:
        more = DrainThought(final, out);
        break;
      case State::kCall:
        more = DrainCall(final, out);
        break;
    }
  }
}

bool Gemma4Parser::DrainText(bool final, Gemma4Output& out) {
  if (skip_space_) {
    const size_t first = pending_.find_first_not_of(kWhitespace);
    pending_.erase(0, first == std::string::npos ? pending_.size() : first);
    if (pending_.empty()) return false;
    skip_space_ = false;
  }
  std::vector<std::string_view> markers;
  if (options_.split_reasoning) markers = {kChannelOpen, kChannelClose};
  if (options_.parse_calls) markers.push_back(kCallOpen);
  size_t at = std::string::npos;
  std::string_view found;
  for (std::string_view marker : markers) {
    const size_t pos = pending_.find(marker);
    if (pos < at) at = pos, found = marker;
  }
  if (at == std::string::npos) {
    size_t keep = 0;
    for (std::string_view marker : markers) {
      if (!final) keep = std::max(keep, PartialMarker(pending_, marker));
    }
    EmitContent(std::string_view(pending_).substr(0, pending_.size() - keep), out);
    pending_.erase(0, pending_.size() - keep);
    return false;
  }
  EmitContent(std::string_view(pending_).substr(0, at), out);
  pending_.erase(0, at + found.size());
  if (found == kChannelOpen) state_ = State::kChannelName;
  if (found == kCallOpen) state_ = State::kCall;
  return true;  // a stray <channel|> is dropped
}

bool Gemma4Parser::DrainChannelName(bool final) {
  if (pending_.starts_with(kThought)) {
    pending_.erase(0, kThought.size());
    state_ = State::kThought;
    reasoning_begun_ = false;
    return true;
  }
  if (!final && pending_.size() < kThought.size() && kThought.starts_with(pending_)) return false;
  state_ = State::kText;  // another channel's marker: dropped
  return true;
}

bool Gemma4Parser::DrainThought(bool final, Gemma4Output& out) {
  const size_t close = pending_.find(kChannelClose);
  const size_t take = close != std::string::npos ? close
                      : final                    ? pending_.size()
                              : pending_.size() - PartialMarker(pending_, kChannelClose);
  EmitReasoning(std::string_view(pending_).substr(0, take), out);
  if (close == std::string::npos) {
    pending_.erase(0, take);
    return false;
  }
  pending_.erase(0, close + kChannelClose.size());
  held_reasoning_.clear();
  state_ = State::kText;
  skip_space_ = true;
  return true;
}

bool Gemma4Parser::DrainCall(bool final, Gemma4Output& out) {
  const size_t end = CallEnd(pending_);
  if (end == std::string::npos) {
    if (!final) return false;
    EmitContent(std::string(kCallOpen) + pending_, out);  // never closed: it was text
    pending_.clear();
    state_ = State::kText;
    return false;
  }
  const std::string_view body = std::string_view(pending_).substr(0, end);
  if (auto call = CallFromBody(body)) {
    call->id = NewToolCallId(ToolFormat::kGemma4);
    out.calls.push_back(std::move(*call));
    ++n_calls_;
  } else {
    EmitContent(std::string(kCallOpen) + std::string(body) + std::string(kCallClose), out);
  }
  pending_.erase(0, end + kCallClose.size());
  state_ = State::kText;
  return true;
}

void Gemma4Parser::EmitContent(std::string_view text, Gemma4Output& out) {
  if (text.empty()) return;
  held_ws_.append(text);
  const size_t last = held_ws_.find_last_not_of(kWhitespace);
  if (last == std::string::npos) return;
  out.content.append(held_ws_, 0, last + 1);
  held_ws_.erase(0, last + 1);
}

void Gemma4Parser::EmitReasoning(std::string_view text, Gemma4Output& out) {
  std::string reasoning = held_reasoning_ + std::string(text);
  if (!reasoning_begun_) {
    const size_t first = reasoning.find_first_not_of(kWhitespace);
    reasoning.erase(0, first == std::string::npos ? reasoning.size() : first);
    reasoning_begun_ = !reasoning.empty();
  }
  const size_t last = reasoning.find_last_not_of(kWhitespace);
  const size_t keep = last == std::string::npos ? 0 : last + 1;
  out.reasoning.append(reasoning, 0, keep);
  held_reasoning_ = reasoning.substr(keep);
}

}  // namespace kvserve
