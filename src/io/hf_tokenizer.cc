#include "io/hf_tokenizer.h"

#include <cctype>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "io/hf_unigram.h"

namespace kvserve {

namespace {

using nlohmann::json;

// tokenizer.ggml.token_type values (llama.cpp's numbering, as tokenizer/vocab.h).
constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6;
constexpr int64_t kMaxVocab = 1 << 24;
// conversion/t5.py's scores for the ids past the pieces: added_tokens.json entries, padding.
constexpr float kAddedScore = -1000.0f, kPaddingScore = -10000.0f;

// The Split patterns of byte-level vocabularies whose pre-tokenizer kvserve knows.
constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream text;
  text << in.rdbuf();
  *out = text.str();
  return true;
}

// Parses `path` if it exists: nullopt json (discarded) when absent, an error when invalid.
Result<std::optional<json>> ReadJson(const std::string& path) {
  std::string text;
  if (!ReadFile(path, &text)) return std::optional<json>();
  try {
    return std::optional<json>(json::parse(text));
  } catch (const json::exception& e) {
    return Status::InvalidArgument(path + ": not valid JSON: " + e.what());
  }
}

// Depth-first search for a component of `type` (pre_tokenizer/normalizer may be Sequences).
const json* FindComponent(const json& node, const std::string& type) {
  if (node.is_object()) {
    if (auto it = node.find("type"); it != node.end() && *it == type) return &node;
    for (const char* list : {"pretokenizers", "normalizers", "decoders"}) {
      if (auto it = node.find(list); it != node.end() && it->is_array()) {
        for (const json& child : *it) {
          if (const json* found = FindComponent(child, type)) return found;
        }
      }
    }
  }
  return nullptr;
}

// The stages of a normalizer, Sequences flattened, in order (null: none).
void FlattenNormalizer(const json& node, std::vector<const json*>& out) {
  if (node.is_null()) return;
  if (!node.is_object()) {
    out.push_back(&node);  // refused by ChooseNormalizer, naming it
    return;
  }
  if (node.value("type", std::string()) == "Sequence" && node.contains("normalizers") &&
      node["normalizers"].is_array()) {
    for (const json& child : node["normalizers"]) FlattenNormalizer(child, out);
    return;
  }
  out.push_back(&node);
}

constexpr const char* kSpmSpace = "\xE2\x96\x81";  // ▁

// "bos_token": "<s>" or {"content": "<s>", ...}.
std::string TokenText(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object()) {
    if (auto it = value.find("content"); it != value.end() && it->is_string()) {
      return it->get<std::string>();
    }
  }
  return "";
}

bool IsByteToken(const std::string& text) {
  return text.size() == 6 && text.compare(0, 3, "<0x") == 0 && text[5] == '>' &&
         std::isxdigit(static_cast<unsigned char>(text[3])) &&
         std::isxdigit(static_cast<unsigned char>(text[4]));
}

}  // namespace

// Fills an HfTokenizer step by step; one per LoadFolder call.
class HfTokenizerReader {
 public:
  HfTokenizerReader(const std::string& folder, const HfTokenizer::Options& options)
      : folder_(folder), options_(options) {}

  Result<HfTokenizer> Read() {
    auto tokenizer_json = ReadJson(folder_ + "/tokenizer.json");
    if (!tokenizer_json.ok()) return tokenizer_json.status();
    auto config = ReadJson(folder_ + "/tokenizer_config.json");
    if (!config.ok()) return config.status();
    auto special_map = ReadJson(folder_ + "/special_tokens_map.json");
    if (!special_map.ok()) return special_map.status();
    if (tokenizer_json->has_value()) {
      KVSERVE_RETURN_IF_ERROR(ReadTokenizerJson(**tokenizer_json));
    } else {
      KVSERVE_RETURN_IF_ERROR(ReadVocabAndMerges());
      if (config->has_value()) KVSERVE_RETURN_IF_ERROR(ReadAddedTokensDecoder(**config));
    }
    KVSERVE_RETURN_IF_ERROR(BuildTokenList());
    KVSERVE_RETURN_IF_ERROR(ReadSpecials(*config, *special_map));
    return std::move(out_);
  }

