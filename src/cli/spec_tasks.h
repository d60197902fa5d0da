// The speculative bench's tasks (`kvserve bench --spec-task`): what a request asks, as a chat
// conversation rendered with the model's template, or as raw text. Tasks whose answer repeats
// spans of the prompt (the grounded ones) against free generation as the control. The texts are
// written for this project (no outside licence).
//   grounded   raw text: a short story, then "the same story again" (what prompt lookup drafts)
//   extract    chat: a product notice; list every date, price and name in it, quoting it
//   code       chat: a Python file; return the whole file with one function renamed
//   multiturn  chat: two earlier turns; repeat the first answer's list with one item added
//   free       raw text: a story opening, continued freely (the control)
//   story      chat: write a new short story on a topic (the control as a chat request)
#pragma once

#include <string>
#include <vector>

#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "util/status.h"

namespace kvserve {

// "grounded, extract, code, multiturn, free".
std::string SpecTaskNames();
// Every task, grounded and controls (--spec-task all).
std::vector<std::string> AllSpecTasks();
// The tasks --spec-task names: "both" (grounded, free), "all", or TASK[,TASK...]; an error names
// the unknown one.
Result<std::vector<std::string>> ParseSpecTasks(const std::string& value);
// Whether `task` is a chat task (extract, code, multiturn, story).
bool IsChatSpecTask(const std::string& task);
// A chat task's conversation for request i (two variants, alternating), for other servers too
// (`kvserve bench --spec-print-tasks` prints them as JSON).
std::vector<ChatMessage> SpecTaskChat(const std::string& task, int i);
// Request i's prompt ids for `task` (texts rotate with i); chat tasks use `chat`'s rendering.
Result<std::vector<int32_t>> SpecTaskPrompt(const std::string& task, int i,
                                            const Tokenizer& tokenizer, const ChatTemplate& chat);

}  // namespace kvserve
