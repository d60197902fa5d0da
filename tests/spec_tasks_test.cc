// The speculative bench's tasks (cli/spec_tasks.h): --spec-task names, and prompts that hold what
// the answer is to quote (the chat tasks rendered with the model's template, the raw ones as text).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/spec_tasks.h"
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
  EXPECT_FALSE(SpecTaskPrompt("poem", 0, **tokenizer, *chat).ok());
}

}  // namespace
}  // namespace kvserve