 private:
  Status Error(const std::string& file, const std::string& what) const {
    return Status::InvalidArgument(folder_ + "/" + file + ": " + what);
  }

  Status AddVocabEntry(const std::string& file, const std::string& text, const json& id) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= kMaxVocab) {
      return Error(file, "vocab['" + text + "'] = " + id.dump() + " is not a token id below " +
                             std::to_string(kMaxVocab));
    }
    const auto value = static_cast<int32_t>(id.get<int64_t>());
    if (!by_id_.emplace(value, text).second && by_id_[value] != text) {
      return Error(file, "token id " + std::to_string(value) + " is used by both '" +
                             by_id_[value] + "' and '" + text + "'");
    }
    return Status::Ok();
  }

  Status ReadTokenizerJson(const json& root) {
    const std::string file = "tokenizer.json";
    const json* model = root.is_object() && root.contains("model") ? &root["model"] : nullptr;
    if (model == nullptr || !model->is_object()) return Error(file, "missing object 'model'");
    const std::string type = model->value("type", std::string("BPE"));
    if (type == "Unigram") return ReadUnigramJson(root);
    if (type != "BPE") {
      return Error(file, "model.type '" + type + "' is not supported (supported: BPE, Unigram)");
    }
    auto vocab = model->find("vocab");
    if (vocab == model->end() || !vocab->is_object()) {
      return Error(file, "model.vocab is not an object");
    }
    for (const auto& [text, id] : vocab->items()) {
      KVSERVE_RETURN_IF_ERROR(AddVocabEntry(file, text, id));
    }
    if (auto merges = model->find("merges"); merges != model->end()) {
      if (!merges->is_array()) return Error(file, "model.merges is not an array");
      for (const json& merge : *merges) {
        if (merge.is_string()) {
          merges_.push_back(merge.get<std::string>());
        } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
                   merge[1].is_string()) {
          merges_.push_back(merge[0].get<std::string>() + " " + merge[1].get<std::string>());
        } else {
          return Error(file, "model.merges entry " + merge.dump() + " is not \"a b\" or [a, b]");
        }
      }
    }
    KVSERVE_RETURN_IF_ERROR(ReadAddedTokens(root));
    const json null;
    const json& pre = root.contains("pre_tokenizer") ? root["pre_tokenizer"] : null;
    const json& normalizer = root.contains("normalizer") ? root["normalizer"] : null;
    const json& decoder = root.contains("decoder") ? root["decoder"] : null;
    const bool byte_fallback = model->value("byte_fallback", false);
    if (auto unk = model->find("unk_token"); unk != model->end() && unk->is_string()) {
      model_unk_ = unk->get<std::string>();
    }
    if (FindComponent(pre, "ByteLevel") != nullptr) {
      out_.model_ = "gpt2";
      KVSERVE_RETURN_IF_ERROR(ChooseNormalizer(file, normalizer, /*spm=*/false));
      return ChoosePre(file, pre);
    }
    if (byte_fallback || FindComponent(pre, "Metaspace") || FindComponent(decoder, "Metaspace") ||
        FindComponent(decoder, "ByteFallback")) {
      out_.model_ = "llama";
      out_.pre_ = "default";
      const json* prepend = FindComponent(normalizer, "Prepend");
      bool prefix = prepend != nullptr && prepend->value("prepend", std::string()) == kSpmSpace;
      if (const json* meta = FindComponent(pre, "Metaspace")) {
        const std::string scheme = meta->value("prepend_scheme", std::string("always"));
        prefix = meta->value("add_prefix_space", scheme != "never");
      }
      out_.add_space_prefix_ = prefix;
      return ChooseNormalizer(file, normalizer, /*spm=*/true);
    }
    return Error(file, "cannot tell the tokenizer style: pre_tokenizer " + pre.dump() +
                           " is neither ByteLevel nor SentencePiece (Metaspace / byte_fallback)");
  }

  Status ReadAddedTokens(const json& root) {
    const std::string file = "tokenizer.json";
    if (auto added = root.find("added_tokens"); added != root.end() && added->is_array()) {
      for (const json& token : *added) {
        if (!token.is_object() || !token.contains("id") || !token.contains("content") ||
            !token["content"].is_string()) {
          return Error(file, "added_tokens entry " + token.dump() + " lacks id or content");
        }
        const std::string text = token["content"].get<std::string>();
        KVSERVE_RETURN_IF_ERROR(AddVocabEntry(file, text, token["id"]));
        added_[static_cast<int32_t>(token["id"].get<int64_t>())] = token.value("special", false);
      }
    }
    return Status::Ok();
  }

  // A Unigram model: tokenizer.ggml.model "t5" (io/hf_unigram.h).
  Status ReadUnigramJson(const json& root) {
    auto unigram = ReadHfUnigram(root);
    if (!unigram.ok()) return Error("tokenizer.json", unigram.message());
    for (size_t id = 0; id < unigram->pieces.size(); ++id) {
      KVSERVE_RETURN_IF_ERROR(AddVocabEntry("tokenizer.json", unigram->pieces[id], json(id)));
    }
    KVSERVE_RETURN_IF_ERROR(ReadAddedTokens(root));
    out_.model_ = "t5";
    out_.pre_ = "default";
    out_.add_space_prefix_ = unigram->add_space_prefix;
    out_.remove_extra_whitespaces_ = unigram->remove_extra_whitespaces;
    out_.precompiled_charsmap_ = unigram->precompiled_charsmap;
    unigram_ = std::move(*unigram);
    return Status::Ok();
  }

  // The normalizer's stages as tokenizer.kvserve.normalizer triples (tokenizer/normalizer.h).
  // SentencePiece style (spm): Prepend("▁") and Replace(" " -> "▁") are the encoder's own space
  // handling and are dropped; other stages must come before them. A stage kvserve cannot apply
  // exactly is refused by name.
  Status ChooseNormalizer(const std::string& file, const json& normalizer, bool spm) {
    std::vector<const json*> stages;
    FlattenNormalizer(normalizer, stages);
    bool escaping_seen = false;
    for (const json* stage : stages) {
      if (!stage->is_object() || !stage->contains("type") || !(*stage)["type"].is_string()) {
        return Error(file, "normalizer stage " + stage->dump() + " is not an object with a type");
      }
      const std::string type = (*stage)["type"].get<std::string>();
      std::string pattern, regex;
      if (type == "Replace" && stage->contains("pattern") && (*stage)["pattern"].is_object()) {
        pattern = (*stage)["pattern"].value("String", std::string());
        regex = (*stage)["pattern"].value("Regex", std::string());
      }
      const std::string content = stage->value("content", std::string());
      if (spm && ((type == "Prepend" && stage->value("prepend", std::string()) == kSpmSpace) ||
                  (type == "Replace" && pattern == " " && content == kSpmSpace))) {
        escaping_seen = true;
        continue;
      }
      if (escaping_seen) {
        return Error(file, "normalizer stage " + stage->dump() +
                               " after the SentencePiece space escaping is not supported");
      }
      std::vector<std::string>& out = out_.normalizer_;
      const auto add = [&out](std::string name, std::string a, std::string b) {
        out.insert(out.end(), {std::move(name), std::move(a), std::move(b)});
      };
      if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
        std::string name = type;
        for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        add(name, "", "");
      } else if (type == "Lowercase") {
        add("lowercase", "", "");
      } else if (type == "StripAccents") {
        add("strip_accents", "", "");
      } else if (type == "Strip") {
        add("strip", stage->value("strip_left", true) ? "1" : "0",
            stage->value("strip_right", true) ? "1" : "0");
      } else if (type == "Replace" && !pattern.empty()) {
        add("replace", pattern, content);
      } else if (type == "Replace" && !regex.empty()) {
        add("replace_regex", regex, content);
      } else if (type == "Prepend" && stage->contains("prepend") &&
                 (*stage)["prepend"].is_string()) {
        add("prepend", (*stage)["prepend"].get<std::string>(), "");
      } else if (type == "Precompiled" && (!stage->contains("precompiled_charsmap") ||
                                           (*stage)["precompiled_charsmap"].is_null())) {
        continue;  // an empty SentencePiece character map changes nothing
      } else {
        return Error(file, "normalizer '" + type + "' is not supported (" + stage->dump() +
                               "; supported: NFC, NFD, NFKC, NFKD, Lowercase, StripAccents, Strip, "
                               "Replace, Prepend, Sequence)");
      }
    }
    return Status::Ok();
  }

  // The byte-level pre-tokenizer: a known one by name (tokenizer.ggml.pre), else the file's own
  // stages (tokenizer.kvserve.pre_stages): its Split regexes (behavior Isolated) and individual
  // Digits, in order, then GPT-2's split where ByteLevel has use_regex. Anything else is refused
  // by name rather than tokenized differently.
  Status ChoosePre(const std::string& file, const json& pre) {
    std::vector<std::string> stages;
    const json* byte_level = FindComponent(pre, "ByteLevel");
    const std::vector<const json*> parts =
        pre.value("type", std::string()) == "Sequence" && pre.contains("pretokenizers") &&
                pre["pretokenizers"].is_array()
            ? [&] {
                std::vector<const json*> v;
                for (const json& child : pre["pretokenizers"]) v.push_back(&child);
                return v;
              }()
            : std::vector<const json*>{&pre};
    for (const json* part : parts) {
      const std::string type = part->value("type", std::string());
      if (type == "ByteLevel") continue;
      if (type == "Split") {
        std::string pattern;
        if (part->contains("pattern") && (*part)["pattern"].is_object()) {
          pattern = (*part)["pattern"].value("Regex", std::string());
        }
        const std::string behavior = part->value("behavior", std::string("Isolated"));
        if (pattern.empty() || behavior != "Isolated" || part->value("invert", false)) {
          return Error(file, "pre_tokenizer Split " + part->dump() +
                                 " is not supported (a Regex pattern, behavior Isolated, not "
                                 "inverted)");
        }
        stages.push_back(pattern);
      } else if (type == "Digits" && part->value("individual_digits", false)) {
        stages.push_back("\\p{N}");
      } else {
        return Error(file, "pre_tokenizer '" + type + "' is not supported");
      }
    }
    const bool byte_level_regex = byte_level != nullptr && byte_level->value("use_regex", true);
    if (byte_level_regex) stages.push_back(kGpt2Pattern);
    if (stages.size() == 1 && stages[0] == kGpt2Pattern) {
      out_.pre_ = "gpt-2";
    } else if (stages.size() == 1 && stages[0] == kLlama3Pattern) {
      out_.pre_ = "llama-bpe";
    } else if (stages.size() == 1 && stages[0] == kQwen2Pattern) {
      out_.pre_ = "qwen2";
    } else if (stages.empty()) {
      return Error(file, "pre_tokenizer " + pre.dump() + " splits nothing");
    } else {
      out_.pre_ = "kvserve-stages";
      out_.pre_stages_ = std::move(stages);
    }
    return Status::Ok();
  }

  Status ReadVocabAndMerges() {
    auto vocab = ReadJson(folder_ + "/vocab.json");
    if (!vocab.ok()) return vocab.status();
    if (!vocab->has_value()) {
      return Status::InvalidArgument(folder_ +
                                     ": no tokenizer.json, and no vocab.json + merges.txt");
    }
    if (!(*vocab)->is_object()) return Error("vocab.json", "not a JSON object");
    for (const auto& [text, id] : (*vocab)->items()) {
      KVSERVE_RETURN_IF_ERROR(AddVocabEntry("vocab.json", text, id));
    }
    std::string merges;
    if (!ReadFile(folder_ + "/merges.txt", &merges)) {
      return Status::InvalidArgument(folder_ + ": vocab.json without merges.txt");
    }
    std::istringstream lines(merges);
    for (std::string line; std::getline(lines, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty() || line.rfind("#version", 0) == 0) continue;
      merges_.push_back(line);
    }
    out_.model_ = "gpt2";
    out_.pre_ = "gpt-2";
    return Status::Ok();
  }

  Status ReadAddedTokensDecoder(const json& config) {
    auto decoder = config.find("added_tokens_decoder");
    if (decoder == config.end() || !decoder->is_object()) return Status::Ok();
    for (const auto& [id_text, token] : decoder->items()) {
      char* end = nullptr;
      const long long id = std::strtoll(id_text.c_str(), &end, 10);
      const std::string text = TokenText(token);
      if (id_text.empty() || *end != '\0' || text.empty()) {
        return Error("tokenizer_config.json", "added_tokens_decoder['" + id_text + "'] is not " +
                                                  "an id with a content string");
      }
      KVSERVE_RETURN_IF_ERROR(AddVocabEntry("tokenizer_config.json", text, json(id)));
      added_[static_cast<int32_t>(id)] = token.value("special", false);
    }
    return Status::Ok();
  }

  Status BuildTokenList() {
    if (by_id_.empty()) return Status::InvalidArgument(folder_ + ": the tokenizer has no tokens");
    const int64_t n = std::max<int64_t>(options_.n_vocab, by_id_.rbegin()->first + 1);
    const bool llama = out_.model_ == "llama";
    out_.tokens_.resize(n);
    out_.types_.assign(n, kNormal);
    for (int64_t id = 0; id < n; ++id) {
      auto it = by_id_.find(static_cast<int32_t>(id));
      if (it == by_id_.end()) {
        out_.tokens_[id] = "[PAD" + std::to_string(id) + "]";
        out_.types_[id] = kUnused;
        continue;
      }
      out_.tokens_[id] = it->second;
      if (auto added = added_.find(static_cast<int32_t>(id)); added != added_.end()) {
        out_.types_[id] = added->second ? kControl : kUserDefined;
      } else if (llama && IsByteToken(it->second)) {
        out_.types_[id] = kByte;
      }
    }
    if (unigram_) {
      SetUnigramScoresAndTypes(n);
      return Status::Ok();
    }
    if (!llama) {
      out_.merges_ = std::move(merges_);
      return Status::Ok();
    }
    // Scores from merge ranks (see the header): earlier merges score higher.
    std::unordered_map<std::string, int32_t> index;
    for (int64_t id = 0; id < n; ++id) index.emplace(out_.tokens_[id], static_cast<int32_t>(id));
    const auto n_merges = static_cast<int64_t>(merges_.size());
    out_.scores_.assign(n, 0.0f);
    std::vector<bool> scored(n, false);
    for (int64_t rank = 0; rank < n_merges; ++rank) {
      const std::string& merge = merges_[rank];
      const size_t space = merge.find(' ');
      if (space == std::string::npos) {
        return Error("tokenizer.json", "merge #" + std::to_string(rank) + " '" + merge +
                                           "' has no space between its two tokens");
      }
      auto it = index.find(merge.substr(0, space) + merge.substr(space + 1));
      if (it == index.end() || scored[it->second]) continue;
      scored[it->second] = true;
      out_.scores_[it->second] = -static_cast<float>(rank + 1);
    }
    for (int64_t id = 0; id < n; ++id) {
      if (!scored[id]) out_.scores_[id] = -static_cast<float>(n_merges + 1 + id);
    }
    return Status::Ok();
  }

  // conversion/t5.py's scores and types (hf_tokenizer.h). The spiece.model's pieces are model.vocab
  // up to its last entry that is not an added token (T5Converter appends <extra_id_N> to it);
  // what lies past them is an added token, user-defined, or padding, unused.
  void SetUnigramScoresAndTypes(int64_t n) {
    const HfUnigram& u = *unigram_;
    int64_t n_pieces = 0;
    for (int64_t id = 0; id < static_cast<int64_t>(u.pieces.size()); ++id) {
      if (!added_.contains(static_cast<int32_t>(id))) n_pieces = id + 1;
    }
    out_.scores_.assign(n, kPaddingScore);
    for (int64_t id = 0; id < n; ++id) {
      const auto key = static_cast<int32_t>(id);
      if (!by_id_.contains(key)) continue;  // [PAD<id>], unused
      const auto added = added_.find(key);
      if (id >= n_pieces) {
        out_.scores_[id] = kAddedScore;
        out_.types_[id] = kUserDefined;
        continue;
      }
      out_.scores_[id] = u.scores[id];
      if (id == u.unk_id) {
        out_.types_[id] = kUnknown;
      } else if (added != added_.end()) {
        out_.types_[id] = added->second ? kControl : kUserDefined;
      } else {
        out_.types_[id] = IsByteToken(out_.tokens_[id]) ? kByte : kNormal;
      }
    }
  }

  // A Unigram model's unknown token is model.unk_id unless a file names one; the special tokens
  // its post_processor puts around the text set add_bos / add_eos, as llama.cpp's SpecialVocab
  // does, and must be the BOS / EOS token (taken as such when no file names one).
  Status ApplyUnigramSpecials() {
    if (out_.unk_ < 0) out_.unk_ = unigram_->unk_id;
    const struct {
      const std::string& text;
      int32_t* id;
      std::optional<bool>* add;
      const char* name;
    } ends[] = {{unigram_->first_special, &out_.bos_, &out_.add_bos_, "BOS"},
                {unigram_->last_special, &out_.eos_, &out_.add_eos_, "EOS"}};
    for (const auto& end : ends) {
      if (end.text.empty()) continue;
      if (*end.id < 0) {
        const char* key = "post_processor special token";
        KVSERVE_RETURN_IF_ERROR(SpecialFrom(json{{key, end.text}}, "tokenizer.json", key, end.id));
      }
      if (out_.tokens_[*end.id] != end.text) {
        return Error("tokenizer.json", "post_processor adds '" + end.text + "', not the " +
                                           end.name + " token '" + out_.tokens_[*end.id] + "'");
      }
      *end.add = true;
    }
    return Status::Ok();
  }

  // The id of a special token named in tokenizer_config.json / special_tokens_map.json.
  Status SpecialFrom(const std::optional<json>& root, const char* file, const char* key,
                     int32_t* out) {
    if (!root || !root->is_object() || !root->contains(key) || (*root)[key].is_null()) {
      return Status::Ok();
    }
    const std::string text = TokenText((*root)[key]);
    for (size_t id = 0; id < out_.tokens_.size(); ++id) {
      if (out_.tokens_[id] == text && out_.types_[id] != kUnused) {
        *out = static_cast<int32_t>(id);
        return Status::Ok();
      }
    }
    return Error(file, std::string(key) + " '" + text + "' is not in the vocabulary");
  }

  Status ReadSpecials(const std::optional<json>& config, const std::optional<json>& map) {
    const int64_t n = static_cast<int64_t>(out_.tokens_.size());
    for (auto [config_id, out] : {std::pair{options_.bos_token_id, &out_.bos_},
                                  std::pair{options_.eos_token_id, &out_.eos_}}) {
      if (config_id >= n) {
        return Error("config.json", "token id " + std::to_string(config_id) +
                                        " is outside the vocabulary of " + std::to_string(n));
      }
      *out = static_cast<int32_t>(config_id);
    }
    const struct {
      const char* key;
      int32_t* out;
    } specials[] = {{"bos_token", &out_.bos_},
                    {"eos_token", &out_.eos_},
                    {"unk_token", &out_.unk_},
                    {"pad_token", &out_.pad_}};
    for (const auto& special : specials) {
      // Later sources override earlier ones: tokenizer_config.json has the last word.
      KVSERVE_RETURN_IF_ERROR(
          SpecialFrom(map, "special_tokens_map.json", special.key, special.out));
      KVSERVE_RETURN_IF_ERROR(
          SpecialFrom(config, "tokenizer_config.json", special.key, special.out));
    }
    if (out_.unk_ < 0 && !model_unk_.empty()) {
      KVSERVE_RETURN_IF_ERROR(
          SpecialFrom(json{{"unk_token", model_unk_}}, "tokenizer.json", "unk_token", &out_.unk_));
    }
    if (out_.model_ == "llama" && out_.unk_ >= 0) out_.types_[out_.unk_] = kUnknown;
    if (unigram_) KVSERVE_RETURN_IF_ERROR(ApplyUnigramSpecials());
    if (!config || !config->is_object()) return Status::Ok();
    for (auto [key, out] :
         {std::pair{"add_bos_token", &out_.add_bos_}, std::pair{"add_eos_token", &out_.add_eos_}}) {
      if (auto it = config->find(key); it != config->end() && it->is_boolean()) {
        *out = it->get<bool>();
      }
    }
    if (auto it = config->find("chat_template"); it != config->end()) {
      if (it->is_string()) {
        out_.chat_template_ = it->get<std::string>();
      } else if (it->is_array()) {
        for (const json& entry : *it) {
          if (entry.is_object() && entry.value("name", std::string()) == "default" &&
              entry.contains("template") && entry["template"].is_string()) {
            out_.chat_template_ = entry["template"].get<std::string>();
          }
        }
      }
    }
    return Status::Ok();
  }

  const std::string& folder_;
  const HfTokenizer::Options& options_;
  HfTokenizer out_;
  std::map<int32_t, std::string> by_id_;
  std::map<int32_t, bool> added_;  // id -> special
  std::vector<std::string> merges_;
  std::string model_unk_;             // tokenizer.json model.unk_token
  std::optional<HfUnigram> unigram_;  // a Unigram model's vocab, flags and post_processor
};

