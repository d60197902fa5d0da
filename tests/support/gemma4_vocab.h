// A gemma4-model vocabulary made from a byte-level BPE one, for testing kvserve's gemma4
// tokenizer against llama.cpp without Gemma 4's own vocabulary (which is not on this machine).
// tests/data/gemma4-tokenizer/README.md says how llama.cpp's ids for it were made.
#pragma once

#include <cstdint>
#include <vector>

#include "io/gguf_reader.h"

namespace kvserve::testing {

// The GGUF bytes (no tensors), the same for the same `source` (deterministic). `source` is a
// byte-level BPE vocabulary file (tokenizer.ggml.model "gpt2"), e.g.
// ../shared/models/vocab/ggml-vocab-llama-bpe.gguf. Ids, in order:
//   0..12   <pad> <eos> <bos> (control), <unk> (unknown), <|turn> <turn|> (control),
//           <|tool_response> <tool_response|> <|channel> <channel|> (user-defined, as llama.cpp's
//           converter stores them), </s> <start_of_image> (control), <unused0> (unused);
//   then    <0x00>..<0xFF> (byte) but <0xF0>, so a 4-byte character that is not a token loses
//           its first byte, as llama.cpp drops a byte without a token;
//   then    each normal source token whose bytes (GPT-2's byte mapping undone) are valid UTF-8
//           holding no U+2581 and no NUL, spaces written as U+2581, first occurrence only;
//   then    the runs of 2 to 24 newlines that the source lacks (no merges make them).
// Merges: the source's, in order, where both parts and their concatenation are tokens above.
// Keys: the source's non-tokenizer keys, tokenizer.ggml.model and .pre "gemma4", BOS 2, EOS 1,
// UNK 3, PAD 0, add_bos_token false (llama.cpp makes it true), add_space_prefix false.
std::vector<uint8_t> Gemma4StyleVocab(const GgufFile& source);

}  // namespace kvserve::testing
