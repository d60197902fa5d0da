#include "tokenizer/chat_template.h"

#include <algorithm>
#include <ctime>
#include <iterator>
#include <optional>

#include "tokenizer/jinja_strings.h"
#include "tokenizer/tool_prompt.h"

namespace kvserve {

namespace {

using jinja::Contains;
using jinja::kWhitespace;
using jinja::LStripNewlines;
using jinja::ReplaceAll;
using jinja::RStrip;
using jinja::StartsWith;
using jinja::Strip;

// Reads the quoted Jinja string literal starting at source[pos] (a ' or "), undoing the escapes
// \n \t \r \\ \' \". Sets `end` to the index after the closing quote. Unterminated: nullopt.
std::optional<std::string> ReadLiteral(std::string_view source, size_t pos, size_t& end) {
  const char quote = source[pos];
  std::string text;
  for (size_t i = pos + 1; i < source.size(); ++i) {
    const char c = source[i];
    if (c == quote) {
      end = i + 1;
      return text;
    }
    if (c != '\\' || i + 1 == source.size()) {
      text += c;
      continue;
    }
    const char next = source[++i];
    switch (next) {
      case 'n':
        text += '\n';
        break;
      case 't':
        text += '\t';
        break;
      case 'r':
        text += '\r';
        break;
      case '\\':
      case '\'':
      case '"':
        text += next;
        break;
      default:
        text += '\\';
        text += next;
        break;
    }
  }
  return std::nullopt;
}

// The string literals inside the {{ }} and {% %} tags of a template, in order (comments and the
// text between tags are skipped).
std::vector<std::string> StringLiterals(std::string_view source) {
  std::vector<std::string> literals;
  size_t i = 0;
  while (i + 1 < source.size()) {
    const size_t open = source.find('{', i);
    if (open == std::string_view::npos || open + 1 >= source.size()) break;
    const char kind = source[open + 1];
    if (kind == '#') {
      const size_t close = source.find("#}", open + 2);
      if (close == std::string_view::npos) break;
      i = close + 2;
      continue;
    }
    if (kind != '{' && kind != '%') {
      i = open + 1;
      continue;
    }
    const char closing = kind == '{' ? '}' : '%';
    size_t j = open + 2;
    while (j + 1 < source.size() && !(source[j] == closing && source[j + 1] == '}')) {
      if (source[j] == '\'' || source[j] == '"') {
        size_t end = 0;
        auto literal = ReadLiteral(source, j, end);
        if (!literal) return literals;
        literals.push_back(std::move(*literal));
        j = end;
      } else {
        ++j;
      }
    }
    i = j + 2;
  }
  return literals;
}

const std::string* FindLiteralStartingWith(const std::vector<std::string>& literals,
                                           std::string_view prefix) {
  for (const std::string& literal : literals) {
    if (StartsWith(literal, prefix)) return &literal;
  }
  return nullptr;
}

// The literal assigned after `marker` in the source ("date_string = " -> "26 Jul 2024").
std::optional<std::string> LiteralAfter(std::string_view source, std::string_view marker) {
  const size_t at = source.find(marker);
  if (at == std::string_view::npos) return std::nullopt;
  const size_t quote = source.find_first_of("'\"", at + marker.size());
  if (quote == std::string_view::npos || quote != at + marker.size()) return std::nullopt;
  size_t end = 0;
  return ReadLiteral(source, quote, end);
}

using Piece = ChatText::Piece;

// `pieces` as Strip() of their concatenation: the whitespace at its start and end removed, each
// piece keeping its kind (markup or message text).
std::vector<Piece> StripPieces(std::initializer_list<Piece> pieces) {
  std::vector<Piece> out(pieces);
  for (size_t i = 0; i < out.size(); ++i) {  // leading: through pieces that are all whitespace
    const size_t first = out[i].text.find_first_not_of(kWhitespace);
    out[i].text.remove_prefix(first == std::string_view::npos ? out[i].text.size() : first);
    if (!out[i].text.empty()) break;
  }
  for (size_t i = out.size(); i-- > 0;) {
    out[i].text = RStrip(out[i].text);
    if (!out[i].text.empty()) break;
  }
  return out;
}

}  // namespace

ChatTemplate::ChatTemplate(ChatFamily family) : family_(family) {
  switch (family) {
    case ChatFamily::kPlain:
      break;
    case ChatFamily::kChatMl:
      bos_text_ = "<s>";
      eos_text_ = "<|im_end|>";
      break;
    case ChatFamily::kLlama2:
    case ChatFamily::kZephyr:
    case ChatFamily::kMistral:
      bos_text_ = "<s>";
      eos_text_ = "</s>";
      break;
    case ChatFamily::kLlama3:
      bos_text_ = "<|begin_of_text|>";
      eos_text_ = "<|eot_id|>";
      break;
    case ChatFamily::kGemma:
      bos_text_ = "<bos>";
      eos_text_ = "<eos>";
      break;
    case ChatFamily::kPhi3:
      bos_text_ = "<s>";
      eos_text_ = "<|endoftext|>";
      break;
    case ChatFamily::kDeepSeekR1:
      bos_text_ = "<｜begin▁of▁sentence｜>";
      eos_text_ = "<｜end▁of▁sentence｜>";
      break;
    case ChatFamily::kGranite:
      bos_text_ = "<|end_of_text|>";
      eos_text_ = "<|end_of_text|>";
      break;
    case ChatFamily::kHarmony:
      bos_text_ = "<|startoftext|>";
      eos_text_ = "<|return|>";
      date_from_clock_ = true;
      model_identity_ = "You are ChatGPT, a large language model trained by OpenAI.";
      cutoff_ = "Knowledge cutoff: 2024-06\n";
      break;
    case ChatFamily::kGemma4:
      bos_text_ = "<bos>";
      eos_text_ = "<eos>";
      break;
  }
  renders_bos_ = family == ChatFamily::kLlama2 || family == ChatFamily::kLlama3 ||
                 family == ChatFamily::kMistral || family == ChatFamily::kGemma ||
                 family == ChatFamily::kDeepSeekR1 || family == ChatFamily::kGemma4;
}

Result<ChatTemplate> ChatTemplate::Detect(std::string_view source) {
  auto detected = DetectFamily(source);
  if (detected.ok()) detected->knows_think_ = Contains(source, "</think>");
  return detected;
}

// ChatML's variants: Hermes tools, Qwen 3.5's and Qwen3-Coder's XML calls, SmolLM3's reasoning
// modes and Qwen's default system message, read from the source.
ChatTemplate ChatTemplate::DetectChatMl(std::string_view source,
                                        const std::vector<std::string>& literals, bool asks_bos) {
  ChatTemplate t(ChatFamily::kChatMl);
  t.renders_bos_ = asks_bos;
  t.hermes_tools_ = Contains(source, "<tool_call>") && !Contains(source, "<function=");
  t.hermes3_ = Contains(source, "You are a function calling AI model");
  if (Contains(source, "<function=")) {
    // Qwen3-Coder lists tools as XML (its render_extra_keys macro); Qwen 3.5 as JSON, with
    // <think> blocks after the last user query.
    t.qwen3_coder_ = Contains(source, "render_extra_keys");
    t.qwen35_ = !t.qwen3_coder_ && Contains(source, "last_query_index") &&
                Contains(source, "tool | tojson");
    if (t.qwen35_ || t.qwen3_coder_) return t;
    t.unsupported_tools_ = "chatml (XML <function=...> calls)";
  }
  if (Contains(source, "Reasoning Mode")) {
    // SmolLM3: the two default instructions are the first long literals after the header.
    const std::string* cutoff = FindLiteralStartingWith(literals, "Knowledge Cutoff Date:");
    std::vector<const std::string*> defaults;
    bool after_header = false;
    for (const std::string& literal : literals) {
      if (literal == "## Custom Instructions\n\n") after_header = true;
      if (after_header && literal.size() > 40 && defaults.size() < 2) defaults.push_back(&literal);
    }
    if (cutoff != nullptr && defaults.size() == 2) {
      t.smollm3_ = true;
      t.cutoff_line_ = *cutoff;
      t.think_instructions_ = *defaults[0];
      t.no_think_instructions_ = *defaults[1];
      return t;
    }
    t.warning_ =
        "chat template: a SmolLM3-style template without its usual defaults; using "
        "plain ChatML";
    return t;
  }
  // Qwen: '<|im_start|>system\nDEFAULT<|im_end|>\n' when the conversation has no system turn.
  constexpr std::string_view kSystemStart = "<|im_start|>system\n";
  for (const std::string& literal : literals) {
    if (!StartsWith(literal, kSystemStart)) continue;
    const size_t end = literal.find("<|im_end|>");
    if (end != std::string::npos && end > kSystemStart.size()) {
      t.default_system_ = literal.substr(kSystemStart.size(), end - kSystemStart.size());
      break;
    }
  }
  return t;
}

Result<ChatTemplate> ChatTemplate::DetectFamily(std::string_view source) {
  if (source.size() > kMaxSourceBytes) {
    return Result<ChatTemplate>::InvalidArgument("chat template: " + std::to_string(source.size()) +
                                                 " bytes exceeds the limit of " +
                                                 std::to_string(kMaxSourceBytes));
  }
  if (Strip(source).empty()) return ChatTemplate(ChatFamily::kPlain);
  const std::vector<std::string> literals = StringLiterals(source);
  if (Contains(source, "<|channel|>") && Contains(source, "<|start|>")) {
    // gpt-oss (harmony): the identity and cutoff lines as this source writes them.
    ChatTemplate t(ChatFamily::kHarmony);
    if (auto identity = LiteralAfter(source, "set model_identity = "))
      t.model_identity_ = *identity;
    if (const std::string* cutoff = FindLiteralStartingWith(literals, "Knowledge cutoff:")) {
      t.cutoff_ = *cutoff;
    }
    return t;
  }
  // Gemma 4: its turn markers and its call syntax (Gemma 2/3's <start_of_turn> is not in it).
  if (Contains(source, "<|turn>") && Contains(source, "<|tool_call>call:")) {
    return ChatTemplate(ChatFamily::kGemma4);
  }
  // Families without BOS in their usual form render it when the source asks for bos_token.
  const bool asks_bos = Contains(source, "bos_token");

  if (Contains(source, "<|im_start|>")) return DetectChatMl(source, literals, asks_bos);
  if (Contains(source, "<|start_header_id|>")) {
    ChatTemplate t(ChatFamily::kLlama3);
    if (const std::string* line = FindLiteralStartingWith(literals, "Cutting Knowledge Date:")) {
      t.knowledge_line_ = *line;
      t.date_ = LiteralAfter(source, "set date_string = ").value_or("26 Jul 2024");
      t.date_from_clock_ = Contains(source, "strftime_now");
    }
    return t;
  }
  if (Contains(source, "<start_of_turn>")) return ChatTemplate(ChatFamily::kGemma);
  if (Contains(source, "<｜User｜>")) return ChatTemplate(ChatFamily::kDeepSeekR1);
  if (Contains(source, "<|start_of_role|>")) return ChatTemplate(ChatFamily::kGranite);
  if (Contains(source, "[INST]")) {
    ChatTemplate t(Contains(source, "<<SYS>>") ? ChatFamily::kLlama2 : ChatFamily::kMistral);
    if (Contains(source, "[ARGS]")) t.unsupported_tools_ = "mistral ([TOOL_CALLS]name[ARGS])";
    return t;
  }
  if (Contains(source, "<|user|>")) {
    ChatTemplate t(Contains(source, "<|end|>") ? ChatFamily::kPhi3 : ChatFamily::kZephyr);
    t.renders_bos_ = asks_bos;
    return t;
  }
  ChatTemplate t(ChatFamily::kChatMl);
  t.warning_ =
      "chat template: unknown format (none of the known markers <|im_start|>, "
      "<|start_header_id|>, [INST], <start_of_turn>, <|user|>); using ChatML";
  return t;
}

Result<ChatTemplate> ChatTemplate::ByName(std::string_view name) {
  static constexpr ChatFamily kFamilies[] = {
      ChatFamily::kChatMl,  ChatFamily::kLlama2, ChatFamily::kLlama3, ChatFamily::kZephyr,
      ChatFamily::kMistral, ChatFamily::kGemma,  ChatFamily::kPhi3,   ChatFamily::kDeepSeekR1,
      ChatFamily::kGranite, ChatFamily::kPlain,  ChatFamily::kChatMl, ChatFamily::kChatMl,
      ChatFamily::kHarmony, ChatFamily::kGemma4};
  static_assert(std::size(kFamilies) == std::size(kNames));
  for (size_t i = 0; i < std::size(kNames); ++i) {
    if (kNames[i] != name) continue;
    ChatTemplate t(kFamilies[i]);
    // The ChatML variants with XML tool calls, as Detect recognizes them from their sources.
    t.qwen35_ = name == "qwen3.5";
    t.knows_think_ = t.qwen35_;
    t.qwen3_coder_ = name == "qwen3-coder";
    return t;
  }
  std::string known;
  for (std::string_view n : kNames) known += (known.empty() ? "" : ", ") + std::string(n);
  return Result<ChatTemplate>::InvalidArgument("chat template '" + std::string(name) +
                                               "' is not one of " + known);
}

Result<ChatTemplate> ChatTemplate::ForModel(const GgufFile& file, std::string_view override_name) {
  if (!override_name.empty()) return ByName(override_name);
  if (file.Find("tokenizer.chat_template") == nullptr) return ChatTemplate(ChatFamily::kPlain);
  auto source = file.GetString("tokenizer.chat_template");
  if (!source.ok()) return source.status();
  return Detect(*source);
}

std::string_view ChatTemplate::name() const {
  switch (family_) {
    case ChatFamily::kPlain:
      return "plain";
    case ChatFamily::kChatMl:
      return qwen35_ ? "qwen3.5" : qwen3_coder_ ? "qwen3-coder" : "chatml";
    case ChatFamily::kLlama2:
      return "llama2";
    case ChatFamily::kLlama3:
      return "llama3";
    case ChatFamily::kZephyr:
      return "zephyr";
    case ChatFamily::kMistral:
      return "mistral";
    case ChatFamily::kGemma:
      return "gemma";
    case ChatFamily::kPhi3:
      return "phi3";
    case ChatFamily::kDeepSeekR1:
      return "deepseek-r1";
    case ChatFamily::kGranite:
      return "granite";
    case ChatFamily::kHarmony:
      return "gpt-oss";
    case ChatFamily::kGemma4:
      return "gemma4";
  }
  return "plain";
}

Result<ChatTemplate> ChatTemplate::ForModel(const GgufFile& file, const Tokenizer& tokenizer,
                                            std::string_view override_name) {
  auto chat = ForModel(file, override_name);
  if (!chat.ok()) return chat;
  chat->set_special_tokens(tokenizer.bos() >= 0 ? tokenizer.TokenPiece(tokenizer.bos(), true) : "",
                           tokenizer.eos() >= 0 ? tokenizer.TokenPiece(tokenizer.eos(), true) : "");
  return chat;
}

void ChatTemplate::set_special_tokens(std::string bos_text, std::string eos_text) {
  if (!bos_text.empty()) bos_text_ = std::move(bos_text);
  if (!eos_text.empty()) eos_text_ = std::move(eos_text);
}

void ChatTemplate::set_date(std::string date) {
  date_ = std::move(date);
  date_from_clock_ = false;
}

std::string ChatTemplate::Date() const {
  if (!date_from_clock_) return date_;
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buffer[32];
  const char* format = family_ == ChatFamily::kHarmony ? "%Y-%m-%d" : "%d %b %Y";
  const size_t n = std::strftime(buffer, sizeof(buffer), format, &local);
  return n == 0 ? date_ : std::string(buffer, n);
}

std::vector<std::string> ChatTemplate::stop_strings() const {
  std::vector<std::string> stops;
  switch (family_) {
    case ChatFamily::kPlain:
      stops = {"\nuser:", "\nsystem:", "\nassistant:"};
      break;
    case ChatFamily::kChatMl:
      stops = {"<|im_end|>", "<|im_start|>"};
      break;
    case ChatFamily::kLlama2:
    case ChatFamily::kMistral:
      stops = {"[INST]"};
      break;
    case ChatFamily::kLlama3:
      stops = {"<|eot_id|>", "<|eom_id|>", "<|start_header_id|>"};
      break;
    case ChatFamily::kZephyr:
      stops = {"<|user|>", "<|system|>"};
      break;
    case ChatFamily::kGemma:
      stops = {"<end_of_turn>", "<start_of_turn>"};
      break;
    case ChatFamily::kPhi3:
      stops = {"<|end|>", "<|user|>"};
      break;
    case ChatFamily::kDeepSeekR1:
      stops = {"<｜User｜>"};
      break;
    case ChatFamily::kGranite:
      stops = {"<|end_of_text|>", "<|start_of_role|>"};
      break;
    case ChatFamily::kHarmony:  // <|end|> ends a message, not the answer: analysis comes first
      stops = {"<|return|>", "<|call|>"};
      break;
    case ChatFamily::kGemma4:  // a call is followed by the result the model waits for
      stops = {"<turn|>", "<|tool_response>"};
      break;
  }
  if (!eos_text_.empty() && std::find(stops.begin(), stops.end(), eos_text_) == stops.end()) {
    stops.push_back(eos_text_);
  }
  return stops;
}

std::vector<int32_t> ChatTemplate::EncodePrompt(const Tokenizer& tokenizer,
                                                std::string_view rendered) const {
  std::vector<int32_t> ids;
  const bool has_bos = renders_bos_ && StartsWith(rendered, bos_text_);
  if (!has_bos && tokenizer.add_bos() && tokenizer.bos() >= 0) ids.push_back(tokenizer.bos());
  const std::vector<int32_t> text =
      tokenizer.Encode(rendered, /*add_special=*/false, /*parse_special=*/true);
  ids.insert(ids.end(), text.begin(), text.end());
  return ids;
}

std::string ChatTemplate::Render(std::span<const ChatMessage> messages, bool add_generation_prompt,
                                 std::span<const ChatTool> tools,
                                 const ChatRenderOptions& options) const {
  return RenderText(messages, add_generation_prompt, tools, options).text();
}

std::string ChatTemplate::PromptText(std::span<const ChatMessage> messages,
                                     bool add_generation_prompt, const Tokenizer& tokenizer,
                                     std::span<const ChatTool> tools,
                                     const ChatRenderOptions& options) const {
  std::string text = Render(messages, add_generation_prompt, tools, options);
  if (renders_bos_ && tokenizer.add_bos() && StartsWith(text, bos_text_)) {
    text.erase(0, bos_text_.size());
  }
  return text;
}

std::vector<int32_t> ChatTemplate::EncodeConversation(const Tokenizer& tokenizer,
                                                      std::span<const ChatMessage> messages,
                                                      bool add_generation_prompt,
                                                      std::span<const ChatTool> tools,
                                                      const ChatRenderOptions& options) const {
  const ChatText rendered = RenderText(messages, add_generation_prompt, tools, options);
  std::vector<int32_t> ids;
  const bool has_bos = renders_bos_ && StartsWith(rendered.text(), bos_text_);
  if (!has_bos && tokenizer.add_bos() && tokenizer.bos() >= 0) ids.push_back(tokenizer.bos());
  const std::vector<int32_t> text =
      tokenizer.Encode(rendered.text(), /*add_special=*/false, rendered.message_ranges());
  ids.insert(ids.end(), text.begin(), text.end());
  return ids;
}

ToolFormat ChatTemplate::tool_format() const {
  if (!unsupported_tools_.empty()) return ToolFormat::kNone;
  switch (family_) {
    case ChatFamily::kChatMl:
      if (qwen35_ || qwen3_coder_) return ToolFormat::kQwenXml;
      return smollm3_ ? ToolFormat::kNone : ToolFormat::kHermes;
    case ChatFamily::kLlama3:
      return knowledge_line_.empty() ? ToolFormat::kNone : ToolFormat::kLlama3;
    case ChatFamily::kMistral:
      return ToolFormat::kMistral;
    case ChatFamily::kGranite:
      return ToolFormat::kHermes;
    case ChatFamily::kHarmony:
      return ToolFormat::kHarmony;
    case ChatFamily::kGemma4:
      return ToolFormat::kGemma4;
    default:
      return ToolFormat::kNone;
  }
}

Status ChatTemplate::CheckToolUse(std::span<const ChatMessage> messages,
                                  std::span<const ChatTool> tools) const {
  const ToolFormat format = tool_format();
  if (!tools.empty() && format == ToolFormat::kNone) {
    std::string family = std::string(name());
    if (!unsupported_tools_.empty()) {
      family = unsupported_tools_;
    } else if (smollm3_) {
      family = "chatml (SmolLM3)";
    } else if (family_ == ChatFamily::kLlama3) {
      family = "llama3 (3.0)";
    }
    return Status::InvalidArgument("'tools': the chat template family '" + family +
                                   "' has no tool-call format");
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const std::string where = "'messages[" + std::to_string(i) + "]";
    if ((format == ToolFormat::kLlama3 || format == ToolFormat::kHarmony) &&
        m.tool_calls.size() > 1) {
      return Status::InvalidArgument(where + ".tool_calls' holds " +
                                     std::to_string(m.tool_calls.size()) + " calls; " +
                                     (format == ToolFormat::kLlama3 ? "Llama 3" : "gpt-oss") +
                                     "'s template takes one call per turn");
    }
    if (format != ToolFormat::kMistral) continue;
    for (size_t j = 0; j < m.tool_calls.size(); ++j) {
      if (m.tool_calls[j].id.size() != 9) {
        return Status::InvalidArgument(where + ".tool_calls[" + std::to_string(j) + "].id' is '" +
                                       m.tool_calls[j].id.substr(0, 40) +
                                       "'; Mistral's template needs 9 characters");
      }
    }
    if (m.role == "tool" && m.tool_call_id.size() != 9) {
      return Status::InvalidArgument(where + ".tool_call_id' is '" + m.tool_call_id.substr(0, 40) +
                                     "'; Mistral's template needs 9 characters");
    }
  }
  if (format == ToolFormat::kGemma4) return CheckGemma4(messages);
  return format == ToolFormat::kHarmony ? CheckHarmony(messages) : Status::Ok();
}

ChatText ChatTemplate::RenderText(std::span<const ChatMessage> messages, bool add_generation_prompt,
                                  std::span<const ChatTool> tools,
                                  const ChatRenderOptions& options) const {
  if (tool_format() == ToolFormat::kNone) tools = {};
  ChatText out;
  switch (family_) {
    case ChatFamily::kPlain:
      RenderPlain(messages, add_generation_prompt, out);
      break;
    case ChatFamily::kChatMl:
      if (renders_bos_) out += bos_text_;
      if (smollm3_) {
        RenderSmolLm3(messages, add_generation_prompt, out);
      } else if (hermes3_) {
        RenderHermes3(messages, add_generation_prompt, tools, out);
      } else if (qwen35_) {
        RenderQwen35(messages, add_generation_prompt, tools, out);
      } else if (qwen3_coder_) {
        RenderQwen3Coder(messages, add_generation_prompt, tools, out);
      } else {
        RenderChatMl(messages, add_generation_prompt, tools, out);
      }
      break;
    case ChatFamily::kLlama2:
      RenderLlama2(messages, out);
      break;
    case ChatFamily::kLlama3:
      RenderLlama3(messages, add_generation_prompt, tools, out);
      break;
    case ChatFamily::kZephyr:
      if (renders_bos_) out += bos_text_;
      RenderZephyr(messages, add_generation_prompt, out);
      break;
    case ChatFamily::kMistral:
      RenderMistral(messages, tools, out);
      break;
    case ChatFamily::kGemma:
      RenderGemma(messages, add_generation_prompt, out);
      break;
    case ChatFamily::kPhi3:
      if (renders_bos_) out += bos_text_;
      RenderPhi3(messages, add_generation_prompt, out);
      break;
    case ChatFamily::kDeepSeekR1:
      RenderDeepSeekR1(messages, add_generation_prompt, out);
      break;
    case ChatFamily::kGranite:
      RenderGranite(messages, add_generation_prompt, tools, out);
      break;
    case ChatFamily::kHarmony:
      RenderHarmony(messages, add_generation_prompt, tools, options.reasoning_effort, out);
      break;
    case ChatFamily::kGemma4:
      RenderGemma4(messages, add_generation_prompt, tools, options.enable_thinking, out);
      break;
  }
  return out;
}

void ChatTemplate::RenderPlain(std::span<const ChatMessage> messages, bool add_generation_prompt,
                               ChatText& out) const {
  for (const ChatMessage& m : messages) {
    out.AppendAll({MessageText(m.role), ": ", MessageText(m.content), "\n"});
  }
  if (add_generation_prompt) out += "assistant:";
}

void ChatTemplate::RenderChatMl(std::span<const ChatMessage> messages, bool add_generation_prompt,
                                std::span<const ChatTool> tools, ChatText& out) const {
  const bool has_system = !messages.empty() && messages[0].role == "system";
  if (!tools.empty()) {
    AppendHermesSystem(has_system ? std::string_view(messages[0].content) : default_system_, tools,
                       out);
    if (has_system) messages = messages.subspan(1);
  } else if (!default_system_.empty() && !has_system) {
    out.AppendAll({"<|im_start|>system\n", default_system_, "<|im_end|>\n"});
  }
  const bool hermes = hermes_tools_ || !tools.empty();
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (hermes && m.role == "assistant" && !m.tool_calls.empty()) {
      AppendHermesToolCalls(m, kChatMlTurns, out);
    } else if (hermes && m.role == "tool") {
      AppendHermesToolResult(messages, i, kChatMlTurns, out);
    } else {
      out.AppendAll(
          {"<|im_start|>", MessageText(m.role), "\n", MessageText(m.content), "<|im_end|>\n"});
    }
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
}

void ChatTemplate::RenderSmolLm3(std::span<const ChatMessage> messages, bool add_generation_prompt,
                                 ChatText& out) const {
  bool think = true;  // enable_thinking defaults to true
  std::string custom;
  if (!messages.empty() && messages[0].role == "system") {
    const std::string& system = messages[0].content;
    if (Contains(system, "/no_think")) {
      think = false;
    } else if (Contains(system, "/think")) {
      think = true;
    }
    custom = RStrip(ReplaceAll(ReplaceAll(system, "/no_think", ""), "/think", ""));
  }
  out.AppendAll({"<|im_start|>system\n", "## Metadata\n\n", cutoff_line_, "Reasoning Mode: ",
                 think ? "/think" : "/no_think", "\n\n", "## Custom Instructions\n\n"});
  if (!custom.empty()) {
    out.AppendAll({MessageText(custom), "\n\n"});
  } else {
    out += think ? think_instructions_ : no_think_instructions_;
  }
  out += "<|im_end|>\n";
  constexpr std::string_view kEmptyThought = "<think>\n\n</think>\n";
  for (const ChatMessage& m : messages) {
    if (m.role == "user" || m.role == "tool") {
      out.AppendAll({"<|im_start|>user\n", MessageText(m.content), "<|im_end|>\n"});
    } else if (m.role == "assistant") {
      out.AppendAll({"<|im_start|>assistant\n", think ? "" : kEmptyThought,
                     MessageText(LStripNewlines(m.content)), "<|im_end|>\n"});
    }
  }
  if (add_generation_prompt) {
    out.AppendAll({"<|im_start|>assistant\n", think ? "" : kEmptyThought});
  }
}

void ChatTemplate::RenderLlama2(std::span<const ChatMessage> messages, ChatText& out) const {
  std::optional<std::string_view> system;
  if (!messages.empty() && messages[0].role == "system") {
    system = messages[0].content;
    messages = messages.subspan(1);
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const std::vector<Piece> content = i == 0 && system
                                           ? StripPieces({"<<SYS>>\n", MessageText(*system),
                                                          "\n<</SYS>>\n\n", MessageText(m.content)})
                                           : StripPieces({MessageText(m.content)});
    if (m.role == "user") {
      out.AppendAll({bos_text_, "[INST] "});
      out.AppendAll(content);
      out += " [/INST]";
    } else if (m.role == "assistant") {
      out += " ";
      out.AppendAll(content);
      out.AppendAll({" ", eos_text_});
    }
  }
}

void ChatTemplate::RenderLlama3(std::span<const ChatMessage> messages, bool add_generation_prompt,
                                std::span<const ChatTool> tools, ChatText& out) const {
  out += bos_text_;
  if (!knowledge_line_.empty()) {
    // 3.1/3.2: the system block is always there; the system message goes at its end.
    std::string_view system;
    if (!messages.empty() && messages[0].role == "system") {
      system = Strip(messages[0].content);
      messages = messages.subspan(1);
    }
    out.AppendAll({"<|start_header_id|>system<|end_header_id|>\n\n",
                   tools.empty() ? "" : "Environment: ipython\n", knowledge_line_,
                   "Today Date: ", Date(), "\n\n", MessageText(system), "<|eot_id|>"});
    if (!tools.empty() && !messages.empty()) {
      // The tools go into the first message after the system one, whatever its role.
      AppendLlama3ToolsTurn(Strip(messages[0].content), tools, out);
      messages = messages.subspan(1);
    }
  }
  const bool tool_turns = !knowledge_line_.empty();
  for (const ChatMessage& m : messages) {
    if (tool_turns && !m.tool_calls.empty()) {
      AppendLlama3ToolCall(m, out);
    } else if (tool_turns && (m.role == "tool" || m.role == "ipython")) {
      AppendLlama3ToolResult(m, out);
    } else {
      out.AppendAll({"<|start_header_id|>", MessageText(m.role), "<|end_header_id|>\n\n",
                     MessageText(Strip(m.content)), "<|eot_id|>"});
    }
  }
  if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
}

void ChatTemplate::RenderZephyr(std::span<const ChatMessage> messages, bool add_generation_prompt,
                                ChatText& out) const {
  for (const ChatMessage& m : messages) {
    if (m.role == "user" || m.role == "system" || m.role == "assistant") {
      out.AppendAll({"<|", m.role, "|>\n", MessageText(m.content), eos_text_, "\n"});
    }
  }
  // The template writes the cue inside its loop, after the last message.
  if (add_generation_prompt && !messages.empty()) out += "<|assistant|>\n";
}

void ChatTemplate::RenderMistral(std::span<const ChatMessage> messages,
                                 std::span<const ChatTool> tools, ChatText& out) const {
  std::optional<std::string_view> system;
  if (!messages.empty() && messages[0].role == "system") {
    system = messages[0].content;
    messages = messages.subspan(1);
  }
  // The template compares messages with the last user message by value.
  const ChatMessage* last_user = nullptr;
  for (const ChatMessage& m : messages) {
    if (m.role == "user") last_user = &m;
  }
  out += bos_text_;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user") {
      if (!tools.empty() && m.content == last_user->content) AppendMistralTools(tools, out);
      // Nemo puts the system text into the last message only, when that is a user turn.
      if (i + 1 == messages.size() && system) {
        out.AppendAll({"[INST]", MessageText(*system), "\n\n", MessageText(m.content), "[/INST]"});
      } else {
        out.AppendAll({"[INST]", MessageText(m.content), "[/INST]"});
      }
    } else if (!m.tool_calls.empty()) {
      AppendMistralToolCalls(m, eos_text_, out);
    } else if (m.role == "assistant") {
      out.AppendAll({MessageText(m.content), eos_text_});
    } else if (m.role == "tool") {
      AppendMistralToolResult(m, out);
    }
  }
}

