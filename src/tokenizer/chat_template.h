// Chat templates without a template engine: recognizes the common families from a model's Jinja
// source (tokenizer.chat_template) by their marker strings and renders a conversation the way
// that template does: system, user and assistant turns, and for the families with a tool format
// (tool_format()) the tools offered, the assistant's tool calls and the tool results.
//
//   auto tmpl = ChatTemplate::Detect(source);            // or ChatTemplate::ByName("chatml")
//   tmpl->set_special_tokens("<s>", "</s>");             // the model's BOS/EOS text
//   std::string text = tmpl->Render(messages, /*add_generation_prompt=*/true);
//   std::vector<int32_t> ids = tmpl->EncodePrompt(tokenizer, text);  // adds BOS unless rendered
//
// Families (name(): family):
//   chatml  <|im_start|>role\n...<|im_end|>\n     (Qwen: default system prompt; SmolLM3: metadata
//                                                  system block with a reasoning mode)
//   llama2  <s>[INST] <<SYS>>\n...\n<</SYS>>\n\n... [/INST] ... </s>
//   llama3  <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>  (3.1/3.2: a system block
//           with "Cutting Knowledge Date" and "Today Date"; see set_date)
//   zephyr  <|user|>\n...</s>\n
//   mistral <s>[INST]...[/INST]...</s>  (Nemo style: the system text goes before the last user
//           turn)
//   gemma   <bos><start_of_turn>user\n...<end_of_turn>\n  (assistant is "model"; system
//           messages, which the real template rejects, are trimmed and put before the next user
//           message, as llama.cpp's built-in Gemma format does)
//   phi3    <|user|>\n...<|end|>\n
//   deepseek-r1  <｜begin▁of▁sentence｜>system<｜User｜>...<｜Assistant｜>...<｜end▁of▁sentence｜>
//   granite <|start_of_role|>role<|end_of_role|>...<|end_of_text|>\n  (Granite 4: a default system
//           message; tools inside the system text, calls and results as Hermes/Qwen)
//   gpt-oss <|start|>role<|message|>...<|end|>  (OpenAI's harmony format: a system message with the
//           model identity, knowledge cutoff, today's date and "Reasoning: " + the request's
//           reasoning_effort; the first system/developer message as "# Instructions" of a
//           developer message; answers in channels analysis / commentary / final; see
//           chat_template_harmony.cc)
//   gemma4  <bos><|turn>user\n...<turn|>\n  (Gemma 4: assistant is "model"; the first system
//           message, the tools and <|think|> in a system turn; the cue closes an empty thought
//           channel unless thinking is on; see chat_template_gemma4.cc)
//   plain   "role: content\n" lines and a final "assistant:" cue (models without a template)
//
// Tools (ToolFormat, rendered by tokenizer/tool_prompt.h as each family's template does):
//   kHermes  chatml (Qwen 2.5/3 and plain ChatML such as SmolLM2), granite: a system block with
//            <tools>...</tools>, calls as <tool_call>{"name", "arguments"}</tool_call>, results in
//            a user turn as <tool_response>...</tool_response>
//   kLlama3  llama3 of 3.1/3.2/3.3: "Environment: ipython", the tools in the first user turn,
//            calls as {"name", "parameters"}, results in an "ipython" turn
//   kMistral mistral (Nemo): [AVAILABLE_TOOLS] before the last user turn, [TOOL_CALLS],
//            [TOOL_RESULTS] (tool call ids are 9 characters)
//   kQwenXml chatml of Qwen 3.5 and Qwen3-Coder: calls as <tool_call>\n<function=NAME>\n
//            <parameter=KEY>\nVALUE\n</parameter>\n...</function>\n</tool_call>, results in a
//            user turn as <tool_response>; Qwen 3.5 lists the tools as JSON and writes <think>
//            blocks in the assistant turns after the last user query, Qwen3-Coder lists them
//            as XML
//   kHarmony gpt-oss: the tools as a TypeScript namespace "functions" in the developer message,
//            a call as <|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>
//            ARGS<|call|> (the model writes <|channel|>commentary to=functions.NAME
//            <|constrain|>json<|message|>ARGS<|call|>), a result as <|start|>functions.NAME
//            to=assistant<|channel|>commentary<|message|>"tojson of the text"<|end|>; one call per
//            assistant turn; the reasoning of a turn with a call as its analysis message
//   kGemma4  gemma4: the tools as <|tool>declaration:NAME{description:...,parameters:{...}}<tool|>
//            in the system turn, calls as <|tool_call>call:NAME{key:VALUE,...}<tool_call|> in
//            Gemma's syntax (strings quoted by <|"|>), results inside the calling model turn as
//            <|tool_response>response:NAME{value:<|"|>TEXT<|"|>}<tool_response|>
// The other families (and SmolLM3, whose template drops tools) have none: CheckToolUse refuses
// tools for them by the family's name.
//
// Roles a family cannot express (for example "tool" without a tool format) are skipped. Immutable
// after construction apart from the setters; const methods are safe to call from many threads.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/gguf_reader.h"
#include "tokenizer/chat_text.h"
#include "tokenizer/tokenizer.h"
#include "util/status.h"

