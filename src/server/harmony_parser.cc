#include "server/harmony_parser.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>

#include "tokenizer/jinja_json.h"

namespace kvserve {
namespace {

constexpr std::string_view kStart = "<|start|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kTerminators[] = {"<|end|>", "<|return|>", "<|call|>", kStart};

// The first terminator in `text`: its position and text (npos when none).
std::pair<size_t, std::string_view> FindTerminator(std::string_view text) {
  std::pair<size_t, std::string_view> first{std::string_view::npos, {}};
  for (std::string_view terminator : kTerminators) {
    const size_t at = text.find(terminator);
    if (at < first.first) first = {at, terminator};
  }
  return first;
}

// How many bytes at the end of `text` may be the first bytes of one of `markers`.
size_t HeldSuffix(std::string_view text, std::span<const std::string_view> markers) {
  const size_t lt = text.rfind('<');
  if (lt == std::string_view::npos) return 0;
  const std::string_view tail = text.substr(lt);
  for (std::string_view marker : markers) {
    if (tail.size() < marker.size() && marker.starts_with(tail)) return tail.size();
  }
  return 0;
}

// Whether `text` starts the first message's header (the channel marker, or a recipient before it:
// " to=..."), or, while the header is not `complete` (no <|message|> yet), may still become one.
// A complete header shorter than every start is none: the answer must not depend on whether the
// rest of the text had arrived when this was asked.
bool CanStartFirstHeader(std::string_view text, bool complete) {
  for (std::string_view start : {kChannel, std::string_view(" to="), std::string_view("to=")}) {
    if (text.size() >= start.size() ? text.starts_with(start)
                                    : !complete && start.starts_with(text)) {
      return true;
    }
  }
  return false;
}

struct Header {
  std::string channel;
  std::string recipient;
};

// The channel and recipient of a header: the channel's name follows <|channel|>, the recipient
// "to=" at a word's start, before or after the channel; each ends at a space or a marker. A
// content type (" json", " <|constrain|>json") is ignored.
Header ParseHeader(std::string_view header) {
  auto word = [](std::string_view text) {
    return std::string(text.substr(0, text.find_first_of(" <")));
  };
  Header parsed;
  if (const size_t channel = header.find(kChannel); channel != std::string_view::npos) {
    parsed.channel = word(header.substr(channel + kChannel.size()));
  }
  for (size_t at = header.find("to="); at != std::string_view::npos;
       at = header.find("to=", at + 3)) {
    if (at == 0 || header[at - 1] == ' ') {
      parsed.recipient = word(header.substr(at + 3));
      break;
    }
  }
  return parsed;
}

// A call's arguments: the body as compact JSON when it is a JSON object, else nullopt.
std::optional<std::string> CallArguments(std::string_view body) {
  if (JsonNestingDepth(body) > kMaxJinjaJsonDepth) return std::nullopt;  // dumping recurses
  const nlohmann::ordered_json value =
      nlohmann::ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!value.is_object()) return std::nullopt;
  return value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace

HarmonyOutput HarmonyParser::Push(std::string_view text) {
  HarmonyOutput out;
  pending_ += text;
  Drain(/*final=*/false, out);
  return out;
}

HarmonyOutput HarmonyParser::Finish() {
  HarmonyOutput out;
  Drain(/*final=*/true, out);
  return out;
}

void HarmonyParser::Drain(bool final, HarmonyOutput& out) {
  bool progress = true;
  while (progress) {
    switch (state_) {
      case State::kHeader:
        progress = DrainHeader(final, out);
        break;
      case State::kBody:
        progress = DrainBody(final, out);
        break;
      case State::kBetween:
        progress = DrainBetween(final, out);
        break;
      case State::kPlain:
        out.content += pending_;
        pending_.clear();
        progress = false;
        break;
    }
  }
}

bool HarmonyParser::DrainHeader(bool final, HarmonyOutput& out) {
  const size_t message = pending_.find(kMessage);
  const std::string_view before = std::string_view(pending_).substr(0, message);
  const bool broken = FindTerminator(before).first != std::string_view::npos ||
                      before.size() > kMaxHeaderBytes ||
                      (first_ && !CanStartFirstHeader(before, message != std::string::npos));
  if (broken || (message == std::string::npos && final)) {
    ToPlain(first_ ? "" : kStart, out);
    return true;
  }
  if (message == std::string::npos) return false;
  const std::string header = pending_.substr(0, message);
  pending_.erase(0, message + kMessage.size());
  StartBody(header, out);
  return true;
}

void HarmonyParser::StartBody(std::string_view header, HarmonyOutput& out) {
  const Header parsed = ParseHeader(header);
  const std::string written =
      std::string(first_ ? "" : kStart) + std::string(header) + std::string(kMessage);
  first_ = false;
  state_ = State::kBody;
  if (parsed.recipient.starts_with("functions.") && options_.parse_calls) {
    kind_ = Kind::kCall;
    call_name_ = parsed.recipient.substr(10);
    call_body_.clear();
    raw_ = written;
  } else if (parsed.channel == "analysis") {
    kind_ = options_.split_reasoning ? Kind::kReasoning : Kind::kRawContent;
    if (kind_ == Kind::kRawContent) out.content += written;
  } else {
    kind_ = Kind::kContent;
  }
}

bool HarmonyParser::DrainBody(bool final, HarmonyOutput& out) {
  const auto [at, terminator] = FindTerminator(pending_);
  if (at == std::string::npos) {
    const size_t held = final ? 0 : HeldSuffix(pending_, kTerminators);
    EmitBody(std::string_view(pending_).substr(0, pending_.size() - held), out);
    pending_.erase(0, pending_.size() - held);
    if (final) EndBody("", out);
    return false;
  }
  EmitBody(std::string_view(pending_).substr(0, at), out);
  const std::string ended(terminator);
  // <|start|> opens the next message; it stays for DrainBetween.
  pending_.erase(0, at + (terminator == kStart ? 0 : terminator.size()));
  EndBody(terminator == kStart ? "" : ended, out);
  return true;
}

void HarmonyParser::EmitBody(std::string_view text, HarmonyOutput& out) {
  switch (kind_) {
    case Kind::kReasoning:
      out.reasoning += text;
      break;
    case Kind::kContent:
    case Kind::kRawContent:
      out.content += text;
      break;
    case Kind::kCall:
      call_body_ += text;
      raw_ += text;
      break;
  }
}

void HarmonyParser::EndBody(std::string_view terminator, HarmonyOutput& out) {
  state_ = State::kBetween;
  if (kind_ == Kind::kRawContent) out.content += terminator;
  if (kind_ != Kind::kCall) return;
  if (auto arguments = CallArguments(call_body_); arguments && !call_name_.empty()) {
    out.calls.push_back({.id = NewToolCallId(ToolFormat::kHarmony),
                         .name = call_name_,
                         .arguments = std::move(*arguments)});
    return;
  }
  raw_ += terminator;
  ToPlain(raw_, out);
}

bool HarmonyParser::DrainBetween(bool final, HarmonyOutput& out) {
  if (pending_.starts_with(kStart)) {
    pending_.erase(0, kStart.size());
    state_ = State::kHeader;
    return true;
  }
  if (pending_.empty() || (!final && kStart.starts_with(pending_))) return false;
  ToPlain("", out);
  return true;
}

void HarmonyParser::ToPlain(std::string_view text, HarmonyOutput& out) {
  out.content += text;
  state_ = State::kPlain;
}

}  // namespace kvserve
