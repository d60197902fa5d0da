// The chat template of the two real models against llama.cpp's server and against the models
// themselves:
// - every conversation of tests/data/real-models/apply-template/conversations.json (multi-turn,
//   with and without a system prompt, whitespace around content, code, other scripts, marker
//   texts in a message) renders byte for byte as llama-server's POST /apply-template at
//   3f545becc renders it: SmolLM2 with the Jinja template stored in its file; the Gemma 3 270M
//   file stores none, so it is compared twice, llama-server's ChatML fallback against kvserve's
//   `--chat-template chatml` and llama-server's built-in Gemma format against `gemma`;
// - text in a message never becomes a control token, while the template's own markup does;
// - the turn ends on the model's end-of-turn token: SmolLM2's <|im_end|> (id 2, also its EOS)
//   ends a real greedy reply; Gemma 3's <end_of_turn> (id 106; its EOS is <eos>, id 1) is one
//   end-of-generation token. (The base Gemma 3 270M never ends a turn: greedy, it repeats the
//   question until the length limit, in llama-server too.)
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "model/model.h"
#include "support/forward.h"
#include "support/paths.h"
#include "support/read_file.h"
#include "support/real_model.h"
#include "support/stream_output.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace kvserve {
namespace {

struct Conversation {
  std::string name;
  std::vector<ChatMessage> messages;
};

std::vector<Conversation> Conversations() {
  const auto root = nlohmann::json::parse(testing::ReadWholeFile(
      testing::TestDataPath("real-models/apply-template/conversations.json")));
  std::vector<Conversation> out;
  for (const auto& c : root.at("conversations")) {
    Conversation conversation{.name = c.at("name")};
    for (const auto& m : c.at("messages"))
      conversation.messages.push_back({m.at("role"), m.at("content")});
    out.push_back(std::move(conversation));
  }
  return out;
}

struct ChatModel {
  testing::LoadedModel loaded;
  std::unique_ptr<ChatTemplate> chat;
};

ChatModel Load(const std::string& name, const std::string& template_name) {
  ChatModel out{.loaded = testing::LoadRealModel(name)};
  if (!out.loaded.tokenizer) return out;
  auto chat =
      ChatTemplate::ForModel(out.loaded.model->file(), *out.loaded.tokenizer, template_name);
  EXPECT_TRUE(chat.ok()) << chat.message();
  if (chat.ok()) out.chat = std::make_unique<ChatTemplate>(std::move(chat).value());
  return out;
}

// The template whose turns end on the model's own end-of-turn token, and that token.
struct TurnEnd {
  std::string template_name;  // for --chat-template; "" = the file's own
  std::string text;
  int32_t id;
};
TurnEnd TurnEndOf(const std::string& name) {
  return name == "smollm2-135m" ? TurnEnd{"", "<|im_end|>", 2}
                                : TurnEnd{"gemma", "<end_of_turn>", 106};
}

long Occurrences(std::string_view text, std::string_view what) {
  long n = 0;
  for (size_t at = text.find(what); at != std::string_view::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class RealModelChat : public ::testing::TestWithParam<const char*> {};

TEST_P(RealModelChat, RendersAsLlamaServer) {
  const auto expected = nlohmann::json::parse(testing::ReadWholeFile(testing::TestDataPath(
      "real-models/apply-template/" + std::string(GetParam()) + ".llama-server.json")));
  const std::vector<Conversation> conversations = Conversations();
  ASSERT_GE(conversations.size(), 8u);
  for (const auto& tmpl : expected.at("templates")) {
    const std::string template_name = tmpl.at("kvserve_template");
    const ChatModel m = Load(GetParam(), template_name);
    ASSERT_TRUE(m.chat);
    for (const Conversation& c : conversations) {
      EXPECT_EQ(m.chat->PromptText(c.messages, /*add_generation_prompt=*/true, *m.loaded.tokenizer),
                tmpl.at("prompts").at(c.name).get<std::string>())
          << c.name << " with --chat-template '" << template_name << "'";
    }
  }
}

TEST_P(RealModelChat, MessageTextNeverBecomesAControlToken) {
  const TurnEnd end = TurnEndOf(GetParam());
  const ChatModel m = Load(GetParam(), end.template_name);
  ASSERT_TRUE(m.chat);
  ASSERT_EQ(m.loaded.tokenizer->Encode(end.text, false, /*parse_special=*/true),
            std::vector<int32_t>{end.id});
  for (const Conversation& c : Conversations()) {
    const std::string rendered = m.chat->Render(c.messages, true);
    const std::vector<int32_t> safe =
        m.chat->EncodeConversation(*m.loaded.tokenizer, c.messages, true);
    const std::vector<int32_t> all_parsed = m.chat->EncodePrompt(*m.loaded.tokenizer, rendered);
    // One end-of-turn token per marker the template wrote, none from the messages' text.
    long in_messages = 0;
    for (const ChatMessage& message : c.messages)
      in_messages += Occurrences(message.content, end.text);
    const long written = Occurrences(rendered, end.text) - in_messages;
    EXPECT_GE(written, static_cast<long>(c.messages.size()) - 1) << c.name;
    EXPECT_EQ(std::count(safe.begin(), safe.end(), end.id), written) << c.name;
    if (in_messages > 0) {
      // Parsing everything (llama-server's way) reads the user's marker as the control token;
      // kvserve keeps it text.
      EXPECT_EQ(std::count(all_parsed.begin(), all_parsed.end(), end.id), written + in_messages);
      EXPECT_NE(m.loaded.tokenizer->Decode(safe).find(end.text), std::string::npos) << c.name;
    } else {
      EXPECT_EQ(safe, all_parsed) << c.name;  // nothing to protect: the same ids
    }
  }
}

TEST_P(RealModelChat, TurnEndMarkerIsOneEndOfGenerationToken) {
  const TurnEnd end = TurnEndOf(GetParam());
  const ChatModel m = Load(GetParam(), end.template_name);
  ASSERT_TRUE(m.chat);
  EXPECT_TRUE(m.loaded.tokenizer->IsEndOfGeneration(end.id));
  EXPECT_EQ(m.loaded.tokenizer->TokenPiece(end.id, /*render_special=*/true), end.text);
  const std::vector<std::string> stops = m.chat->stop_strings();
  EXPECT_NE(std::find(stops.begin(), stops.end(), end.text), stops.end());
}

// SmolLM2-135M-Instruct answers and ends its turn: the engine stops on <|im_end|>.
TEST(RealModelChatSmolLm2, GreedyReplyEndsOnImEnd) {
  const ChatModel m = Load("smollm2-135m", "");
  ASSERT_TRUE(m.chat);
  const std::vector<ChatMessage> messages = {
      {"system", "You are a concise assistant. Answer in one sentence."},
      {"user", "What is the capital of Japan?"}};
  Request request;
  request.prompt = m.chat->EncodeConversation(*m.loaded.tokenizer, messages, true);
  request.max_tokens = 96;
  request.sampling.temperature = 0.0f;
  auto engine = Engine::Create(*m.loaded.model, *m.loaded.tokenizer,
                               EngineOptions{.n_threads = 2, .n_ctx = 512});
  ASSERT_TRUE(engine.ok()) << engine.message();
  auto stream = (*engine)->Submit(request);
  ASSERT_TRUE(stream.ok()) << stream.message();
  const testing::StreamOutput reply = testing::CollectStream(**stream, std::chrono::seconds(120));
  ASSERT_EQ(reply.finish_reason, FinishReason::kStop) << reply.text;
  EXPECT_NE(reply.text.find("Tokyo"), std::string::npos) << reply.text;
  // The token the engine stopped on: the plain decode loop, told not to stop, one token further.
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  const std::vector<int32_t> longer =
      testing::ReferenceGenerate(*m.loaded.model, *m.loaded.tokenizer, request.prompt,
                                 static_cast<int>(reply.tokens.size()) + 1, greedy,
                                 /*ignore_eos=*/true, 512);
  ASSERT_EQ(longer.size(), reply.tokens.size() + 1);
  EXPECT_TRUE(std::equal(reply.tokens.begin(), reply.tokens.end(), longer.begin()));
  EXPECT_EQ(longer.back(), 2) << "reply: " << reply.text;  // <|im_end|>
}

INSTANTIATE_TEST_SUITE_P(Models, RealModelChat, ::testing::Values("smollm2-135m", "gemma3-270m"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace kvserve
