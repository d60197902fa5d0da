// A GGUF model's tokenizer: text <-> token ids, built from the tokenizer.ggml.* metadata.
//
//   auto tokenizer = Tokenizer::FromGguf(file);        // Result<std::unique_ptr<Tokenizer>>
//   std::vector<int32_t> ids = (*tokenizer)->Encode("Once upon a time", /*add_special=*/true,
//                                                   /*parse_special=*/false);
//   std::string text = (*tokenizer)->Decode(ids);      // "Once upon a time"
//
// Four models, as in llama.cpp: "gpt2" (byte-level BPE with merge ranks, see bpe_encoder.h),
// "llama" (SentencePiece BPE over scores with byte fallback, see spm_encoder.h), "gemma4" (BPE
// with merge ranks over raw UTF-8 with ▁ for spaces and <0xNN> byte fallback, bpe_encoder.h) and
// "t5" (SentencePiece unigram: the file's precompiled charsmap, then the best split by scores, see
// ugm_encoder.h). Encoding first cuts the text at special tokens (user-defined tokens always,
// control and unknown tokens only with parse_special; see special_tokens.h), then normalizes (a
// Hugging Face folder's normalizer, see normalizer.h; none for llama.cpp's files) and encodes each
// plain-text fragment (t5: each fragment gets its own prefix space, as in llama.cpp).
//
// Decoding differs from llama.cpp's detokenize in two deliberate ways: no "clean up tokenization
// spaces" pass (so decode(encode(x)) == x and streaming equals whole decoding), and the
// SentencePiece prefix space is stripped from the first token that produces text even when a BOS
// precedes it (as SentencePiece itself does), so Decode(Encode(x, add_special=true)) == x as well.
//
// Immutable after FromGguf; every method is const and safe to call from many threads.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/gguf_reader.h"
#include "tokenizer/bpe_encoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/spm_encoder.h"
#include "tokenizer/ugm_encoder.h"
#include "tokenizer/vocab.h"
#include "util/status.h"

namespace kvserve {

class Tokenizer {
 public:
  // Copies what it needs: `file` may be closed afterwards. Errors name the key and bad value.
  static Result<std::unique_ptr<Tokenizer>> FromGguf(const GgufFile& file);

  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // add_special: BOS/EOS as tokenizer.ggml.add_bos_token / add_eos_token say (defaults: llama adds
  // BOS, gpt2 adds nothing, t5 adds EOS; gemma4 always adds BOS, as llama.cpp overrides a false
  // there).
  // parse_special: control tokens written in the text ("<s>",
  // "<|endoftext|>", and texts llama.cpp treats as control such as Phi-3's user-defined "</s>")
  // become their ids instead of being spelled out; without it they are plain text.
  std::vector<int32_t> Encode(std::string_view text, bool add_special, bool parse_special) const;
  // As above with parse_special, except inside the `plain` byte ranges (sorted, disjoint): text
  // there never becomes a control token. A chat template's markup is parsed, its messages are not.
  std::vector<int32_t> Encode(std::string_view text, bool add_special,
                              std::span<const TextRange> plain) const;

  // The bytes token `id` stands for (not necessarily complete UTF-8): byte-level characters mapped
  // back to bytes, ▁ -> space, <0xNN> -> that byte (t5: user-defined tokens as written, ▁ kept, as
  // llama.cpp gives them). Control tokens give "" unless render_special (then their text, e.g.
  // "<s>"); an unknown token gives "▅" (U+2585) as in llama.cpp (t5: "", or its text with
  // render_special); ids out of range give "".
  std::string TokenPiece(int32_t id, bool render_special = false) const;

  // Concatenated pieces; with add_space_prefix (llama; t5 files that set it), the first non-empty
  // piece loses one leading space (the one Encode prepended). May hold invalid UTF-8 when `ids` end
  // or start in the middle of a character: see StreamingDecoder and SanitizeUtf8.
  std::string Decode(std::span<const int32_t> ids, bool render_special = false) const;

  int n_vocab() const { return vocab_.size(); }
  int32_t bos() const { return vocab_.bos(); }  // kNoToken (-1) when absent
  int32_t eos() const { return vocab_.eos(); }
  int32_t unk() const { return vocab_.unk(); }
  int32_t pad() const { return vocab_.pad(); }
  bool add_bos() const { return vocab_.add_bos(); }
  bool add_eos() const { return vocab_.add_eos(); }
  // True when decoding strips the SentencePiece prefix space (see Decode).
  bool add_space_prefix() const { return vocab_.add_space_prefix(); }
  // EOS, EOT, EOM and control tokens whose text ends a turn (<|endoftext|>, <|eot_id|>, ...).
  bool IsEndOfGeneration(int32_t id) const;
  bool IsControl(int32_t id) const;
  std::string_view model_name() const;  // "gpt2", "llama", "gemma4" or "t5"
  const Vocab& vocab() const { return vocab_; }

 private:
  explicit Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {}

  void EncodeFragment(std::string_view text, bool after_special, std::vector<int32_t>& out) const;
  // Encode after the split: special fragments give their ids, plain ones are encoded.
  std::vector<int32_t> EncodeFragments(std::string_view text,
                                       const std::vector<SpecialTokens::Fragment>& fragments,
                                       bool add_special) const;

  Vocab vocab_;
  std::unique_ptr<BpeEncoder> bpe_;      // gpt2 and gemma4 models
  std::unique_ptr<SpmEncoder> spm_;      // llama model
  std::unique_ptr<UgmEncoder> ugm_;      // t5 model
  Normalizer normalizer_;                // tokenizer.kvserve.normalizer; empty for most files
  std::vector<std::string> pieces_;      // [n_vocab] TokenPiece(id, false)
  SpecialTokens special_tokens_;         // what Encode cuts out of the text first
  std::vector<bool> end_of_generation_;  // [n_vocab]
};

}  // namespace kvserve
