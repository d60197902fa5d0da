// The vocabulary half of a GGUF tokenizer: token texts, scores and types from tokenizer.ggml.*,
// the text -> id index, and the special ids and flags. Shared read-only by the encoders and the
// decoder; immutable after FromGguf, so safe to use from many threads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "io/gguf_reader.h"
#include "util/status.h"

namespace kvserve {

// Values of tokenizer.ggml.token_type (the llama.cpp / SentencePiece numbering).
enum class TokenType : uint8_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

enum class VocabModel : uint8_t {
  kGpt2,    // byte-level BPE with merge ranks
  kLlama,   // SentencePiece BPE over scores with byte fallback
  kGemma4,  // BPE with merge ranks over raw UTF-8, ▁ for spaces, <0xNN> byte fallback
  kT5,      // SentencePiece unigram over scores with a precompiled charsmap (llama.cpp's "t5")
};

struct TokenData {
  std::string text;  // as stored in the GGUF (byte-level unicode or ▁-escaped)
  float score = 0;
  TokenType type = TokenType::kNormal;
};

inline constexpr int32_t kNoToken = -1;

class Vocab {
 public:
  // Reads tokenizer.ggml.{model,tokens,scores,token_type} and the special ids and flags.
  // Errors name the key and the bad value.
  static Result<Vocab> FromGguf(const GgufFile& file);

  // Texts llama.cpp treats as control tokens whatever their stored type (end-of-turn and
  // end-of-generation markers such as "</s>", "<|eot_id|>", "<turn|>", and fill-in-the-middle
  // markers such as "<｜fim▁begin｜>").
  static bool LooksLikeControl(std::string_view text);

  Vocab(Vocab&&) = default;
  Vocab& operator=(Vocab&&) = default;
  Vocab(const Vocab&) = delete;  // index_ points into tokens_
  Vocab& operator=(const Vocab&) = delete;

  VocabModel model() const { return model_; }
  int32_t size() const { return static_cast<int32_t>(tokens_.size()); }
  bool Contains(int32_t id) const { return id >= 0 && id < size(); }
  const TokenData& token(int32_t id) const { return tokens_[static_cast<size_t>(id)]; }
  TokenType type(int32_t id) const { return tokens_[static_cast<size_t>(id)].type; }
  // The id whose text is `text` (the last one if the vocabulary repeats a text), or kNoToken.
  int32_t Find(std::string_view text) const;
  // Whether `id` is cut out of text only with parse_special: its type is control, or its text
  // looks like control (LooksLikeControl), except a "</s>" that llama.cpp makes ordinary.
  bool CountsAsControl(int32_t id) const;

  // Special ids; kNoToken when the model has none.
  int32_t bos() const { return bos_; }
  int32_t eos() const { return eos_; }
  int32_t unk() const { return unk_; }
  int32_t pad() const { return pad_; }
  int32_t eot() const { return eot_; }
  int32_t eom() const { return eom_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  bool add_space_prefix() const { return add_space_prefix_; }
  // tokenizer.ggml.remove_extra_whitespaces (t5 only; false when absent, as in llama.cpp).
  bool remove_extra_whitespaces() const { return remove_extra_whitespaces_; }
  // tokenizer.ggml.pre ("default" when absent; always "gemma4" for the gemma4 model, as
  // llama.cpp ignores the key there).
  const std::string& pre() const { return pre_; }
  // tokenizer.kvserve.pre_stages: the regex stages of a Hugging Face tokenizer.json whose
  // pre-tokenizer has no llama.cpp name (pre() is then "kvserve-stages"); empty otherwise.
  const std::vector<std::string>& pre_stages() const { return pre_stages_; }

 private:
  // FromGguf's parts: tokenizer.ggml.model and the pre-tokenizer; the token texts, scores and
  // types; the special ids and the add-BOS/EOS/space flags (llama.cpp's defaults).
  Status ReadModel(const GgufFile& file);
  Status ReadTokens(const GgufFile& file);
  Status ReadSpecialTokens(const GgufFile& file);
  // llama.cpp's type overrides (llama-vocab.cpp's special-token pass): see vocab.cc.
  void ApplyTypeOverrides();
  Vocab() = default;

  VocabModel model_ = VocabModel::kLlama;
  std::vector<TokenData> tokens_;
  std::unordered_map<std::string_view, int32_t> index_;  // views into tokens_[i].text
  int32_t bos_ = kNoToken;
  int32_t eos_ = kNoToken;
  int32_t unk_ = kNoToken;
  int32_t pad_ = kNoToken;
  int32_t eot_ = kNoToken;
  int32_t eom_ = kNoToken;
  int32_t ordinary_eos_text_ = kNoToken;  // a "</s>" made ordinary (ApplyTypeOverrides)
  bool add_bos_ = false;
  bool add_eos_ = false;
  bool add_space_prefix_ = false;
  bool remove_extra_whitespaces_ = false;
  std::string pre_ = "default";
  std::vector<std::string> pre_stages_;
};

}  // namespace kvserve
