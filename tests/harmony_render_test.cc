// gpt-oss's harmony chat format: every conversation of tests/data/harmony/conversations.json, read
// through the server's request parsing (messages, tools in the client's key order,
// reasoning_effort), renders byte for byte as Jinja2 renders the real template
// (tests/data/harmony/jinja2.json, written by make_goldens.py there), detected from the template's
// source and by name; what the template raises on is refused by CheckToolUse with the field named.
#include <gtest/gtest.h>

#include <algorithm>
#include <ctime>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "io/gguf_reader.h"
#include "io/gguf_writer.h"
#include "server/completion_request.h"
#include "support/paths.h"
#include "support/read_file.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace kvserve {
namespace {

using ::kvserve::testing::ModelPath;
using ::kvserve::testing::TestDataPath;
using OrderedJson = nlohmann::ordered_json;

ChatTemplate Detected() {
  auto t = ChatTemplate::Detect(
      testing::ReadWholeFile(ModelPath("chat-templates/openai-gpt-oss-120b.jinja")));
  EXPECT_TRUE(t.ok()) << t.message();
  return std::move(t).value();
}

// A conversation as a request would bring it.
struct Conversation {
  std::string name;
  std::vector<ChatMessage> messages;
  std::vector<ChatTool> tools;
  std::string effort;
  bool add_generation_prompt = true;
};

Conversation Read(const OrderedJson& entry) {
  const std::string text = entry.dump();
  const nlohmann::json body = nlohmann::json::parse(text);
  Conversation c{.name = entry["name"].get<std::string>(),
                 .add_generation_prompt = entry.value("add_generation_prompt", true)};
  auto error = ParseChatMessages(body, c.messages);
  EXPECT_FALSE(error) << c.name << ": " << error->message;
  error = ParseChatTools(body, c.tools);
  EXPECT_FALSE(error) << c.name << ": " << error->message;
  KeepToolKeyOrder(text, c.tools);
  error = ParseReasoningEffort(body, c.effort);
  EXPECT_FALSE(error) << c.name << ": " << error->message;
  return c;
}

TEST(HarmonyRenderTest, DetectedFromItsTemplateAndByName) {
  const ChatTemplate detected = Detected();
  auto by_name = ChatTemplate::ByName("gpt-oss");
  ASSERT_TRUE(by_name.ok()) << by_name.message();
  for (const ChatTemplate* t : std::vector<const ChatTemplate*>{&detected, &*by_name}) {
    EXPECT_EQ(t->name(), "gpt-oss");
    EXPECT_EQ(t->family(), ChatFamily::kHarmony);
    EXPECT_EQ(t->tool_format(), ToolFormat::kHarmony);
    EXPECT_TRUE(t->knows_think());
    EXPECT_FALSE(t->prompt_opens_think());
    EXPECT_TRUE(t->warning().empty());
    // <|end|> closes the analysis message; the answer ends with <|return|> or a <|call|>.
    const std::vector<std::string> stops = t->stop_strings();
    EXPECT_EQ(stops, (std::vector<std::string>{"<|return|>", "<|call|>"}));
  }
}

TEST(HarmonyRenderTest, ConversationsRenderAsJinja2) {
  const OrderedJson conversations = OrderedJson::parse(
      testing::ReadWholeFile(TestDataPath("harmony/conversations.json")))["conversations"];
  const nlohmann::json goldens =
      nlohmann::json::parse(testing::ReadWholeFile(TestDataPath("harmony/jinja2.json")));
  ChatTemplate detected = Detected();
  auto by_name = ChatTemplate::ByName("gpt-oss");
  ASSERT_TRUE(by_name.ok());
  detected.set_date(goldens["date"].get<std::string>());
  by_name->set_date(goldens["date"].get<std::string>());
  ASSERT_GE(conversations.size(), 15u);
  for (const OrderedJson& entry : conversations) {
    const Conversation c = Read(entry);
    const std::string& expected = goldens["prompts"][c.name].get_ref<const std::string&>();
    for (const ChatTemplate* t : std::vector<const ChatTemplate*>{&detected, &*by_name}) {
      const Status check = t->CheckToolUse(c.messages, c.tools);
      EXPECT_TRUE(check.ok()) << c.name << ": " << check.message();
      EXPECT_EQ(
          t->Render(c.messages, c.add_generation_prompt, c.tools, {.reasoning_effort = c.effort}),
          expected)
          << c.name;
    }
  }
}

TEST(HarmonyRenderTest, TodaysDateUnlessPinned) {
  const ChatTemplate t = Detected();
  const std::vector<ChatMessage> messages = {{.role = "user", .content = "Hi"}};
  const std::string text = t.Render(messages, true);
  std::smatch date;
  ASSERT_TRUE(std::regex_search(text, date, std::regex("Current date: (\\d{4}-\\d{2}-\\d{2})\n")))
      << text;
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char today[16];
  std::strftime(today, sizeof(today), "%Y-%m-%d", &local);
  std::tm yesterday_tm{};
  const std::time_t yesterday = now - 24 * 3600;
  localtime_r(&yesterday, &yesterday_tm);
  char before[16];
  std::strftime(before, sizeof(before), "%Y-%m-%d", &yesterday_tm);
  EXPECT_TRUE(date[1] == today || date[1] == before) << date[1];  // a render just before midnight
}

TEST(HarmonyRenderTest, WhatTheTemplateRaisesOnIsRefusedByField) {
  const ChatTemplate t = Detected();
  const ChatToolCall call{.id = "c", .name = "f", .arguments = "{}"};
  const ChatMessage user{.role = "user", .content = "Hi"};
  struct Case {
    std::vector<ChatMessage> messages;
    std::string message;
  };
  const Case cases[] = {
      {{user, {.role = "assistant", .content = "<|channel|>final<|message|>Hi"}},
       "'messages[1].content' holds a <|channel|> tag"},
      {{user,
        {.role = "assistant", .content = "Hi", .reasoning = "<|channel|>analysis<|message|>x"}},
       "'messages[1].reasoning_content' holds a <|channel|> tag"},
      {{user,
        {.role = "assistant", .content = "Let me see.", .tool_calls = {call}, .reasoning = "Hmm."}},
       "'messages[1]' has tool_calls with both 'content' and 'reasoning_content'"},
      {{user, {.role = "tool", .content = "42"}}, "'messages[1]' is a tool result with no"},
      {{user,
        {.role = "assistant", .tool_calls = {call}},
        {.role = "assistant", .content = "Done."},
        {.role = "tool", .content = "42"}},
       "'messages[3]' is a tool result with no"},
      {{user, {.role = "assistant", .tool_calls = {call, call}}},
       "'messages[1].tool_calls' holds 2 calls; gpt-oss's template takes one call per turn"},
  };
  for (const Case& c : cases) {
    const Status s = t.CheckToolUse(c.messages, {});
    EXPECT_FALSE(s.ok()) << c.message;
    EXPECT_NE(s.message().find(c.message), std::string::npos) << s.message();
    EXPECT_NO_THROW(t.Render(c.messages, true));  // rendering never fails
  }
  // A call, its result, another user turn and a result-less answer are fine.
  const std::vector<ChatMessage> fine = {user,
                                         {.role = "assistant", .tool_calls = {call}},
                                         {.role = "tool", .content = "42"},
                                         {.role = "tool", .content = "43"},
                                         {.role = "assistant", .content = "42 and 43."}};
  EXPECT_TRUE(t.CheckToolUse(fine, {}).ok());
}

// GPT-2's vocabulary with harmony's control tokens added, eos <|return|>, <|end|> listed as eot
// (as if a file said so) and gpt-oss's template: a stand-in for a gpt-oss GGUF's tokenizer.
struct HarmonyVocab {
  std::vector<uint8_t> image;
  std::unique_ptr<GgufFile> file;
};

std::unique_ptr<HarmonyVocab> MakeHarmonyVocab() {
  auto gpt2 = GgufFile::Open(ModelPath("ggml-vocab-gpt-2.gguf"));
  EXPECT_TRUE(gpt2.ok()) << gpt2.message();
  const auto tokens = gpt2->GetStringArray("tokenizer.ggml.tokens").value();
  std::vector<std::string> texts(tokens.begin(), tokens.end());
  const auto types64 = gpt2->GetIntArray("tokenizer.ggml.token_type").value();
  std::vector<int32_t> types(types64.begin(), types64.end());
  const auto merges = gpt2->GetStringArray("tokenizer.ggml.merges").value();
  const int32_t first = static_cast<int32_t>(texts.size());
  for (const char* added : {"<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>",
                            "<|return|>", "<|call|>"}) {
    texts.push_back(added);
    types.push_back(3);  // CONTROL
  }
  GgufWriter w;
  w.SetString("tokenizer.ggml.model", "gpt2");
  w.SetString("tokenizer.ggml.pre", "gpt-2");
  w.SetStringArray("tokenizer.ggml.tokens", texts);
  w.SetInt32Array("tokenizer.ggml.token_type", types);
  w.SetStringArray("tokenizer.ggml.merges", std::vector<std::string>(merges.begin(), merges.end()));
  w.SetUint32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(first + 5));
  w.SetUint32("tokenizer.ggml.eot_token_id", static_cast<uint32_t>(first + 1));
  w.SetString("tokenizer.chat_template",
              testing::ReadWholeFile(ModelPath("chat-templates/openai-gpt-oss-120b.jinja")));
  auto out = std::make_unique<HarmonyVocab>();
  out->image = w.Serialize();
  auto file = GgufFile::Parse(out->image.data(), out->image.size(), "harmony-vocab");
  EXPECT_TRUE(file.ok()) << file.message();
  if (file.ok()) out->file = std::make_unique<GgufFile>(std::move(file).value());
  return out;
}

