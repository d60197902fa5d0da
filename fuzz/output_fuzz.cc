// libFuzzer harness for what the server does with a model's output: the chat output parser
// (reasoning split from <think> blocks, tool calls of every family's format) on arbitrary text.
// The first byte picks the options (tool format: none, Hermes, Llama 3, Mistral; reasoning split;
// a prompt that opens <think>; parallel calls; Qwen's XML calls; gpt-oss's harmony; Gemma 4's
// thought channel and calls, with its calls parsed when bit 0 is set), the rest is the output.
// For any input:
// - the reasoning, content and calls do not depend on how the text is cut into pieces (whole, and
//   pieces of every size from 1 to 7, as tokens arrive);
// - every call has a non-empty name and arguments that are a JSON object's compact text, and a
//   call id of the family's form; without parallel calls there is at most one call;
// - without a tool format nothing is a call, and without the reasoning split nothing is
//   reasoning: the content is then the text itself.
// Any violation aborts. Build: scripts/fuzz.sh configures build-fuzz/; then
//   ninja -C build-fuzz output_fuzz && build-fuzz/fuzz/output_fuzz -max_total_time=60
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "server/chat_output.h"

namespace {

using kvserve::ChatOutputDelta;
using kvserve::ChatOutputOptions;
using kvserve::ChatOutputParser;
using kvserve::ToolFormat;

void Check(bool ok, const char* what, const std::string& detail = "") {
  if (ok) return;
  std::fprintf(stderr, "output_fuzz: invariant broken: %s: %s\n", what, detail.c_str());
  std::abort();
}

// Everything a parser gave for one way of cutting the text; call ids are random, so only their
// form is kept.
struct Parsed {
  std::string reasoning, content;
  std::vector<std::string> calls;  // name + "\n" + arguments

  bool operator==(const Parsed&) const = default;
};

void Add(const ChatOutputDelta& delta, ToolFormat format, Parsed& out) {
  out.reasoning += delta.reasoning;
  out.content += delta.content;
  for (const kvserve::ParsedToolCall& call : delta.calls) {
    Check(!call.name.empty(), "a call has a name");
    const auto arguments = nlohmann::ordered_json::parse(call.arguments, nullptr, false);
    Check(arguments.is_object() && arguments.dump() == call.arguments,
          "a call's arguments are a JSON object's compact text", call.arguments);
    const size_t id_size = format == ToolFormat::kMistral ? 9 : 5 + 24;
    Check(call.id.size() == id_size, "a call id of the family's form", call.id);
    out.calls.push_back(call.name + "\n" + call.arguments);
  }
}

Parsed Run(const ChatOutputOptions& options, std::string_view text, size_t piece) {
  ChatOutputParser parser(options);
  Parsed out;
  for (size_t at = 0; at < text.size(); at += piece) {
    Add(parser.Push(text.substr(at, piece)), options.tool_format, out);
  }
  Add(parser.Finish(), options.tool_format, out);
  Check(parser.n_calls() == static_cast<int>(out.calls.size()), "n_calls counts the calls");
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  constexpr ToolFormat kFormats[] = {ToolFormat::kNone, ToolFormat::kHermes, ToolFormat::kLlama3,
                                     ToolFormat::kMistral};
  // Qwen's XML calls (bit 32), with a schema that makes parameter "s" of tool "f" a string;
  // gpt-oss's harmony messages (bit 64); Gemma 4's output (bit 128).
  const bool xml = (mode & 32) != 0;
  const bool harmony = (mode & 64) != 0;
  const bool gemma4 = !harmony && (mode & 128) != 0;
  const ChatOutputOptions options{
      .split_reasoning = (mode & 4) != 0,
      .prompt_opens_think = (mode & 8) != 0,
      .harmony = harmony,
      .gemma4 = gemma4,
      .tool_format = harmony  ? ToolFormat::kHarmony
                     : gemma4 ? ((mode & 1) != 0 ? ToolFormat::kGemma4 : ToolFormat::kNone)
                     : xml    ? ToolFormat::kQwenXml
                              : kFormats[mode & 3],
      .parallel_tool_calls = (mode & 16) != 0,
      .tools = {{"f", R"({"type": "function", "function": {"name": "f", "parameters": )"
                      R"({"type": "object", "properties": {"s": {"type": "string"}}}}})"}}};
  const Parsed whole = Run(options, text, text.size() + 1);
  for (size_t piece = 1; piece <= 7; ++piece) {
    Check(Run(options, text, piece) == whole, "the output does not depend on how it is cut",
          "piece " + std::to_string(piece));
  }
  if (!options.parallel_tool_calls) Check(whole.calls.size() <= 1, "one call without parallel");
  if (options.tool_format == ToolFormat::kNone) Check(whole.calls.empty(), "no format, no calls");
  if (!options.split_reasoning) Check(whole.reasoning.empty(), "no split, no reasoning");
  if (options.tool_format == ToolFormat::kNone && !options.split_reasoning) {
    Check(whole.content == text, "nothing to parse: the content is the text");
  }
  return 0;
}
