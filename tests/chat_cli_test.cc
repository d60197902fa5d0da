// `kvserve chat` on stories260K (no chat template: the plain layout): two user lines through a
// pipe give two replies; the second turn reuses the first turn's tokens from the cache; and each
// reply is exactly what a fresh runner gives on the whole rendered conversation (the cached,
// turn-by-turn path changes nothing).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "model/model.h"
#include "support/forward.h"
#include "support/paths.h"
#include "support/test_backend.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/tokenizer.h"

namespace kvserve {
namespace {

using ::kvserve::testing::KvserveBinary;
using ::kvserve::testing::ModelPath;
using ::kvserve::testing::TempDir;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `kvserve chat ARGS`, writing `input` to its stdin through a pipe.
CliRun RunChat(const std::string& args, const std::string& input) {
  const std::string dir = TempDir();
  const std::string out_path = dir + "/chat.out";
  const std::string err_path = dir + "/chat.err";
  const std::string command =
      "'" + KvserveBinary() + "' chat " + args + " >'" + out_path + "' 2>'" + err_path + "'";
  CliRun run;
  FILE* pipe = popen(command.c_str(), "w");
  if (pipe == nullptr) return run;
  std::fwrite(input.data(), 1, input.size(), pipe);
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = ReadFile(out_path);
  run.err = ReadFile(err_path);
  return run;
}

struct Report {
  int n_prompt, n_reused, n_computed;
};

std::vector<Report> Reports(const std::string& err) {
  std::vector<Report> reports;
  const std::regex line(R"(\[prompt: (\d+) tokens, (\d+) reused from cache, (\d+) computed\])");
  for (auto it = std::sregex_iterator(err.begin(), err.end(), line); it != std::sregex_iterator();
       ++it) {
    reports.push_back({std::stoi((*it)[1]), std::stoi((*it)[2]), std::stoi((*it)[3])});
  }
  return reports;
}

std::string StripSpace(const std::string& s) {
  const size_t first = s.find_first_not_of(" \t\n\r\v\f");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\n\r\v\f") - first + 1);
}

// The reply a fresh runner gives on the rendered conversation: greedy, max_tokens tokens, the text
// cut at the first stop string.
std::string FreshReply(const Model& model, const Tokenizer& tok, const ChatTemplate& tmpl,
                       const std::vector<ChatMessage>& messages, int max_tokens) {
  const std::vector<int32_t> prompt = tmpl.EncodePrompt(tok, tmpl.Render(messages, true));
  SamplingParams greedy;
  greedy.temperature = 0;
  StreamingDecoder decoder(tok, {.render_special = true, .at_text_start = false});
  std::string text;
  for (int32_t t : testing::ReferenceGenerate(model, tok, prompt, max_tokens, greedy, false,
                                              model.config().n_ctx_train)) {
    text += decoder.Push(t);
  }
  text += decoder.Flush();
  for (const std::string& stop : tmpl.stop_strings()) {
    const size_t at = text.find(stop);
    if (at != std::string::npos) text.resize(at);
  }
  return text;
}

TEST(ChatCliTest, TwoTurnsReuseTheCacheAndMatchAFreshRun) {
  const std::string model_path = ModelPath("stories260K.gguf");
  const std::string user1 = "Tell me about Lily.";
  const std::string user2 = "What did she do next?";
  const CliRun run =
      RunChat("-m '" + model_path + "' --temp 0 -n 16 -t 1", user1 + "\n" + user2 + "\n");
  ASSERT_EQ(run.exit_code, 0) << run.err;

  const std::vector<Report> reports = Reports(run.err);
  ASSERT_EQ(reports.size(), 2u) << run.err;
  EXPECT_EQ(reports[0].n_reused, 0);
  EXPECT_EQ(reports[0].n_computed, reports[0].n_prompt);
  EXPECT_GT(reports[1].n_prompt, reports[0].n_prompt);
  // The whole first turn's prompt is still in the cache (at least).
  EXPECT_GE(reports[1].n_reused, reports[0].n_prompt) << run.err;
  EXPECT_EQ(reports[1].n_reused + reports[1].n_computed, reports[1].n_prompt);

  auto model = LoadModel(model_path, TestBackend());
  ASSERT_TRUE(model.ok()) << model.message();
  auto tokenizer = Tokenizer::FromGguf((*model)->file());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.message();
  auto tmpl = ChatTemplate::ForModel((*model)->file(), "");
  ASSERT_TRUE(tmpl.ok()) << tmpl.message();
  ASSERT_EQ(tmpl->name(), "plain");

  std::vector<ChatMessage> messages = {{"user", user1}};
  const std::string reply1 = FreshReply(**model, **tokenizer, *tmpl, messages, 16);
  EXPECT_EQ(reports[0].n_prompt,
            static_cast<int>(tmpl->EncodePrompt(**tokenizer, tmpl->Render(messages, true)).size()));
  messages.push_back({"assistant", StripSpace(reply1)});
  messages.push_back({"user", user2});
  const std::string reply2 = FreshReply(**model, **tokenizer, *tmpl, messages, 16);
  EXPECT_EQ(reports[1].n_prompt,
            static_cast<int>(tmpl->EncodePrompt(**tokenizer, tmpl->Render(messages, true)).size()));
  ASSERT_FALSE(StripSpace(reply1).empty());
  ASSERT_FALSE(StripSpace(reply2).empty());
  EXPECT_EQ(run.out, reply1 + "\n" + reply2 + "\n");
}

TEST(ChatCliTest, ExitCommandEndsAndSystemPromptCounts) {
  const std::string model_path = ModelPath("stories260K.gguf");
  const CliRun with_system =
      RunChat("-m '" + model_path + "' -t 1 --temp 0 -n 4 --system 'Be kind.'",
              "Hi.\n/exit\nNever read.\n");
  ASSERT_EQ(with_system.exit_code, 0) << with_system.err;
  const std::vector<Report> reports = Reports(with_system.err);
  ASSERT_EQ(reports.size(), 1u) << with_system.err;

  const CliRun without_system = RunChat("-m '" + model_path + "' -t 1 --temp 0 -n 4", "Hi.\n");
  ASSERT_EQ(without_system.exit_code, 0) << without_system.err;
  const std::vector<Report> plain = Reports(without_system.err);
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_GT(reports[0].n_prompt, plain[0].n_prompt);  // "system: Be kind.\n" was rendered
}

// Twenty turns on a context of 128: the oldest turns are dropped (the system message and the
// latest turn stay), replies longer than the context shift, and the chat keeps going. With
// --context-overflow error it stops as it used to.
TEST(ChatCliTest, TwentyTurnsKeepGoingPastTheContext) {
  const std::string model_path = ModelPath("stories260K.gguf");
  std::string input;
  for (int i = 1; i <= 20; ++i)
    input += "Tell me what Lily did on day " + std::to_string(i) + ".\n";
  const std::string flags =
      "-m '" + model_path + "' --temp 0 -n 100 -t 1 --system 'You tell short stories.'";
  const CliRun run = RunChat(flags, input);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::vector<Report> reports = Reports(run.err);
  ASSERT_EQ(reports.size(), 20u) << run.err;
  for (size_t i = 0; i < reports.size(); ++i) {
    // Old turns go so that the prompt leaves min(-n, half the context) for the reply.
    EXPECT_LE(reports[i].n_prompt, 128 - 64) << "turn " << i;
    // The system message stays first: the cache always has at least it.
    if (i > 0) {
      EXPECT_GE(reports[i].n_reused, 8) << "turn " << i;
    }
  }
  EXPECT_NE(run.err.find("oldest messages dropped"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("tokens shifted out"), std::string::npos) << run.err;

  const CliRun strict = RunChat(flags + " --context-overflow error", input);
  EXPECT_EQ(strict.exit_code, 1);
  EXPECT_NE(strict.err.find("exceeds the context size 128"), std::string::npos) << strict.err;
  EXPECT_LT(Reports(strict.err).size(), 20u);
}

TEST(ChatCliTest, BadFlagsAreErrors) {
  const std::string model_path = ModelPath("stories260K.gguf");
  const CliRun bad_template = RunChat("-m '" + model_path + "' --chat-template vicuna", "");
  EXPECT_EQ(bad_template.exit_code, 2);
  EXPECT_NE(bad_template.err.find("'vicuna'"), std::string::npos) << bad_template.err;
  const CliRun bad_n = RunChat("-m '" + model_path + "' -n 0", "");
  EXPECT_EQ(bad_n.exit_code, 2);
  EXPECT_NE(bad_n.err.find("-n"), std::string::npos) << bad_n.err;
  const CliRun no_model = RunChat("", "");
  EXPECT_NE(no_model.exit_code, 0);
}

}  // namespace
}  // namespace kvserve
