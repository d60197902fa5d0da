// tokenizer.json for a SentencePiece vocabulary held in a GGUF file (what Hugging Face's converter
// writes for Llama-style models), for tests that build Hugging Face folders from GGUF fixtures.
#pragma once

#include <nlohmann/json.hpp>

#include "io/gguf_reader.h"

namespace kvserve::testing {

// The vocab by id, merges listed by the merged token's score (best first), control tokens as
// added_tokens, the Prepend/Replace normalizer and a ByteFallback decoder; a saved truncation
// that loaders must ignore.
nlohmann::ordered_json SpmTokenizerJson(const GgufFile& gguf);

}  // namespace kvserve::testing