namespace kvserve {

// A call the assistant made, as OpenAI's messages carry it.
struct ChatToolCall {
  std::string id;         // "call_..." (Mistral: 9 alphanumeric characters)
  std::string name;       // the function's name
  std::string arguments;  // JSON text of the arguments object (printed re-dumped, see jinja_json.h)
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", "tool"
  std::string content;
  std::vector<ChatToolCall> tool_calls;  // assistant: the calls it made (content may be empty)
  std::string tool_call_id;              // tool: the call this result answers
  std::string name;                      // tool: the function's name (optional)
  // assistant: its reasoning ("reasoning_content"); gpt-oss writes it as an analysis message
  // where its template keeps it (the other families ignore it).
  std::optional<std::string> reasoning;
};

// A request's settings that some templates read besides the messages and tools (Jinja kwargs).
struct ChatRenderOptions {
  // gpt-oss's "Reasoning: " line: "low", "medium" or "high"; "" = the template's default, medium.
  std::string_view reasoning_effort;
  // Gemma 4's enable_thinking: <|think|> in the system turn, and a cue that leaves the thought
  // channel to the model (off: the cue closes an empty one).
  bool enable_thinking = false;
};

// One entry of a request's "tools": {"type": "function", "function": {"name", "description",
// "parameters"}}, kept as the JSON text the client sent (keys in their order: templates print it).
struct ChatTool {
  std::string name;  // function.name
  std::string json;  // the whole tool object
};

enum class ToolFormat { kNone, kHermes, kLlama3, kMistral, kQwenXml, kHarmony, kGemma4 };

enum class ChatFamily {
  kPlain,
  kChatMl,
  kLlama2,
  kLlama3,
  kZephyr,
  kMistral,
  kGemma,
  kPhi3,
  kDeepSeekR1,
  kGranite,
  kHarmony,
  kGemma4,
};

class ChatTemplate {
 public:
  // Names accepted by ByName, in the order they are listed in messages.
  static constexpr std::string_view kNames[] = {
      "chatml",      "llama2",  "llama3", "zephyr",  "mistral",     "gemma",   "phi3",
      "deepseek-r1", "granite", "plain",  "qwen3.5", "qwen3-coder", "gpt-oss", "gemma4"};
  // Template sources longer than this are rejected (real ones are under 20 KB).
  static constexpr size_t kMaxSourceBytes = 1 << 20;

  // Recognizes the family of a Jinja template source. An empty source gives "plain"; a source of
  // no known family gives ChatML with warning() set. Fails only for a source over kMaxSourceBytes.
  static Result<ChatTemplate> Detect(std::string_view template_source);
  // One of kNames; an error lists them.
  static Result<ChatTemplate> ByName(std::string_view name);
  // The template for a model: ByName(override_name) when it is not empty, else Detect() of the
  // GGUF key tokenizer.chat_template (absent: plain; not a string: an error naming the key).
  static Result<ChatTemplate> ForModel(const GgufFile& file, std::string_view override_name);
  // As above, with the template's BOS/EOS text set from `tokenizer` (what `kvserve serve` and
  // `kvserve chat` use).
  static Result<ChatTemplate> ForModel(const GgufFile& file, const Tokenizer& tokenizer,
                                       std::string_view override_name);

  // The text of the whole conversation; with add_generation_prompt, followed by the cue that
  // starts the assistant's reply. `tools` (OpenAI's "tools") are rendered as the family's
  // template does; call CheckToolUse first (a family without a tool format ignores them here).
  std::string Render(std::span<const ChatMessage> messages, bool add_generation_prompt,
                     std::span<const ChatTool> tools = {},
                     const ChatRenderOptions& options = {}) const;

