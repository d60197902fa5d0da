#include "cli/chat_flags.h"

#include "tokenizer/chat_template.h"

namespace kvserve {

Flag ChatTemplateFlag() {
  std::string names;
  for (std::string_view name : ChatTemplate::kNames) {
    names += (names.empty() ? "" : ", ") + std::string(name);
  }
  return {.name = "--chat-template",
          .value_name = "NAME",
          .default_text = "the model's",
          .help = "chat template: " + names};
}

}  // namespace kvserve
