#include "tokenizer/tokenizer.h"

namespace kvserve {

namespace {

constexpr std::string_view kUnknownPiece = "\xE2\x96\x85";  // ▅ U+2585, llama.cpp's rendering

// Texts of control tokens that end a turn in common vocabularies.
constexpr std::string_view kEndOfGenerationTexts[] = {
    "<|endoftext|>", "<|eot_id|>",    "<|eom_id|>",       "<|im_end|>",
    "<|end|>",       "<end_of_turn>", "<|end_of_text|>",  "<EOT>",
    "<eos>",         "<turn|>",       "<|tool_response>",
};

// gpt-oss (harmony): the answer ends with <|return|> or a tool call's <|call|>; <|end|> only ends
// a message (the analysis comes first), so it is not an end of generation there, whatever the
// file says (as llama.cpp decides it: a vocabulary holding both <|return|> and <|call|>).
void MarkHarmonyEnds(const Vocab& v, std::vector<bool>& end_of_generation) {
  auto control = [&](std::string_view text) {
    const int32_t id = v.Find(text);
    return id != kNoToken && v.type(id) == TokenType::kControl ? id : kNoToken;
  };
  const int32_t ret = control("<|return|>"), call = control("<|call|>"), end = control("<|end|>");
  if (ret == kNoToken || call == kNoToken) return;
  end_of_generation[static_cast<size_t>(ret)] = true;
  end_of_generation[static_cast<size_t>(call)] = true;
  if (end != kNoToken) end_of_generation[static_cast<size_t>(end)] = false;
}

// The byte of a "<0xNN>" byte token, or an error that names its id.
Result<std::string> BytePiece(const TokenData& token, int32_t id) {
  const int byte = SpmEncoder::ParseByteToken(token.text);
  if (byte < 0) {
    return Result<std::string>::InvalidArgument("tokenizer.ggml.tokens[" + std::to_string(id) +
                                                "]: byte token '" + token.text +
                                                "' is not of the form <0xNN>");
  }
  return std::string(1, static_cast<char>(byte));
}

// t5 (llama.cpp's unigram model): normal tokens with ▁ turned into spaces, user-defined tokens as
// written, byte tokens as their byte, everything else (control, unknown, unused, undefined) "".
Result<std::string> UnigramPieceOf(const TokenData& token, int32_t id) {
  switch (token.type) {
    case TokenType::kNormal:
      return SpmEncoder::UnescapeWhitespace(token.text);
    case TokenType::kUserDefined:
      return token.text;
    case TokenType::kByte:
      return BytePiece(token, id);
    default:
      return std::string();
  }
}

// The bytes a token stands for, as llama.cpp's token_to_piece gives them without special tokens:
// gpt2 maps byte-level characters back, llama and gemma4 turn ▁ into a space and <0xNN> into
// the byte. An error names the id of a byte token that is not of the form <0xNN>.
Result<std::string> PieceOf(const Vocab& v, int32_t id) {
  const TokenData& token = v.token(id);
  const VocabModel model = v.model();
  if (model == VocabModel::kT5) return UnigramPieceOf(token, id);
  const bool spm = model == VocabModel::kLlama;
  switch (token.type) {
    case TokenType::kNormal:
      return model == VocabModel::kGpt2 ? BpeEncoder::UnmapBytes(token.text)
                                        : SpmEncoder::UnescapeWhitespace(token.text);
    case TokenType::kUndefined:  // llama.cpp gives nothing for these in gemma4's BPE
      if (model == VocabModel::kGemma4) return std::string();
      return spm ? SpmEncoder::UnescapeWhitespace(token.text) : BpeEncoder::UnmapBytes(token.text);
    case TokenType::kUserDefined:
      return spm ? SpmEncoder::UnescapeWhitespace(token.text) : token.text;
    case TokenType::kUnknown:
      return spm ? std::string(kUnknownPiece) : std::string();
    case TokenType::kByte:
      if (model == VocabModel::kGpt2) return BpeEncoder::UnmapBytes(token.text);
      return BytePiece(token, id);
    case TokenType::kControl:
    case TokenType::kUnused:
      break;
  }
  return std::string();
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const GgufFile& file) {
  auto vocab = Vocab::FromGguf(file);
  if (!vocab.ok()) return vocab.status();
  std::unique_ptr<Tokenizer> tokenizer(new Tokenizer(std::move(*vocab)));
  const Vocab& v = tokenizer->vocab_;
  if (v.model() == VocabModel::kLlama) {
    tokenizer->spm_ = std::make_unique<SpmEncoder>(v);
  } else if (v.model() == VocabModel::kT5) {
    auto ugm = UgmEncoder::Create(file, v);
    if (!ugm.ok()) return ugm.status();
    tokenizer->ugm_ = std::make_unique<UgmEncoder>(std::move(*ugm));
  } else {
    auto bpe = BpeEncoder::Create(file, v);
    if (!bpe.ok()) return bpe.status();
    tokenizer->bpe_ = std::make_unique<BpeEncoder>(std::move(*bpe));
  }

  if (file.Find("tokenizer.kvserve.normalizer") != nullptr) {
    auto triples = file.GetStringArray("tokenizer.kvserve.normalizer");
    if (!triples.ok()) return triples.status();
    const std::vector<std::string> strings(triples->begin(), triples->end());
    auto normalizer = Normalizer::FromTriples(strings);
    if (!normalizer.ok()) return normalizer.status();
    tokenizer->normalizer_ = std::move(*normalizer);
  }

  const int32_t n_vocab = v.size();
  tokenizer->pieces_.resize(static_cast<size_t>(n_vocab));
  tokenizer->end_of_generation_.assign(static_cast<size_t>(n_vocab), false);
  for (int32_t id = 0; id < n_vocab; ++id) {
    const TokenData& token = v.token(id);
    auto piece = PieceOf(v, id);
    if (!piece.ok()) return piece.status();
    tokenizer->pieces_[static_cast<size_t>(id)] = std::move(*piece);
    if (token.type == TokenType::kControl || token.type == TokenType::kUserDefined) {
      for (std::string_view text : kEndOfGenerationTexts) {
        if (token.text == text) tokenizer->end_of_generation_[static_cast<size_t>(id)] = true;
      }
    }
  }
  for (int32_t id : {v.eos(), v.eot(), v.eom()}) {
    if (id != kNoToken) tokenizer->end_of_generation_[static_cast<size_t>(id)] = true;
  }
  MarkHarmonyEnds(v, tokenizer->end_of_generation_);
  std::string model_name;  // general.name: Phi-3's special tokens strip the whitespace after them
  if (file.Find("general.name") != nullptr) {
    auto name = file.GetString("general.name");
    if (!name.ok()) return name.status();
    model_name = std::string(*name);
  }
  tokenizer->special_tokens_ = SpecialTokens::FromVocab(v, model_name);
  return tokenizer;
}

std::string_view Tokenizer::model_name() const {
  switch (vocab_.model()) {
    case VocabModel::kGpt2:
      return "gpt2";
    case VocabModel::kLlama:
      return "llama";
    case VocabModel::kGemma4:
      return "gemma4";
    case VocabModel::kT5:
      return "t5";
  }
  return "llama";
}

bool Tokenizer::IsEndOfGeneration(int32_t id) const {
  return vocab_.Contains(id) && end_of_generation_[static_cast<size_t>(id)];
}

bool Tokenizer::IsControl(int32_t id) const {
  return vocab_.Contains(id) && vocab_.type(id) == TokenType::kControl;
}

void Tokenizer::EncodeFragment(std::string_view raw, bool after_special,
                               std::vector<int32_t>& out) const {
  std::string normalized;
  if (!normalizer_.empty()) normalized = normalizer_.Apply(raw);
  const std::string_view text = normalizer_.empty() ? raw : std::string_view(normalized);
  if (bpe_) {
    bpe_->Encode(text, out);
    return;
  }
  if (ugm_) {  // normalizes, prefix space included, fragment by fragment
    ugm_->Encode(text, out);
    return;
  }
  // SentencePiece adds a space before text that starts the input or follows a special token.
  std::string escaped;
  if (vocab_.add_space_prefix() && after_special) {
    escaped = SpmEncoder::EscapeWhitespace(" " + std::string(text));
  } else {
    escaped = SpmEncoder::EscapeWhitespace(text);
  }
  spm_->Encode(escaped, out);
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  return EncodeFragments(text, special_tokens_.Split(text, parse_special), add_special);
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_special,
                                       std::span<const TextRange> plain) const {
  return EncodeFragments(text, special_tokens_.Split(text, /*parse_special=*/true, plain),
                         add_special);
}

std::vector<int32_t> Tokenizer::EncodeFragments(
    std::string_view text, const std::vector<SpecialTokens::Fragment>& fragments,
    bool add_special) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 2);
  if (add_special && vocab_.add_bos() && vocab_.bos() != kNoToken) ids.push_back(vocab_.bos());
  bool after_special = true;
  for (const SpecialTokens::Fragment& fragment : fragments) {
    if (fragment.token != kNoToken) {
      ids.push_back(fragment.token);
      after_special = true;
    } else {
      EncodeFragment(text.substr(fragment.begin, fragment.length), after_special, ids);
      after_special = false;
    }
  }
  if (add_special && vocab_.add_eos() && vocab_.eos() != kNoToken) ids.push_back(vocab_.eos());
  return ids;
}

std::string Tokenizer::TokenPiece(int32_t id, bool render_special) const {
  if (!vocab_.Contains(id)) return "";
  if (render_special && vocab_.type(id) == TokenType::kControl) return vocab_.token(id).text;
  if (render_special && vocab_.type(id) == TokenType::kUnknown && (bpe_ || ugm_)) {
    return vocab_.token(id).text;
  }
  return pieces_[static_cast<size_t>(id)];
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool render_special) const {
  std::string text;
  bool strip_space = vocab_.add_space_prefix();
  for (int32_t id : ids) {
    std::string piece = TokenPiece(id, render_special);
    if (strip_space && !piece.empty()) {
      if (piece[0] == ' ') piece.erase(0, 1);
      strip_space = false;
    }
    text += piece;
  }
  return text;
}

}  // namespace kvserve
