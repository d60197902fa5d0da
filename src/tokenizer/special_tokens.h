// The tokens that Encode cuts out of the text before encoding the rest, as llama.cpp's
// special-token partition does: control, user-defined and unknown tokens, longest text first.
// User-defined tokens are cut out of any text; control and unknown tokens only when the caller
// asks for special-token parsing, so user text never becomes a control token otherwise.
//
// A token counts as control when its type says so, or when its text is one that llama.cpp treats
// as control whatever the file's type ("control-looking token ... its type will be overridden"):
// end-of-turn, end-of-generation and fill-in-the-middle markers such as "</s>", "<|eot_id|>" and
// "<｜fim▁begin｜>" (Vocab::CountsAsControl). Phi-3's "</s>" and DeepSeek-Coder's FIM markers are
// stored as user-defined, and Qwen 2's "</s>" as an ordinary token; all three are read out of text
// only with parse_special. A vocabulary with "<|tool_response>" (Gemma 4) keeps its "</s>"
// ordinary, as llama.cpp does: never cut out. The file's types still decide decoding (tokenizer.h).
//
// Phi-3 files (general.name containing "phi-3" or "phi3", as llama.cpp checks) drop the ASCII
// whitespace that follows a special token other than <unk>, <s> and <|endoftext|> ("rstrip" in
// Phi-3's Hugging Face tokenizer, and in llama.cpp): "<|user|>\nHi" is <|user|> then "Hi".
//
// Immutable after FromVocab; Split is const and safe to call from many threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace kvserve {

// Bytes [begin, begin + length) of a text.
struct TextRange {
  size_t begin;
  size_t length;
};

class SpecialTokens {
 public:
  // A run of the input: a special token, or the plain text bytes [begin, begin + length).
  struct Fragment {
    int32_t token;  // kNoToken for plain text
    size_t begin;
    size_t length;
  };

  // `model_name` is general.name ("" when the file has none); it only selects Phi-3's rstrip.
  static SpecialTokens FromVocab(const Vocab& vocab, std::string_view model_name);

  // `text` in order as fragments: every occurrence of a special token (control and unknown ones
  // only with parse_special) becomes that token, the text between stays plain. Empty text gives
  // no fragments. Control and unknown tokens are never read out of the `plain` ranges (sorted,
  // not overlapping; for a chat, the messages' own text): an occurrence that overlaps one of
  // them stays text, as without parse_special. User-defined tokens are cut out everywhere.
  std::vector<Fragment> Split(std::string_view text, bool parse_special,
                              std::span<const TextRange> plain = {}) const;

 private:
  struct Entry {
    int32_t id;
    std::string text;
    bool needs_parse_special;
    bool rstrip;  // drops the whitespace after it
  };

  // Cuts one plain fragment at every occurrence of `entry`, appending the pieces to `out`.
  // Occurrences that overlap a `plain` range are skipped (given only for control entries).
  static bool Cut(const Entry& entry, std::string_view text, const Fragment& fragment,
                  std::span<const TextRange> plain, std::vector<Fragment>& out);

  std::vector<Entry> entries_;  // longest text first
};

}  // namespace kvserve