Result<HfTokenizer> HfTokenizer::LoadFolder(const std::string& folder, const Options& options) {
  try {
    return HfTokenizerReader(folder, options).Read();
  } catch (const json::exception& e) {
    // A field of an unexpected JSON type somewhere the reader did not check it by hand.
    return Status::InvalidArgument(folder + ": tokenizer files: " + e.what());
  }
}

void HfTokenizer::AddTo(GgufWriter& writer) const {
  writer.SetString("tokenizer.ggml.model", model_);
  writer.SetString("tokenizer.ggml.pre", pre_);
  if (!pre_stages_.empty()) writer.SetStringArray("tokenizer.kvserve.pre_stages", pre_stages_);
  if (!normalizer_.empty()) writer.SetStringArray("tokenizer.kvserve.normalizer", normalizer_);
  writer.SetStringArray("tokenizer.ggml.tokens", tokens_);
  writer.SetInt32Array("tokenizer.ggml.token_type", types_);
  if (!scores_.empty()) writer.SetFloat32Array("tokenizer.ggml.scores", scores_);
  if (!merges_.empty()) writer.SetStringArray("tokenizer.ggml.merges", merges_);
  const std::pair<const char*, int32_t> ids[] = {{"tokenizer.ggml.bos_token_id", bos_},
                                                 {"tokenizer.ggml.eos_token_id", eos_},
                                                 {"tokenizer.ggml.unknown_token_id", unk_},
                                                 {"tokenizer.ggml.padding_token_id", pad_}};
  for (const auto& [key, id] : ids) {
    if (id >= 0) writer.SetUint32(key, static_cast<uint32_t>(id));
  }
  if (add_bos_) writer.SetBool("tokenizer.ggml.add_bos_token", *add_bos_);
  if (add_eos_) writer.SetBool("tokenizer.ggml.add_eos_token", *add_eos_);
  if (add_space_prefix_) writer.SetBool("tokenizer.ggml.add_space_prefix", *add_space_prefix_);
  if (remove_extra_whitespaces_) {
    writer.SetBool("tokenizer.ggml.remove_extra_whitespaces", *remove_extra_whitespaces_);
  }
  if (!precompiled_charsmap_.empty()) {
    writer.SetUint8Array("tokenizer.ggml.precompiled_charsmap", precompiled_charsmap_);
  }
  if (!chat_template_.empty()) writer.SetString("tokenizer.chat_template", chat_template_);
}

}  // namespace kvserve