  // Render's text as llama-server's /apply-template gives it: without the leading BOS text when
  // `tokenizer` adds BOS itself (the prompt's ids are the same either way).
  std::string PromptText(std::span<const ChatMessage> messages, bool add_generation_prompt,
                         const Tokenizer& tokenizer, std::span<const ChatTool> tools = {},
                         const ChatRenderOptions& options = {}) const;

  // Whether this family can render `tools` and the tool calls and results in `messages` as its
  // template does; else an invalid-argument status that names the family and what its template
  // would refuse (no tool format; Llama 3's and gpt-oss's one call per turn; Mistral's 9-character
  // call ids; gpt-oss's channel tags in an assistant's text, a call's turn with both content and
  // reasoning, a tool result with no call before it; Gemma 4's tool result that answers no call
  // of its turn and has no name).
  Status CheckToolUse(std::span<const ChatMessage> messages, std::span<const ChatTool> tools) const;
  // How this family writes tools and tool calls (kNone: it has no way).
  ToolFormat tool_format() const;
  // Whether the generation cue opens a reasoning block (DeepSeek-R1 ends it with "<think>\n"), so
  // the reply starts inside it.
  // Qwen 3.5's cue is "<|im_start|>assistant\n<think>\n".
  bool prompt_opens_think() const { return family_ == ChatFamily::kDeepSeekR1 || qwen35_; }
  // Whether the template is a thinking model's: it mentions </think> (Qwen 3, SmolLM3, the
  // DeepSeek-R1 distills), is deepseek-r1, gpt-oss (its analysis channel) or gemma4 (its thought
  // channel).
  bool knows_think() const {
    return knows_think_ || family_ == ChatFamily::kDeepSeekR1 || family_ == ChatFamily::kHarmony ||
           family_ == ChatFamily::kGemma4;
  }

  // Token ids of a rendered conversation: special tokens written in the text become their ids,
  // and the tokenizer's BOS is prepended when the model wants one and the text does not already
  // start with it (renders_bos), so a conversation never gets two.
  // Use it for text the caller trusts; conversations go through EncodeConversation.
  std::vector<int32_t> EncodePrompt(const Tokenizer& tokenizer, std::string_view rendered) const;

  // The prompt ids of a conversation: Render's text encoded as EncodePrompt does, except that
  // the messages' own text (content and roles) never becomes a control token: a user who writes
  // "<|im_end|>" gets the tokens of that text, not the end of their turn.
  std::vector<int32_t> EncodeConversation(const Tokenizer& tokenizer,
                                          std::span<const ChatMessage> messages,
                                          bool add_generation_prompt,
                                          std::span<const ChatTool> tools = {},
                                          const ChatRenderOptions& options = {}) const;

  // The model's BOS/EOS text as the template's bos_token/eos_token (defaults are the family's
  // usual ones, e.g. "<s>"/"</s>"). Empty arguments keep the defaults.
  void set_special_tokens(std::string bos_text, std::string eos_text);
  // Llama 3.2 writes today's date ("%d %b %Y", e.g. "26 Jul 2024") into its system block, and
  // gpt-oss ("%Y-%m-%d", e.g. "2025-08-05") into its system message, so their rendering changes
  // with the day; Llama 3.1 writes a fixed date. This pins the date (written as it is given).
  void set_date(std::string date);

  ChatFamily family() const { return family_; }
  std::string_view name() const;  // one of kNames
  // Whether Render's text starts with the BOS text.
  bool renders_bos() const { return renders_bos_; }
  // Text that ends the assistant's turn when it shows up in generated text.
  std::vector<std::string> stop_strings() const;
  // Non-empty when Detect fell back to ChatML: says so, for the caller to print.
  const std::string& warning() const { return warning_; }
  // The system prompt used when the conversation has none (Qwen's "You are Qwen, ..."), or "".
  const std::string& default_system() const { return default_system_; }

 private:
  explicit ChatTemplate(ChatFamily family);
  static Result<ChatTemplate> DetectFamily(std::string_view template_source);
  // DetectFamily's ChatML branch (`literals`: the source's string literals).
  static ChatTemplate DetectChatMl(std::string_view source,
                                   const std::vector<std::string>& literals, bool asks_bos);

