// Gemma 4's chat format: every conversation of tests/data/gemma4/conversations.json, read through
// the server's request parsing (messages, tools in the client's key order), renders byte for byte
// as Jinja2 renders the real template (tests/data/gemma4/jinja2.json, written by make_goldens.py
// there), detected from the template's source and by name, with enable_thinking as the
// conversation sets it; what the template fails on is refused by CheckToolUse with the field named.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "server/completion_request.h"
#include "support/paths.h"
#include "support/read_file.h"
#include "tokenizer/chat_template.h"

namespace kvserve {
namespace {

using ::kvserve::testing::ModelPath;
using ::kvserve::testing::TestDataPath;
using OrderedJson = nlohmann::ordered_json;

ChatTemplate Detected() {
  auto t = ChatTemplate::Detect(
      testing::ReadWholeFile(ModelPath("chat-templates/google-gemma-4-31B-it.jinja")));
  EXPECT_TRUE(t.ok()) << t.message();
  return std::move(t).value();
}

// A conversation as a request would bring it.
struct Conversation {
  std::string name;
  std::vector<ChatMessage> messages;
  std::vector<ChatTool> tools;
  bool enable_thinking = false;
  bool add_generation_prompt = true;
};

Conversation Read(const OrderedJson& entry) {
  const std::string text = entry.dump();
  const nlohmann::json body = nlohmann::json::parse(text);
  Conversation c{.name = entry["name"].get<std::string>(),
                 .enable_thinking = entry.value("enable_thinking", false),
                 .add_generation_prompt = entry.value("add_generation_prompt", true)};
  auto error = ParseChatMessages(body, c.messages);
  EXPECT_FALSE(error) << c.name << ": " << error->message;
  error = ParseChatTools(body, c.tools);
  EXPECT_FALSE(error) << c.name << ": " << error->message;
  KeepToolKeyOrder(text, c.tools);
  return c;
}

TEST(Gemma4RenderTest, DetectedFromItsTemplateAndByName) {
  const ChatTemplate detected = Detected();
  auto by_name = ChatTemplate::ByName("gemma4");
  ASSERT_TRUE(by_name.ok()) << by_name.message();
  for (const ChatTemplate* t : std::vector<const ChatTemplate*>{&detected, &*by_name}) {
    EXPECT_EQ(t->name(), "gemma4");
    EXPECT_EQ(t->family(), ChatFamily::kGemma4);
    EXPECT_EQ(t->tool_format(), ToolFormat::kGemma4);
    EXPECT_TRUE(t->renders_bos());
    EXPECT_TRUE(t->knows_think());
    EXPECT_FALSE(t->prompt_opens_think());
    EXPECT_TRUE(t->warning().empty());
    // The turn ends with <turn|>; a call with the <|tool_response> that would bring its result.
    EXPECT_EQ(t->stop_strings(),
              (std::vector<std::string>{"<turn|>", "<|tool_response>", "<eos>"}));
  }
  // A shortened source with Gemma 4's markers (as its older, interleaved template has them) is the
  // same family; Gemma 2's template is not.
  auto markers = ChatTemplate::Detect(
      "{{ bos_token }}{% for m in messages %}{{ '<|turn>' + m['role'] + '\\n' }}{% endfor %}"
      "{{- '<|tool_call>call:' + name + '{' -}}");
  ASSERT_TRUE(markers.ok());
  EXPECT_EQ(markers->name(), "gemma4");
  auto gemma2 = ChatTemplate::Detect(
      testing::ReadWholeFile(ModelPath("chat-templates/google-gemma-2-2b-it.jinja")));
  ASSERT_TRUE(gemma2.ok());
  EXPECT_EQ(gemma2->name(), "gemma");
}

TEST(Gemma4RenderTest, ConversationsRenderAsJinja2) {
  const OrderedJson conversations = OrderedJson::parse(
      testing::ReadWholeFile(TestDataPath("gemma4/conversations.json")))["conversations"];
  const nlohmann::json goldens =
      nlohmann::json::parse(testing::ReadWholeFile(TestDataPath("gemma4/jinja2.json")));
  const ChatTemplate detected = Detected();
  auto by_name = ChatTemplate::ByName("gemma4");
  ASSERT_TRUE(by_name.ok());
  ASSERT_GE(conversations.size(), 20u);
  for (const OrderedJson& entry : conversations) {
    const Conversation c = Read(entry);
    const std::string& expected = goldens["prompts"][c.name].get_ref<const std::string&>();
    for (const ChatTemplate* t : std::vector<const ChatTemplate*>{&detected, &*by_name}) {
      const Status check = t->CheckToolUse(c.messages, c.tools);
      EXPECT_TRUE(check.ok()) << c.name << ": " << check.message();
      EXPECT_EQ(t->Render(c.messages, c.add_generation_prompt, c.tools,
                          {.enable_thinking = c.enable_thinking}),
                expected)
          << c.name;
    }
  }
}

TEST(Gemma4RenderTest, AResultOfNoCallWithoutANameIsRefusedByField) {
  const ChatTemplate t = Detected();
  const ChatToolCall call{.id = "call_1", .name = "f", .arguments = "{}"};
  const std::vector<ChatMessage> unanswerable = {
      {.role = "user", .content = "Hi"},
      {.role = "assistant", .tool_calls = {call}},
      {.role = "tool", .content = "42", .tool_call_id = "call_2"}};
  const Status s = t.CheckToolUse(unanswerable, {});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'messages[2].tool_call_id' is 'call_2'"), std::string::npos)
      << s.message();
  EXPECT_NO_THROW(t.Render(unanswerable, true));  // rendering never fails
  std::vector<ChatMessage> named = unanswerable;
  named[2].name = "f";
  EXPECT_TRUE(t.CheckToolUse(named, {}).ok());
  named[2].name.clear();
  named[2].tool_call_id = "call_1";
  EXPECT_TRUE(t.CheckToolUse(named, {}).ok());
}

TEST(Gemma4RenderTest, ArgumentsThatAreNotJsonAreWrittenAsTheyAre) {
  const ChatTemplate t = Detected();
  const std::vector<ChatMessage> messages = {
      {.role = "user", .content = "Hi"},
      {.role = "assistant",
       .tool_calls = {{.id = "a", .name = "f", .arguments = "city:<|\"|>Paris<|\"|>"},
                      {.id = "b", .name = "g", .arguments = "[1, 2]"},
                      {.id = "c", .name = "h", .arguments = std::string(100, '[')}}}};
  EXPECT_EQ(t.Render(messages, true),
            "<bos><|turn>user\nHi<turn|>\n<|turn>model\n"
            "<|tool_call>call:f{city:<|\"|>Paris<|\"|>}<tool_call|>"
            "<|tool_call>call:g{}<tool_call|>"
            "<|tool_call>call:h{" +
                std::string(100, '[') + "}<tool_call|><|tool_response>");
}

}  // namespace
}  // namespace kvserve
