#include "support/t5_vocab.h"

#include <string>

#include "io/gguf_writer.h"

namespace kvserve::testing {

namespace {

std::vector<uint8_t> FromHex(const std::string& hex) {
  std::vector<uint8_t> out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

// An array of uint8, through CopyValue (GgufWriter has no setter for one).
void SetUint8Array(GgufWriter& writer, const std::string& key, const std::vector<uint8_t>& bytes) {
  GgufValue value;
  value.type = GgufValueType::kArray;
  value.array_type = GgufValueType::kUint8;
  value.array_size = bytes.size();
  value.array_data = bytes.data();
  writer.CopyValue(key, value);
}

}  // namespace

std::vector<uint8_t> T5StyleVocab(const nlohmann::json& vocab) {
  GgufWriter writer;
  writer.SetString("general.architecture", "t5");
  writer.SetString("general.name", "kvserve t5 tokenizer test");
  writer.SetString("tokenizer.ggml.model", "t5");
  writer.SetString("tokenizer.ggml.pre", "default");
  writer.SetStringArray("tokenizer.ggml.tokens",
                        vocab.at("tokens").get<std::vector<std::string>>());
  writer.SetFloat32Array("tokenizer.ggml.scores", vocab.at("scores").get<std::vector<float>>());
  writer.SetInt32Array("tokenizer.ggml.token_type", vocab.at("types").get<std::vector<int32_t>>());
  writer.SetBool("tokenizer.ggml.add_space_prefix", vocab.at("add_dummy_prefix").get<bool>());
  writer.SetBool("tokenizer.ggml.remove_extra_whitespaces",
                 vocab.at("remove_extra_whitespaces").get<bool>());
  if (vocab.contains("precompiled_charsmap_hex")) {
    SetUint8Array(writer, "tokenizer.ggml.precompiled_charsmap",
                  FromHex(vocab.at("precompiled_charsmap_hex").get<std::string>()));
  }
  for (const auto& [key, value] : vocab.at("keys").items()) {
    if (value.is_boolean()) {
      writer.SetBool("tokenizer.ggml." + key, value.get<bool>());
    } else {
      writer.SetUint32("tokenizer.ggml." + key, value.get<uint32_t>());
    }
  }
  return writer.Serialize();
}

}  // namespace kvserve::testing
