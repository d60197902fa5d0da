// The speculative bench's tasks (cli/spec_tasks.h): --spec-task names, prompts that hold what the
// answer is to quote (the chat tasks rendered with the model's template, the raw ones as text),
// and `bench --spec-print-tasks`.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/spec_tasks.h"
#include "support/cli.h"
#include "support/reference_runs.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace kvserve {
namespace {

TEST(SpecTasks, NamesParseAndUnknownOnesAreRefusedByName) {
  EXPECT_EQ(*ParseSpecTasks("both"), (std::vector<std::string>{"grounded", "free"}));
  EXPECT_EQ(*ParseSpecTasks("all"), AllSpecTasks());
  EXPECT_EQ(*ParseSpecTasks("code,multiturn"), (std::vector<std::string>{"code", "multiturn"}));
  auto bad = ParseSpecTasks("code,poem");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("'poem' is not one of grounded, extract, code, multiturn, free"),
            std::string::npos)
      << bad.message();
}

TEST(SpecTasks, ChatPromptsAreRenderedAndHoldTheTextToQuote) {
  auto model = testing::LoadOrDie("stories260K.gguf");
  ASSERT_NE(model, nullptr);
  auto tokenizer = Tokenizer::FromGguf(model->file());
  ASSERT_TRUE(tokenizer.ok());
  auto chat = ChatTemplate::ByName("chatml");
  ASSERT_TRUE(chat.ok()) << chat.message();
  auto text = [&](const std::string& task, int i) {
    auto ids = SpecTaskPrompt(task, i, **tokenizer, *chat);
    EXPECT_TRUE(ids.ok()) << task;
    return ids.ok() ? (*tokenizer)->Decode(*ids) : std::string();
  };
  EXPECT_NE(text("extract", 0).find("<|im_start|>user"), std::string::npos);
  EXPECT_NE(text("extract", 0).find("149.00 euros"), std::string::npos);
  EXPECT_NE(text("extract", 1).find("Priya Nair"), std::string::npos);
  EXPECT_NE(text("code", 0).find("def total_price(items):"), std::string::npos);
  EXPECT_NE(text("code", 0).find("Rename the function total_price to cart_total"),
            std::string::npos);
  EXPECT_NE(text("multiturn", 1).find("<|im_start|>assistant\n1. Rain jacket"), std::string::npos);
  EXPECT_EQ(text("grounded", 0).find("<|im_start|>"), std::string::npos);  // raw text
  EXPECT_NE(text("grounded", 0).find("word for word"), std::string::npos);
  // The chat control asks for new text: nothing in it to quote.
  EXPECT_NE(text("story", 1).find("<|im_start|>user\nWrite a short new story about two friends"),
            std::string::npos);
  EXPECT_FALSE(SpecTaskPrompt("poem", 0, **tokenizer, *chat).ok());
}

// `kvserve bench --spec-print-tasks`: the chat tasks' conversations for other servers, no model
// needed.
TEST(SpecTasks, PrintTasksGivesEachChatTasksConversationsAsJson) {
  std::string out, err;
  ASSERT_EQ(testing::RunKvserve("bench --spec-print-tasks", &out, &err), 0) << err;
  const nlohmann::json tasks = nlohmann::json::parse(out);
  for (const char* task : {"extract", "code", "multiturn", "story"}) {
    ASSERT_TRUE(tasks.contains(task)) << task;
    ASSERT_EQ(tasks[task].size(), 2u) << task;
    for (int i = 0; i < 2; ++i) {
      const std::vector<ChatMessage> want = SpecTaskChat(task, i);
      ASSERT_EQ(tasks[task][i].size(), want.size());
      for (size_t m = 0; m < want.size(); ++m) {
        EXPECT_EQ(tasks[task][i][m]["role"], want[m].role);
        EXPECT_EQ(tasks[task][i][m]["content"], want[m].content);
      }
    }
  }
  EXPECT_FALSE(tasks.contains("free"));
}

}  // namespace
}  // namespace kvserve