void ChatTemplate::RenderGemma(std::span<const ChatMessage> messages, bool add_generation_prompt,
                               ChatText& out) const {
  out += bos_text_;
  std::string pending_system;
  for (const ChatMessage& m : messages) {
    if (m.role == "system") {  // trimmed, then put before the next user turn (as llama.cpp)
      pending_system += Strip(m.content);
      continue;
    }
    const bool model = m.role == "assistant";
    out.AppendAll({"<start_of_turn>", model ? Piece("model") : Piece(MessageText(m.role)), "\n"});
    if (!model && !pending_system.empty()) {
      out.AppendAll({MessageText(pending_system), "\n\n"});
      pending_system.clear();
    }
    out.AppendAll({MessageText(Strip(m.content)), "<end_of_turn>\n"});
  }
  if (add_generation_prompt) out += "<start_of_turn>model\n";
}

void ChatTemplate::RenderPhi3(std::span<const ChatMessage> messages, bool add_generation_prompt,
                              ChatText& out) const {
  for (const ChatMessage& m : messages) {
    if (m.role == "system" && m.content.empty()) continue;
    if (m.role == "system" || m.role == "user" || m.role == "assistant") {
      out.AppendAll({"<|", m.role, "|>\n", MessageText(m.content), "<|end|>\n"});
    }
  }
  out += add_generation_prompt ? std::string_view("<|assistant|>\n") : eos_text_;
}