// The answer ends at <|return|> or <|call|>, not at the <|end|> of its analysis; the markup
// becomes control tokens, a user's text never does.
TEST(HarmonyRenderTest, ModelFileEndsAtReturnOrCallAndEncodesMarkupAsTokens) {
  const auto vocab = MakeHarmonyVocab();
  ASSERT_NE(vocab->file, nullptr);
  auto tokenizer = Tokenizer::FromGguf(*vocab->file);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.message();
  const Tokenizer& tok = **tokenizer;
  auto chat = ChatTemplate::ForModel(*vocab->file, tok, "");
  ASSERT_TRUE(chat.ok()) << chat.message();
  EXPECT_EQ(chat->name(), "gpt-oss");
  auto id = [&](const char* text) { return tok.Encode(text, false, true).at(0); };
  EXPECT_TRUE(tok.IsEndOfGeneration(id("<|return|>")));
  EXPECT_TRUE(tok.IsEndOfGeneration(id("<|call|>")));
  EXPECT_FALSE(tok.IsEndOfGeneration(id("<|end|>")));  // listed as eot by the file
  EXPECT_FALSE(tok.IsEndOfGeneration(id("<|channel|>")));
  const std::vector<ChatMessage> messages = {{.role = "user", .content = "say <|end|>"}};
  const std::vector<int32_t> ids = chat->EncodeConversation(tok, messages, true);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), id("<|start|>")), 3);  // system, user, cue
  EXPECT_EQ(std::count(ids.begin(), ids.end(), id("<|end|>")), 2);    // not the user's
  std::string text;
  for (int32_t i : ids) text += tok.TokenPiece(i, /*render_special=*/true);
  EXPECT_EQ(text, chat->Render(messages, true));
}

}  // namespace
}  // namespace kvserve
