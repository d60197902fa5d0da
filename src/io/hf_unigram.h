// A Hugging Face tokenizer.json whose model is "Unigram" (T5, Flan-T5, mT5, UMT5, as transformers'
// SpmConverter / T5Converter write it from spiece.model), read for the keys that llama.cpp's T5
// converter (conversion/t5.py set_vocab) takes from the spiece.model itself:
//   model.vocab [[piece, score], ...]   the pieces by id with their scores; model.unk_id the
//                                       unknown piece. byte_fallback true is refused (llama.cpp's
//                                       unigram encoder never falls back to bytes).
//   normalizer   Precompiled(charsmap) -> tokenizer.ggml.precompiled_charsmap (base64 decoded);
//                Replace(Regex " {2,}" -> "▁" or " "), with or without Strip before it, is
//                SentencePiece's remove_extra_whitespaces (transformers writes it for it).
//   pre_tokenizer Metaspace("▁"): prepend_scheme "always" or "first" (or the older
//                add_prefix_space true) is add_dummy_prefix, "never" is not; a WhitespaceSplit
//                before it (older T5 files) is remove_extra_whitespaces too.
//   post_processor TemplateProcessing: the special tokens around $A in `single` (T5: $A </s>),
//                which llama.cpp's SpecialVocab turns into add_bos_token / add_eos_token.
// Anything else in those fields is refused by name and value rather than tokenized differently.
// The token types and the ids past the pieces come from added_tokens (io/hf_tokenizer.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/status.h"

namespace kvserve {

struct HfUnigram {
  std::vector<std::string> pieces;  // model.vocab, by id
  std::vector<float> scores;        // [pieces.size()]
  int32_t unk_id = -1;
  std::vector<uint8_t> precompiled_charsmap;  // empty when the normalizer has none
  bool add_space_prefix = false;
  bool remove_extra_whitespaces = false;
  std::string first_special, last_special;  // post_processor single's, "" when none
};

// Reads the model, normalizer, pre_tokenizer and post_processor of tokenizer.json `root`. Errors
// name the field and its value (not the file).
Result<HfUnigram> ReadHfUnigram(const nlohmann::json& root);

}  // namespace kvserve