void ChatTemplate::RenderDeepSeekR1(std::span<const ChatMessage> messages,
                                    bool add_generation_prompt, ChatText& out) const {
  std::string_view system;  // the template keeps the last system message
  for (const ChatMessage& m : messages) {
    if (m.role == "system") system = m.content;
  }
  out.AppendAll({bos_text_, MessageText(system)});
  for (const ChatMessage& m : messages) {
    if (m.role == "user") {
      out.AppendAll({"<｜User｜>", MessageText(m.content)});
    } else if (m.role == "assistant") {
      // Earlier reasoning is dropped: only the text after the last </think> is kept.
      std::string_view content = m.content;
      const size_t think_end = content.rfind("</think>");
      if (think_end != std::string_view::npos) content = content.substr(think_end + 8);
      out.AppendAll({"<｜Assistant｜>", MessageText(content), eos_text_});
    }
  }
  if (add_generation_prompt) out += "<｜Assistant｜><think>\n";
}

void ChatTemplate::RenderGranite(std::span<const ChatMessage> messages, bool add_generation_prompt,
                                 std::span<const ChatTool> tools, ChatText& out) const {
  constexpr std::string_view kDefaultSystem =
      "You are a helpful assistant. Please ensure responses are professional, accurate, and safe.";
  const bool has_system = !messages.empty() && messages[0].role == "system";
  const std::string_view system = has_system ? std::string_view(messages[0].content) : "";
  const std::string with_tools =
      tools.empty() ? std::string(system) : GraniteToolsSystem(system, tools);
  out.AppendAll({"<|start_of_role|>system<|end_of_role|>",
                 with_tools.empty() ? Piece(kDefaultSystem) : Piece(MessageText(with_tools)),
                 "<|end_of_text|>\n"});
  for (size_t i = has_system ? 1 : 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user" || m.role == "system") {
      out.AppendAll({"<|start_of_role|>", MessageText(m.role), "<|end_of_role|>",
                     MessageText(m.content), "<|end_of_text|>\n"});
    } else if (m.role == "assistant") {
      AppendHermesToolCalls(m, kGraniteTurns, out);
    } else if (m.role == "tool") {
      AppendHermesToolResult(messages, i, kGraniteTurns, out);
    }
  }
  if (add_generation_prompt) out += "<|start_of_role|>assistant<|end_of_role|>";
}

