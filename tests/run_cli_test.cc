// The `kvserve run`, `info` and `logits` commands as a user runs them: output formats, the cache
// switch, batch files, and one clear error line for bad input.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "support/paths.h"

namespace kvserve {
namespace {

struct Output {
  int status = -1;
  std::string out;
};

// Runs a shell command; stdout (and stderr when merged) captured.
Output Shell(const std::string& command) {
  Output result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    result.out.append(buffer.data(), n);
  result.status = pclose(pipe);
  return result;
}

std::string Kvserve() { return testing::KvserveBinary(); }
std::string Stories() { return testing::ModelPath("stories260K.gguf"); }

TEST(RunCommand, TextModePrintsTheStoryLlamaCppPrints) {
  const Output o = Shell(Kvserve() + " run -m " + Stories() +
                         " -p 'Once upon a time' -n 32 --temp 0 -t 1 2>/dev/null");
  ASSERT_EQ(o.status, 0);
  EXPECT_EQ(
      o.out.rfind("Once upon a time, there was a little girl named Lily. She loved to play", 0), 0u)
      << o.out;
}

// --context-overflow shift: 4x the context of stories260K (128), the same tokens as plain
// generation until the context fills, and --no-cache (recomputing everything each step) gives
// the same tokens across the shifts.
TEST(RunCommand, ContextShiftGeneratesPastTheContext) {
  const std::string base = Kvserve() + " run -m " + Stories() +
                           " -p 'Once upon a time' --temp 0 --ignore-eos -t 1 "
                           "--output-format json";
  const Output plain = Shell(base + " -n 512 2>/dev/null");
  const Output shifted = Shell(base + " -n 512 --context-overflow shift 2>/dev/null");
  const Output recomputed = Shell(base + " -n 512 --context-overflow shift --no-cache 2>/dev/null");
  ASSERT_EQ(plain.status, 0);
  ASSERT_EQ(shifted.status, 0) << shifted.out;
  ASSERT_EQ(recomputed.status, 0) << recomputed.out;
  const auto p = nlohmann::json::parse(plain.out);
  const auto s = nlohmann::json::parse(shifted.out);
  const auto r = nlohmann::json::parse(recomputed.out);
  ASSERT_EQ(p["tokens"].size(), 123u);  // 128 - 5 prompt tokens
  EXPECT_FALSE(p.contains("truncated"));
  ASSERT_EQ(s["tokens"].size(), 512u);
  EXPECT_EQ(s["finish_reason"], "length");
  EXPECT_EQ(s["truncated"], true);
  EXPECT_GT(s["dropped_tokens"].get<int>(), 3 * 128);
  EXPECT_GE(s["context_shifts"].get<int>(), 6);
  for (size_t i = 0; i < 123; ++i) EXPECT_EQ(s["tokens"][i], p["tokens"][i]) << i;
  EXPECT_EQ(r["tokens"], s["tokens"]);
  // The same request in a batch file, next to one that does not shift.
  const std::string path = testing::TempDir() + "/shift.jsonl";
  std::ofstream(path) << R"({"id":"s","prompt":"Once upon a time","max_tokens":512,)"
                      << R"("temperature":0,"ignore_eos":true,"context_overflow":"shift"})"
                      << "\n"
                      << R"({"id":"p","prompt":"Once upon a time","max_tokens":16,)"
                      << R"("temperature":0})"
                      << "\n";
  const Output batch =
      Shell(Kvserve() + " run -m " + Stories() + " --batch-file " + path + " -t 1 2>/dev/null");
  ASSERT_EQ(batch.status, 0) << batch.out;
  const auto lines = batch.out.find('\n');
  const auto first = nlohmann::json::parse(batch.out.substr(0, lines));
  const auto second = nlohmann::json::parse(batch.out.substr(lines + 1));
  EXPECT_EQ(first["tokens"], s["tokens"]);
  EXPECT_EQ(first["truncated"], true);
  EXPECT_EQ(first["dropped_tokens"], s["dropped_tokens"]);
  EXPECT_FALSE(second.contains("truncated"));
  // A prompt longer than the context: refused, or cut to its head and end.
  std::string ids = "1";
  for (int i = 0; i < 200; ++i) ids += "," + std::to_string(100 + i);
  const Output refused =
      Shell(Kvserve() + " run -m " + Stories() + " --prompt-tokens " + ids + " -n 4 --temp 0 2>&1");
  EXPECT_NE(refused.status, 0);
  EXPECT_NE(refused.out.find("exceeds the context size 128"), std::string::npos) << refused.out;
  const Output cut = Shell(Kvserve() + " run -m " + Stories() + " --prompt-tokens " + ids +
                           " -n 4 --temp 0 --context-overflow shift --output-format json");
  ASSERT_EQ(cut.status, 0) << cut.out;
  EXPECT_EQ(nlohmann::json::parse(cut.out)["tokens"].size(), 4u);
}

TEST(RunCommand, JsonModeAndNoCacheGiveTheSameTokens) {
  const std::string base = Kvserve() + " run -m " + Stories() +
                           " -p 'Once upon a time' -n 48 --temp 0.8 --seed 3 -t 2 "
                           "--output-format json";
  const Output cached = Shell(base + " 2>/dev/null");
  const Output uncached = Shell(base + " --no-cache 2>/dev/null");
  ASSERT_EQ(cached.status, 0);
  ASSERT_EQ(uncached.status, 0);
  const auto a = nlohmann::json::parse(cached.out);
  const auto b = nlohmann::json::parse(uncached.out);
  EXPECT_EQ(a["prompt_tokens"], (nlohmann::json{1, 403, 407, 261, 378}));
  EXPECT_EQ(a["tokens"], b["tokens"]);
  EXPECT_EQ(a["text"], b["text"]);
  EXPECT_EQ(a["tokens"].size(), 48u);
  EXPECT_EQ(a["finish_reason"], "length");
  for (const char* key : {"prompt_ms", "decode_ms", "prompt_tokens_per_s", "decode_tokens_per_s"}) {
    EXPECT_TRUE(a["timings"].contains(key)) << key;
  }
  // The GPT-2 architecture too, through the same switch.
  const std::string gpt2 = Kvserve() + " run -m " + testing::ModelPath("gpt2-tiny-f32.gguf") +
                           " --prompt-tokens 464,2068,7586 -n 16 --temp 0 --output-format json";
  EXPECT_EQ(nlohmann::json::parse(Shell(gpt2 + " 2>/dev/null").out)["tokens"],
            nlohmann::json::parse(Shell(gpt2 + " --no-cache 2>/dev/null").out)["tokens"]);
}

TEST(RunCommand, BatchFileAnswersEqualSingleRuns) {
  const std::string path = testing::TempDir() + "/requests.jsonl";
  {
    std::ofstream f(path);
    f << R"({"id":"x","prompt":"Once upon a time","max_tokens":24,"temperature":0})"
      << "\n";
    f << R"({"id":"y","prompt_tokens":[1,403,407],"max_tokens":12,"temperature":0.9,"seed":11})"
      << "\n\n";
    f << R"({"id":"z","prompt":"Once upon a time","max_tokens":24,"temperature":0,"stop":"Lily"})"
      << "\n";
  }
  const Output o = Shell(Kvserve() + " run -m " + Stories() + " --batch-file " + path +
                         " --block-size 4 -t 2 2>&1");
  ASSERT_EQ(o.status, 0) << o.out;
  std::vector<nlohmann::json> lines;
  size_t start = 0;
  while (start < o.out.size()) {
    const size_t end = o.out.find('\n', start);
    lines.push_back(nlohmann::json::parse(o.out.substr(start, end - start)));
    start = end + 1;
  }
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["id"], "x");
  EXPECT_EQ(lines[2]["finish_reason"], "stop");
  EXPECT_EQ(lines[2]["text"], ", there was a little girl named ");
  const auto single = nlohmann::json::parse(
      Shell(Kvserve() + " run -m " + Stories() +
            " -p 'Once upon a time' -n 24 --temp 0 --output-format json 2>/dev/null")
          .out);
  EXPECT_EQ(lines[0]["tokens"], single["tokens"]);
  EXPECT_TRUE(lines[1].contains("cached_tokens"));
}

TEST(RunCommand, BadInputGivesOneLineAndNonZeroExit) {
  const std::vector<std::string> cases = {
      " run -m /nonexistent.gguf -p hi",
      " run -m " + Stories() + " -p hi -n x",
      " run -m " + Stories() + " -p hi --kv-type f8",
      " run -m " + Stories() + " -p hi --bogus",
      " run -m " + Stories() + " --prompt-tokens 1,99999 -n 2",
      " run -m " + Stories() + " -p hi -c 4 -n 8 --prompt-tokens 1,2,3,4,5,6",
      " run -m " + Stories() + " --batch-file /nonexistent.jsonl",
      " logits -m " + Stories() + " --tokens 1,2 --out /tmp/x --mode sideways",
      " info /nonexistent.gguf",
  };
  for (const std::string& args : cases) {
    const Output o = Shell(Kvserve() + args + " 2>&1 >/dev/null");
    EXPECT_NE(o.status, 0) << args;
    ASSERT_FALSE(o.out.empty()) << args;
    EXPECT_EQ(o.out.find('\n'), o.out.size() - 1) << args << " printed: " << o.out;
  }
}

TEST(InfoCommand, ReportsShapesAndKvCacheSize) {
  const Output o = Shell(Kvserve() + " info " + Stories());
  ASSERT_EQ(o.status, 0);
  EXPECT_NE(o.out.find("architecture:  llama"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("heads:         8 (kv heads 4, head dim 8)"), std::string::npos);
  // 2 x 5 layers x 4 kv heads x 8 dims x 4 bytes = 1280 bytes per token.
  EXPECT_NE(o.out.find("KV cache f32:  1280 bytes/token"), std::string::npos);
}

}  // namespace
}  // namespace kvserve
