// `kvserve chat`'s reply display (src/cli/chat_display.cc): gpt-oss's harmony channels and Gemma
// 4's thought blocks shown as reasoning and answer, on a terminal and through a pipe, whatever the
// pieces' boundaries; other templates' text as written; malformed harmony kept as the answer.
#include "cli/chat_display.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

namespace kvserve {
namespace {

std::string ReadAll(FILE* f) {
  std::rewind(f);
  std::string s;
  char buf[256];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  return s;
}

struct Shown {
  std::string out, err, content, reasoning;
};

// Shows `reply` cut into pieces of `piece` bytes.
Shown Show(ToolFormat format, bool terminal, const std::string& reply, size_t piece) {
  FILE* out = std::tmpfile();
  FILE* err = std::tmpfile();
  Shown shown;
  {
    ChatDisplay display(format, out, err, terminal);
    for (size_t i = 0; i < reply.size(); i += piece) display.Show(reply.substr(i, piece), false);
    display.Show("", true);
    shown.content = display.content();
    shown.reasoning = display.reasoning();
  }
  shown.out = ReadAll(out);
  shown.err = ReadAll(err);
  std::fclose(out);
  std::fclose(err);
  return shown;
}

const std::string kReply =
    "<|channel|>analysis<|message|>The user greets; answer briefly.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>Hello! How can I help?";

TEST(ChatDisplay, HarmonyThroughAPipeAnswersOnStdoutAndThinksOnStderr) {
  for (size_t piece : {1u, 3u, 7u, 1000u}) {
    const Shown s = Show(ToolFormat::kHarmony, false, kReply, piece);
    EXPECT_EQ(s.out, "Hello! How can I help?") << piece;
    EXPECT_EQ(s.err, "The user greets; answer briefly.\n") << piece;
    EXPECT_EQ(s.content, "Hello! How can I help?") << piece;
    EXPECT_EQ(s.reasoning, "The user greets; answer briefly.") << piece;
  }
}

TEST(ChatDisplay, HarmonyOnATerminalShowsTheReasoningDim) {
  const Shown s = Show(ToolFormat::kHarmony, true, kReply, 5);
  EXPECT_EQ(s.out, "\033[2mThe user greets; answer briefly.\033[0m\nHello! How can I help?");
  EXPECT_EQ(s.err, "");
  // A reply cut off while thinking still leaves the terminal's colours as they were.
  const Shown cut = Show(ToolFormat::kHarmony, true, "<|channel|>analysis<|message|>Let me", 4);
  EXPECT_EQ(cut.out, "\033[2mLet me\033[0m");
}

TEST(ChatDisplay, Gemma4ThoughtIsTheReasoning) {
  const std::string reply = "<|channel>thought\nThe user greets.<channel|>Hi! What can I do?";
  for (size_t piece : {1u, 4u, 1000u}) {
    const Shown s = Show(ToolFormat::kGemma4, false, reply, piece);
    EXPECT_EQ(s.out, "Hi! What can I do?") << piece;
    EXPECT_EQ(s.reasoning, "The user greets.") << piece;
    EXPECT_EQ(s.err, "The user greets.\n") << piece;
  }
}

TEST(ChatDisplay, OtherTemplatesAndMalformedHarmonyStayAsWritten) {
  const Shown plain = Show(ToolFormat::kHermes, false, kReply, 4);
  EXPECT_EQ(plain.out, kReply);
  EXPECT_EQ(plain.content, "");
  // No header: harmony's parser keeps the text as the answer, markup included.
  const std::string broken = "Hi there <|end|> and more";
  const Shown s = Show(ToolFormat::kHarmony, false, broken, 2);
  EXPECT_EQ(s.out, broken);
  EXPECT_EQ(s.content, broken);
  EXPECT_EQ(s.reasoning, "");
}

}  // namespace
}  // namespace kvserve
