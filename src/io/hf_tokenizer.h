// A Hugging Face tokenizer folder turned into the tokenizer.ggml.* metadata that llama.cpp's
// converter would write, so tokenizer/Tokenizer::FromGguf can load it unchanged.
//
// Sources, first found wins:
//   tokenizer.json   model.type "BPE" or "Unigram".
//     - byte-level (ByteLevel pre-tokenizer, GPT-2 style): model "gpt2", tokens by id, merges;
//       pre "gpt-2" for the plain ByteLevel regex, "llama-bpe" / "qwen2" when a Split pattern
//       equals theirs (any other pattern is refused by value).
//     - SentencePiece style (byte_fallback, ▁ for spaces): model "llama". HF keeps merge ranks,
//       not scores, so a token made by merge rank r gets score -(r + 1) and any other token
//       -(n_merges + 1 + id): the SentencePiece encoder, which merges the best-scoring pair,
//       then prefers the same merges the ranks do. add_space_prefix follows the Prepend("▁")
//       normalizer or the Metaspace prepend_scheme.
//     - the normalizer (NFC/NFD/NFKC/NFKD, Lowercase, StripAccents, Strip, Replace, Prepend, in
//       Sequences) becomes tokenizer.kvserve.normalizer (see tokenizer/normalizer.h), which
//       llama.cpp would drop; another normalizer is refused by name.
//     - Unigram (T5, Flan-T5, mT5, UMT5): model "t5" as llama.cpp's T5 converter writes it from
//       spiece.model (io/hf_unigram.h): the pieces with their scores; the unknown piece UNKNOWN,
//       special added tokens CONTROL, other added tokens USER_DEFINED, "<0xNN>" pieces BYTE,
//       the added tokens past the pieces (T5's <extra_id_N>) USER_DEFINED at score -1000 as the
//       converter makes the entries of added_tokens.json, [PAD<id>] at -10000; the charsmap,
//       add_space_prefix, remove_extra_whitespaces and add_bos / add_eos derived from the
//       normalizer, pre_tokenizer and post_processor.
//   vocab.json + merges.txt   byte-level, as above.
// added_tokens become CONTROL (special) or USER_DEFINED tokens; ids missing from the vocabulary
// up to config vocab_size are filled with "[PAD<id>]" UNUSED tokens. Special ids come from
// tokenizer_config.json, then special_tokens_map.json, then config.json's ids;
// add_bos_token / add_eos_token and chat_template from tokenizer_config.json. Saved truncation
// and padding settings are ignored (they are training-time options).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/gguf_writer.h"
#include "util/status.h"

namespace kvserve {

class HfTokenizer {
 public:
  struct Options {
    int n_vocab = 0;            // config.json vocab_size: the token list is padded up to it
    int64_t bos_token_id = -1;  // config.json fallbacks, -1 when absent
    int64_t eos_token_id = -1;
  };

  // Reads the tokenizer files of `folder`. Errors name the file, the field and the bad value.
  static Result<HfTokenizer> LoadFolder(const std::string& folder, const Options& options);

  // Sets tokenizer.ggml.* (and tokenizer.chat_template when present) on `writer`.
  void AddTo(GgufWriter& writer) const;

  const std::string& model() const { return model_; }  // "gpt2", "llama" or "t5"
  const std::vector<std::string>& tokens() const { return tokens_; }
  const std::vector<std::string>& merges() const { return merges_; }
  int32_t bos() const { return bos_; }
  int32_t eos() const { return eos_; }

 private:
  friend class HfTokenizerReader;

  std::string model_ = "gpt2";
  std::string pre_ = "gpt-2";
  std::vector<std::string> pre_stages_;  // the file's own split regexes (pre_ "kvserve-stages")
  std::vector<std::string> normalizer_;  // (stage, a, b) triples; tokenizer/normalizer.h
  std::vector<std::string> tokens_;      // [n_vocab] by id
  std::vector<int32_t> types_;           // [n_vocab] TokenType values
  std::vector<float> scores_;            // [n_vocab] llama and t5 only
  std::vector<std::string> merges_;      // "left right", by rank; gpt2 only
  int32_t bos_ = -1, eos_ = -1, unk_ = -1, pad_ = -1;
  std::optional<bool> add_bos_, add_eos_, add_space_prefix_;
  std::optional<bool> remove_extra_whitespaces_;  // t5 only
  std::vector<uint8_t> precompiled_charsmap_;     // t5 only; empty when none
  std::string chat_template_;
};

}  // namespace kvserve
