// A t5-model (SentencePiece unigram) vocabulary file from the JSON that
// tests/data/t5-tokenizer/make_vocab.py writes, for testing kvserve's unigram tokenizer against
// llama.cpp: T5's own vocabulary is not on this machine. tests/data/t5-tokenizer/README.md says
// how llama.cpp's ids for these files were made.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

namespace kvserve::testing {

// The GGUF bytes (no tensors; the same for the same JSON): general.architecture "t5",
// tokenizer.ggml.model "t5", .pre "default", .tokens, .scores, .token_type,
// .add_space_prefix (the JSON's add_dummy_prefix), .remove_extra_whitespaces,
// .precompiled_charsmap (uint8, when the JSON has precompiled_charsmap_hex), and the JSON's "keys"
// as tokenizer.ggml.<key> (integers as uint32, booleans as bool).
std::vector<uint8_t> T5StyleVocab(const nlohmann::json& vocab);

}  // namespace kvserve::testing
