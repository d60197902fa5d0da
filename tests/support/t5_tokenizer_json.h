// The Hugging Face tokenizer files that transformers' T5Converter (SpmConverter) writes for the
// spiece.model that a vocab-*.json of tests/data/t5-tokenizer describes, so that a folder can be
// checked against the GGUF file tests/support/t5_vocab.h makes from the same JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace kvserve::testing {

// How the tokenizer.json spells SentencePiece's whitespace handling.
enum class T5JsonStyle {
  kCurrent,  // normalizer Precompiled, Strip(right), Replace(" {2,}" -> "▁"); Metaspace
             // prepend_scheme (transformers 4's SpmConverter)
  kLegacy,   // normalizer Precompiled alone; WhitespaceSplit then Metaspace add_prefix_space
             // (older T5 files on the Hub)
};

// tokenizer.json: model.vocab the pieces (the entries before the trailing [PADn] unused and
// user-defined tokens at -1000) with their scores, unk_id; added_tokens the control (special),
// unknown (special) and user-defined pieces, then the trailing user-defined tokens (special
// when named <extra_id_N>); the charsmap in base64; Metaspace; TemplateProcessing with BOS
// first when the JSON's keys add it and EOS last unless they say not to; a Metaspace decoder.
nlohmann::ordered_json T5TokenizerJson(const nlohmann::json& vocab, T5JsonStyle style);

// tokenizer_config.json: bos/eos/unk/pad_token by the JSON's ids, add_bos/add_eos_token when the
// JSON's keys have them.
nlohmann::ordered_json T5TokenizerConfig(const nlohmann::json& vocab);

// Writes tokenizer.json and tokenizer_config.json into `folder` (created); "" on success, else
// what failed.
std::string WriteT5TokenizerFolder(const nlohmann::json& vocab, T5JsonStyle style,
                                   const std::string& folder);

}  // namespace kvserve::testing
