#include "support/t5_tokenizer_json.h"

#include <cstdint>
#include <filesystem>
#include <vector>

#include "support/safetensors_builder.h"

namespace kvserve::testing {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;

constexpr int kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5;
constexpr const char* kSpmSpace = "\xE2\x96\x81";

std::string Base64(const std::string& hex) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t group = 0;
    for (size_t k = 0; k < 3; ++k) group = group << 8 | (k < n ? bytes[i + k] : 0);
    for (size_t k = 0; k < 4; ++k) {
      out.push_back(k <= n ? kAlphabet[(group >> (18 - 6 * k)) & 63] : '=');
    }
  }
  return out;
}

// The number of sentencepiece pieces: the entries before the trailing run of [PADn] unused
// tokens and user-defined tokens at -1000 that the converter adds (make_vocab.py).
size_t PieceCount(const json& vocab) {
  const auto& types = vocab.at("types");
  const auto& scores = vocab.at("scores");
  size_t n = types.size();
  while (n > 0 && ((types[n - 1] == kUnused && scores[n - 1] == -10000.0) ||
                   (types[n - 1] == kUserDefined && scores[n - 1] == -1000.0))) {
    --n;
  }
  return n;
}

std::string TokenAt(const json& vocab, const char* key) {
  const json& keys = vocab.at("keys");
  return keys.contains(key) ? vocab.at("tokens")[keys.at(key).get<size_t>()].get<std::string>()
                            : std::string();
}

ordered_json AddedTokens(const json& vocab) {
  const auto& tokens = vocab.at("tokens");
  const auto& types = vocab.at("types");
  const size_t n_pieces = PieceCount(vocab);
  ordered_json added = ordered_json::array();
  for (size_t id = 0; id < tokens.size(); ++id) {
    const int type = types[id].get<int>();
    const std::string text = tokens[id].get<std::string>();
    const bool special = id < n_pieces ? type != kUserDefined : text.starts_with("<extra_id_");
    if (type == kNormal || type == kUnused || type > kUnused ||
        (id >= n_pieces && type != kUserDefined)) {
      continue;
    }
    added.push_back({{"id", id},
                     {"content", text},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", special}});
  }
  return added;
}

ordered_json Normalizer(const json& vocab, T5JsonStyle style) {
  ordered_json stages = ordered_json::array();
  if (vocab.contains("precompiled_charsmap_hex")) {
    stages.push_back({{"type", "Precompiled"},
                      {"precompiled_charsmap",
                       Base64(vocab.at("precompiled_charsmap_hex").get<std::string>())}});
  }
  if (style == T5JsonStyle::kCurrent && vocab.at("remove_extra_whitespaces").get<bool>()) {
    stages.push_back({{"type", "Strip"}, {"strip_left", false}, {"strip_right", true}});
    stages.push_back(
        {{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", kSpmSpace}});
  }
  if (stages.empty()) return nullptr;
  if (stages.size() == 1) return stages[0];
  return {{"type", "Sequence"}, {"normalizers", stages}};
}

ordered_json PreTokenizer(const json& vocab, T5JsonStyle style) {
  const bool prefix = vocab.at("add_dummy_prefix").get<bool>();
  if (style == T5JsonStyle::kLegacy) {
    const ordered_json meta = {
        {"type", "Metaspace"}, {"replacement", kSpmSpace}, {"add_prefix_space", prefix}};
    if (!vocab.at("remove_extra_whitespaces").get<bool>()) return meta;
    return {{"type", "Sequence"}, {"pretokenizers", {{{"type", "WhitespaceSplit"}}, meta}}};
  }
  return {{"type", "Metaspace"},
          {"replacement", kSpmSpace},
          {"prepend_scheme", prefix ? "always" : "never"},
          {"split", true}};
}

ordered_json PostProcessor(const json& vocab) {
  const json& keys = vocab.at("keys");
  const std::string bos = keys.value("add_bos_token", false) ? TokenAt(vocab, "bos_token_id") : "";
  const std::string eos = keys.value("add_eos_token", true) ? TokenAt(vocab, "eos_token_id") : "";
  ordered_json specials = ordered_json::object();
  const auto special = [&](const std::string& text, const char* key) {
    specials[text] = {{"id", text}, {"ids", {keys.at(key)}}, {"tokens", {text}}};
    return ordered_json{{"SpecialToken", {{"id", text}, {"type_id", 0}}}};
  };
  const auto sequence = [](const char* id) {
    return ordered_json{{"Sequence", {{"id", id}, {"type_id", 0}}}};
  };
  ordered_json single = ordered_json::array();  // [<s>] $A [</s>]; pair: that, $B [</s>]
  if (!bos.empty()) single.push_back(special(bos, "bos_token_id"));
  single.push_back(sequence("A"));
  if (!eos.empty()) single.push_back(special(eos, "eos_token_id"));
  ordered_json pair = single;
  pair.push_back(sequence("B"));
  if (!eos.empty()) pair.push_back(special(eos, "eos_token_id"));
  return {{"type", "TemplateProcessing"},
          {"single", single},
          {"pair", pair},
          {"special_tokens", specials}};
}

}  // namespace

nlohmann::ordered_json T5TokenizerJson(const nlohmann::json& vocab, T5JsonStyle style) {
  ordered_json pieces = ordered_json::array();
  int64_t unk_id = -1;
  for (size_t id = 0; id < PieceCount(vocab); ++id) {
    pieces.push_back({vocab.at("tokens")[id], vocab.at("scores")[id]});
    if (vocab.at("types")[id] == kUnknown) unk_id = static_cast<int64_t>(id);
  }
  const bool prefix = vocab.at("add_dummy_prefix").get<bool>();
  ordered_json decoder = {{"type", "Metaspace"}, {"replacement", kSpmSpace}};
  decoder["prepend_scheme"] = prefix ? "always" : "never";
  decoder["split"] = true;
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", AddedTokens(vocab)},
          {"normalizer", Normalizer(vocab, style)},
          {"pre_tokenizer", PreTokenizer(vocab, style)},
          {"post_processor", PostProcessor(vocab)},
          {"decoder", decoder},
          {"model",
           {{"type", "Unigram"}, {"unk_id", unk_id}, {"vocab", pieces}, {"byte_fallback", false}}}};
}

nlohmann::ordered_json T5TokenizerConfig(const nlohmann::json& vocab) {
  ordered_json config = ordered_json::object();
  const std::pair<const char*, const char*> names[] = {{"bos_token", "bos_token_id"},
                                                       {"eos_token", "eos_token_id"},
                                                       {"unk_token", "unknown_token_id"},
                                                       {"pad_token", "padding_token_id"}};
  for (const auto& [name, key] : names) {
    const std::string text = TokenAt(vocab, key);
    if (!text.empty()) config[name] = text;
  }
  for (const char* key : {"add_bos_token", "add_eos_token"}) {
    if (vocab.at("keys").contains(key)) config[key] = vocab.at("keys").at(key);
  }
  config["tokenizer_class"] = "T5Tokenizer";
  return config;
}

std::string WriteT5TokenizerFolder(const nlohmann::json& vocab, T5JsonStyle style,
                                   const std::string& folder) {
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  if (error) return folder + ": " + error.message();
  if (!WriteText(folder + "/tokenizer.json", T5TokenizerJson(vocab, style).dump())) {
    return folder + "/tokenizer.json: not written";
  }
  if (!WriteText(folder + "/tokenizer_config.json", T5TokenizerConfig(vocab).dump(2))) {
    return folder + "/tokenizer_config.json: not written";
  }
  return "";
}

}  // namespace kvserve::testing
