#include "tokenizer/vocab.h"

#include <algorithm>
#include <string>

namespace kvserve {

namespace {

// The texts llama.cpp (llama-vocab.cpp at 3f545becc) treats as control tokens whatever their
// stored type: its end-of-turn, end-of-message, end-of-generation and fill-in-the-middle
// (prefix, suffix, middle, pad, repository, file separator) markers. llama.cpp skips a FIM
// category when the file names its id (tokenizer.ggml.fim_*_token_id); kvserve does not, so a
// FIM marker is never read out of plain text.
constexpr std::string_view kControlLookingTexts[] = {
    // end of turn / message / generation
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<｜end▁of▁sentence｜>", "[e~[",
    // fill in the middle: prefix, suffix, middle
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>",
    "<|code_prefix|>", "<|prefix|>", "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
    "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>", "<|fim_middle|>",
    "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>",
    "<|middle|>",
    // fill in the middle: pad, repository, file separator
    "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", "<|fim_repo|>", "<|repo_name|>",
    "<fim-repo>", "<REPO>", "<reponame>", "<|file_sep|>"};

constexpr std::string_view kModelKey = "tokenizer.ggml.model";
constexpr std::string_view kTokensKey = "tokenizer.ggml.tokens";
constexpr std::string_view kScoresKey = "tokenizer.ggml.scores";
constexpr std::string_view kTypesKey = "tokenizer.ggml.token_type";

// Reads an optional special id. Absent keys keep `fallback`; -1 and 0xFFFFFFFF (how converters
// write "none") give kNoToken; anything else must be a valid id.
Result<int32_t> ReadSpecialId(const GgufFile& file, std::string_view key, int32_t fallback,
                              int32_t n_vocab) {
  if (file.Find(key) == nullptr) return fallback;
  auto value = file.GetInt(key);
  if (!value.ok()) return value.status();
  const int64_t id = *value;
  if (id == -1 || id == 0xFFFFFFFFll) return kNoToken;
  if (id < 0 || id >= n_vocab) {
    return Result<int32_t>::InvalidArgument(std::string(key) + ": " + std::to_string(id) +
                                            " is out of range for a vocabulary of " +
                                            std::to_string(n_vocab) + " tokens");
  }
  return static_cast<int32_t>(id);
}

}  // namespace

Result<Vocab> Vocab::FromGguf(const GgufFile& file) {
  Vocab vocab;
  KVSERVE_RETURN_IF_ERROR(vocab.ReadModel(file));
  KVSERVE_RETURN_IF_ERROR(vocab.ReadTokens(file));
  vocab.index_.reserve(vocab.tokens_.size());
  for (size_t i = 0; i < vocab.tokens_.size(); ++i) {
    vocab.index_[vocab.tokens_[i].text] = static_cast<int32_t>(i);
  }
  KVSERVE_RETURN_IF_ERROR(vocab.ReadSpecialTokens(file));
  vocab.ApplyTypeOverrides();
  return vocab;
}

bool Vocab::LooksLikeControl(std::string_view text) {
  return std::find(std::begin(kControlLookingTexts), std::end(kControlLookingTexts), text) !=
         std::end(kControlLookingTexts);
}

bool Vocab::CountsAsControl(int32_t id) const {
  if (!Contains(id)) return false;
  return type(id) == TokenType::kControl ||
         (id != ordinary_eos_text_ && LooksLikeControl(token(id).text));
}

// llama.cpp gives the tokens of its end-of-generation texts the control attribute whatever their
// stored type, and then, where "<|tool_response>" is among them (Gemma 4, PaddleOCR), makes "</s>"
// an ordinary token again: not an end of generation, never cut out of text, decoded as its text.
// kvserve does the second for every model. The first changes how a token decodes (a control token
// gives no text unless special tokens are rendered); kvserve does it for gemma4 only, where the
// converter stores "<|tool_response>" as user-defined, and keeps the stored types elsewhere
// (docs/tokenizers.md).
void Vocab::ApplyTypeOverrides() {
  if (Find("<|tool_response>") != kNoToken) {
    ordinary_eos_text_ = Find("</s>");
    if (ordinary_eos_text_ != kNoToken) {
      tokens_[static_cast<size_t>(ordinary_eos_text_)].type = TokenType::kNormal;
    }
  }
  if (model_ != VocabModel::kGemma4) return;
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (static_cast<int32_t>(i) != ordinary_eos_text_ && LooksLikeControl(tokens_[i].text)) {
      tokens_[i].type = TokenType::kControl;
    }
  }
}

Status Vocab::ReadModel(const GgufFile& file) {
  auto model = file.GetString(kModelKey);
  if (!model.ok()) return model.status();
  if (*model == "gpt2") {
    model_ = VocabModel::kGpt2;
  } else if (*model == "llama") {
    model_ = VocabModel::kLlama;
  } else if (*model == "gemma4") {
    model_ = VocabModel::kGemma4;
  } else if (*model == "t5") {
    model_ = VocabModel::kT5;
  } else {
    return Status::InvalidArgument(std::string(kModelKey) + ": unsupported tokenizer model '" +
                                   std::string(*model) +
                                   "' (expected 'gpt2', 'llama', 'gemma4' or 't5')");
  }
  if (model_ == VocabModel::kGemma4) {
    pre_ = "gemma4";  // llama.cpp ignores tokenizer.ggml.pre for this model
  } else if (file.Find("tokenizer.ggml.pre") != nullptr) {
    auto pre = file.GetString("tokenizer.ggml.pre");
    if (!pre.ok()) return pre.status();
    pre_ = std::string(*pre);
  }
  if (pre_ == "kvserve-stages") {
    auto stages = file.GetStringArray("tokenizer.kvserve.pre_stages");
    if (!stages.ok()) return stages.status();
    if (stages->empty()) {
      return Status::InvalidArgument("tokenizer.kvserve.pre_stages: the array is empty");
    }
    pre_stages_.assign(stages->begin(), stages->end());
  }
  return Status::Ok();
}

Status Vocab::ReadTokens(const GgufFile& file) {
  auto texts = file.GetStringArray(kTokensKey);
  if (!texts.ok()) return texts.status();
  if (texts->empty()) {
    return Status::InvalidArgument(std::string(kTokensKey) + ": the array is empty");
  }
  if (texts->size() > static_cast<size_t>(INT32_MAX)) {
    return Status::InvalidArgument(std::string(kTokensKey) + ": " + std::to_string(texts->size()) +
                                   " tokens exceed the int32 id range");
  }
  const size_t n_vocab = texts->size();
  tokens_.resize(n_vocab);
  for (size_t i = 0; i < n_vocab; ++i) tokens_[i].text = std::string((*texts)[i]);

  if (file.Find(kScoresKey) != nullptr) {
    auto scores = file.GetFloatArray(kScoresKey);
    if (!scores.ok()) return scores.status();
    if (scores->size() != n_vocab) {
      return Status::InvalidArgument(std::string(kScoresKey) + ": " +
                                     std::to_string(scores->size()) + " scores for " +
                                     std::to_string(n_vocab) + " tokens");
    }
    for (size_t i = 0; i < n_vocab; ++i) tokens_[i].score = (*scores)[i];
  }
  if (file.Find(kTypesKey) != nullptr) {
    auto types = file.GetIntArray(kTypesKey);
    if (!types.ok()) return types.status();
    if (types->size() != n_vocab) {
      return Status::InvalidArgument(std::string(kTypesKey) + ": " + std::to_string(types->size()) +
                                     " types for " + std::to_string(n_vocab) + " tokens");
    }
    for (size_t i = 0; i < n_vocab; ++i) {
      const int64_t type = (*types)[i];
      if (type < 0 || type > static_cast<int64_t>(TokenType::kByte)) {
        return Status::InvalidArgument(std::string(kTypesKey) + "[" + std::to_string(i) +
                                       "]: unknown token type " + std::to_string(type));
      }
      tokens_[i].type = static_cast<TokenType>(type);
    }
  }
  return Status::Ok();
}

Status Vocab::ReadSpecialTokens(const GgufFile& file) {
  const size_t n_vocab = tokens_.size();
  // Defaults follow llama.cpp: SentencePiece models have <unk>=0, <s>=1, </s>=2, add BOS and a
  // prefix space; T5's unigram models have <pad>=0, </s>=1, <unk>=2, no BOS, add EOS and no prefix
  // space unless the file says so; GPT-2 style models have no defaults and add nothing, except
  // Llama-3 style vocabularies, which add BOS.
  const bool spm = model_ == VocabModel::kLlama;
  const bool t5 = model_ == VocabModel::kT5;
  const int32_t n = static_cast<int32_t>(n_vocab);
  const struct {
    std::string_view key;
    int32_t fallback;
    int32_t* out;
  } ids[] = {
      {"tokenizer.ggml.bos_token_id", spm ? 1 : kNoToken, &bos_},
      {"tokenizer.ggml.eos_token_id", spm ? 2 : (t5 ? 1 : kNoToken), &eos_},
      {"tokenizer.ggml.unknown_token_id", spm ? 0 : (t5 ? 2 : kNoToken), &unk_},
      {"tokenizer.ggml.padding_token_id", t5 ? 0 : kNoToken, &pad_},
      {"tokenizer.ggml.eot_token_id", kNoToken, &eot_},
      {"tokenizer.ggml.eom_token_id", kNoToken, &eom_},
  };
  for (const auto& entry : ids) {
    const int32_t fallback = entry.fallback < n ? entry.fallback : kNoToken;
    auto id = ReadSpecialId(file, entry.key, fallback, n);
    if (!id.ok()) return id.status();
    *entry.out = *id;
  }
  const bool llama3 = pre_ == "llama-bpe" || pre_ == "llama3";
  auto add_bos = file.GetBoolOr("tokenizer.ggml.add_bos_token", spm || llama3);
  if (!add_bos.ok()) return add_bos.status();
  auto add_eos = file.GetBoolOr("tokenizer.ggml.add_eos_token", t5);
  if (!add_eos.ok()) return add_eos.status();
  auto add_space_prefix = file.GetBoolOr("tokenizer.ggml.add_space_prefix", spm);
  if (!add_space_prefix.ok()) return add_space_prefix.status();
  add_bos_ = *add_bos;
  add_eos_ = *add_eos;
  add_space_prefix_ = *add_space_prefix;
  if (t5) {
    auto remove_extra = file.GetBoolOr("tokenizer.ggml.remove_extra_whitespaces", false);
    if (!remove_extra.ok()) return remove_extra.status();
    remove_extra_whitespaces_ = *remove_extra;
  }
  if (model_ == VocabModel::kGemma4) {
    // llama.cpp overrides add_bos_token false to true for Gemma 4 (its PR 21500), and a BPE
    // model never adds a prefix space when encoding.
    add_bos_ = true;
    add_space_prefix_ = false;
  }
  return Status::Ok();
}

int32_t Vocab::Find(std::string_view text) const {
  auto it = index_.find(text);
  return it == index_.end() ? kNoToken : it->second;
}

}  // namespace kvserve