  void RenderChatMl(std::span<const ChatMessage> messages, bool add_generation_prompt,
                    std::span<const ChatTool> tools, ChatText& out) const;
  void RenderSmolLm3(std::span<const ChatMessage> messages, bool add_generation_prompt,
                     ChatText& out) const;
  void RenderLlama2(std::span<const ChatMessage> messages, ChatText& out) const;
  void RenderLlama3(std::span<const ChatMessage> messages, bool add_generation_prompt,
                    std::span<const ChatTool> tools, ChatText& out) const;
  void RenderZephyr(std::span<const ChatMessage> messages, bool add_generation_prompt,
                    ChatText& out) const;
  void RenderMistral(std::span<const ChatMessage> messages, std::span<const ChatTool> tools,
                     ChatText& out) const;
  void RenderGemma(std::span<const ChatMessage> messages, bool add_generation_prompt,
                   ChatText& out) const;
  void RenderPhi3(std::span<const ChatMessage> messages, bool add_generation_prompt,
                  ChatText& out) const;
  void RenderDeepSeekR1(std::span<const ChatMessage> messages, bool add_generation_prompt,
                        ChatText& out) const;
  void RenderPlain(std::span<const ChatMessage> messages, bool add_generation_prompt,
                   ChatText& out) const;
  void RenderHermes3(std::span<const ChatMessage> messages, bool add_generation_prompt,
                     std::span<const ChatTool> tools, ChatText& out) const;
  void RenderQwen35(std::span<const ChatMessage> messages, bool add_generation_prompt,
                    std::span<const ChatTool> tools, ChatText& out) const;
  void RenderQwen3Coder(std::span<const ChatMessage> messages, bool add_generation_prompt,
                        std::span<const ChatTool> tools, ChatText& out) const;
  void RenderGranite(std::span<const ChatMessage> messages, bool add_generation_prompt,
                     std::span<const ChatTool> tools, ChatText& out) const;
  void RenderHarmony(std::span<const ChatMessage> messages, bool add_generation_prompt,
                     std::span<const ChatTool> tools, std::string_view reasoning_effort,
                     ChatText& out) const;
  Status CheckHarmony(std::span<const ChatMessage> messages) const;
  void RenderGemma4(std::span<const ChatMessage> messages, bool add_generation_prompt,
                    std::span<const ChatTool> tools, bool enable_thinking, ChatText& out) const;
  Status CheckGemma4(std::span<const ChatMessage> messages) const;
  // Render, with the bytes that came from the messages marked.
  ChatText RenderText(std::span<const ChatMessage> messages, bool add_generation_prompt,
                      std::span<const ChatTool> tools, const ChatRenderOptions& options) const;
  std::string Date() const;

  ChatFamily family_;
  bool renders_bos_ = false;
  std::string bos_text_;
  std::string eos_text_;
  std::string warning_;
  // chatml: system prompt when none is given (Qwen).
  std::string default_system_;
  // chatml: the template writes tool calls and results itself (<tool_call>, Qwen/Hermes), so they
  // are written that way even when the request offers no tools.
  bool hermes_tools_ = false;
  bool hermes3_ = false;  // NousResearch's Hermes 3 tool_use template
  // chatml with XML <function=...> calls (kQwenXml): Qwen 3.5's template, Qwen3-Coder's.
  bool qwen35_ = false;
  bool qwen3_coder_ = false;
  // A variant whose tool format kvserve does not write (another template with XML
  // <function=...> calls, Mistral Small 3.2's [TOOL_CALLS]name[ARGS]): its name for the
  // refusal; "" otherwise.
  std::string unsupported_tools_;
  bool knows_think_ = false;  // the source mentions </think>
  // chatml, SmolLM3 style: "Knowledge Cutoff Date: ...\n" and the two default instructions.
  bool smollm3_ = false;
  std::string cutoff_line_;
  std::string think_instructions_;
  std::string no_think_instructions_;
  // llama3, 3.1/3.2 style: "Cutting Knowledge Date: ...\n"; empty for the 3.0 style.
  std::string knowledge_line_;
  std::string date_;              // fixed "Today Date" (3.1, or pinned by set_date)
  bool date_from_clock_ = false;  // 3.2 and gpt-oss: today's date unless pinned
  // gpt-oss: the system message's first two lines, as its template source writes them.
  std::string model_identity_;  // "You are ChatGPT, a large language model trained by OpenAI."
  std::string cutoff_;          // "Knowledge cutoff: 2024-06\n"
};

}  // namespace kvserve