void ChatTemplate::RenderHermes3(std::span<const ChatMessage> messages, bool add_generation_prompt,
                                 std::span<const ChatTool> tools, ChatText& out) const {
  AppendHermes3System(tools, out);
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "assistant" && !m.tool_calls.empty()) {  // its content is not written
      out += "<|im_start|>assistant";
      for (const ChatToolCall& call : m.tool_calls) {
        const std::string arguments = ToolArgumentsText(call.arguments);
        out.AppendAll({"\n<tool_call>\n{\"name\": \"", MessageText(call.name),
                       "\", \"arguments\": ", MessageText(arguments), "}\n</tool_call>"});
      }
      out += "<|im_end|>\n";
    } else if (m.role == "tool") {
      // A group of results opens a "tool" turn (not when it starts the conversation) and closes
      // it without a newline; the last message closes it too.
      const bool last = i + 1 == messages.size();
      if (i > 0 && messages[i - 1].role != "tool") out += "<|im_start|>tool\n";
      out.AppendAll({"<tool_response>\n", MessageText(m.content),
                     last ? "\n</tool_response>" : "\n</tool_response>\n"});
      if (last || messages[i + 1].role != "tool") out += "<|im_end|>";
    } else {
      out.AppendAll(
          {"<|im_start|>", MessageText(m.role), "\n", MessageText(m.content), "<|im_end|>\n"});
    }
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
}

}  // namespace kvserve
