#include "io/hf_config.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace kvserve {

using nlohmann::json;

struct HfConfigReader::Parsed {
  json root;
  std::string source;
  std::string architecture;
  std::string model_type;

  // The key's value; nullptr when absent or null.
  // `key`, or "object.key" inside an object (quantization_config.quant_method).
  const json* Find(const char* key) const {
    const std::string_view k = key;
    const json* in = &root;
    size_t from = 0;
    for (size_t dot = k.find('.'); dot != std::string_view::npos; dot = k.find('.', from)) {
      auto it = in->find(std::string(k.substr(from, dot - from)));
      if (it == in->end() || !it->is_object()) return nullptr;
      in = &*it;
      from = dot + 1;
    }
    auto it = in->find(std::string(k.substr(from)));
    return it == in->end() || it->is_null() ? nullptr : &*it;
  }
};

namespace {

Status UnsupportedValue(const std::string& source, const std::string& key, const json& value,
                        const std::string& why) {
  return Status::InvalidArgument(source + ": '" + key + "' = " + value.dump() +
                                 " is not supported (" + why + ")");
}

// A positive number at `rope[field]` into `out`; absent: `fallback`.
Status RopeNumber(const json& rope, const std::string& source, const std::string& k,
                  const char* field, double fallback, double* out) {
  auto f = rope.find(field);
  if (f == rope.end() || f->is_null()) {
    *out = fallback;
    return Status::Ok();
  }
  if (!f->is_number() || !(f->get<double>() > 0)) {
    return UnsupportedValue(source, k + "." + field, *f, "not a positive number");
  }
  *out = f->get<double>();
  return Status::Ok();
}

// transformers 5 per layer type: {"full_attention": {...}, "sliding_attention": {...}}; the local
// layers take only a base (Gemma 3: rope_local_base_freq).
Status ReadLocalRope(const json& local, const std::string& source, const std::string& k,
                     HfConfig& c) {
  const std::string lk = k + ".sliding_attention";
  if (auto t = local.find("rope_type"); t != local.end() && *t != "default") {
    return UnsupportedValue(source, lk + ".rope_type", *t, "local layers use plain RoPE");
  }
  if (auto theta = local.find("rope_theta"); theta != local.end()) {
    if (!theta->is_number() || !(theta->get<double>() > 0)) {
      return UnsupportedValue(source, lk + ".rope_theta", *theta, "not a positive number");
    }
    c.rope_local_theta = theta->get<double>();
  }
  return Status::Ok();
}

// The llama3 scaling's factors.
Status ReadLlama3Rope(const json& rope, const std::string& source, const std::string& k,
                      HfConfig& c) {
  c.rope_scaling = HfRopeScaling::kLlama3;
  double original = 8192;
  KVSERVE_RETURN_IF_ERROR(RopeNumber(rope, source, k, "factor", 8.0, &c.rope_factor));
  KVSERVE_RETURN_IF_ERROR(
      RopeNumber(rope, source, k, "low_freq_factor", 1.0, &c.rope_low_freq_factor));
  KVSERVE_RETURN_IF_ERROR(
      RopeNumber(rope, source, k, "high_freq_factor", 4.0, &c.rope_high_freq_factor));
  KVSERVE_RETURN_IF_ERROR(
      RopeNumber(rope, source, k, "original_max_position_embeddings", 8192, &original));
  if (original != static_cast<int>(original) || original > (1 << 24)) {
    return UnsupportedValue(source, k + ".original_max_position_embeddings",
                            rope["original_max_position_embeddings"], "not an integer context");
  }
  c.rope_original_ctx = static_cast<int>(original);
  return Status::Ok();
}

// YaRN as llama.cpp computes it: factor and original context; beta_fast 32 and beta_slow 1 (what
// llama.cpp always uses); no attention_factor override. gpt-oss's "truncate": false (its
// correction range unrounded) is read as llama.cpp reads it: rounded.
Status ReadYarnRope(const json& rope, const std::string& source, const std::string& k,
                    HfConfig& c) {
  c.rope_scaling = HfRopeScaling::kYarn;
  KVSERVE_RETURN_IF_ERROR(RopeNumber(rope, source, k, "factor", 1.0, &c.rope_factor));
  for (const auto& [field, wanted] : {std::pair{"beta_fast", 32.0}, {"beta_slow", 1.0}}) {
    double value = wanted;
    KVSERVE_RETURN_IF_ERROR(RopeNumber(rope, source, k, field, wanted, &value));
    if (value != wanted) {
      return UnsupportedValue(source, k + "." + field, rope[field],
                              "llama.cpp's YaRN uses " + std::to_string(wanted));
    }
  }
  for (const char* field : {"attention_factor", "mscale", "mscale_all_dim"}) {
    if (auto f = rope.find(field); f != rope.end() && !f->is_null()) {
      return UnsupportedValue(source, k + "." + field, *f, "kvserve's YaRN has no such factor");
    }
  }
  double original = 4096;
  KVSERVE_RETURN_IF_ERROR(
      RopeNumber(rope, source, k, "original_max_position_embeddings", 4096, &original));
  if (original != static_cast<int>(original) || original > (1 << 24)) {
    return UnsupportedValue(source, k + ".original_max_position_embeddings",
                            rope["original_max_position_embeddings"], "not an integer context");
  }
  c.rope_original_ctx = static_cast<int>(original);
  return Status::Ok();
}

}  // namespace

Result<HfConfigReader> HfConfigReader::Parse(std::string_view json_text,
                                             const std::string& source) {
  auto parsed = std::make_shared<Parsed>();
  parsed->source = source;
  try {
    parsed->root = json::parse(json_text);
  } catch (const json::exception& e) {
    return Status::InvalidArgument(source + ": not valid JSON: " + e.what());
  }
  json& root = parsed->root;
  if (!root.is_object()) return Status::InvalidArgument(source + ": not a JSON object");
  if (auto it = root.find("model_type"); it != root.end() && it->is_string()) {
    parsed->model_type = it->get<std::string>();
  }
  // A multimodal config's text_config is read as top-level keys (the converter merges it so).
  if (auto it = root.find("text_config"); it != root.end() && it->is_object()) {
    json text = *it;
    root.erase("text_config");
    for (auto& [key, value] : text.items()) {
      if (key != "architectures" && key != "model_type") root[key] = value;
    }
  }
  if (auto it = root.find("architectures");
      it != root.end() && it->is_array() && !it->empty() && (*it)[0].is_string()) {
    parsed->architecture = (*it)[0].get<std::string>();
  }
  return HfConfigReader(std::move(parsed));
}

Result<HfConfigReader> HfConfigReader::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument("cannot open '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return Parse(text.str(), path);
}

const std::string& HfConfigReader::source() const { return parsed_->source; }
const std::string& HfConfigReader::architecture() const { return parsed_->architecture; }
const std::string& HfConfigReader::model_type() const { return parsed_->model_type; }
bool HfConfigReader::Has(const char* key) const { return parsed_->Find(key) != nullptr; }

Status HfConfigReader::Count(std::initializer_list<const char*> keys, int64_t max, int* out,
                             int fallback) const {
  for (const char* key : keys) {
    const json* value = parsed_->Find(key);
    if (value == nullptr) continue;
    if (!value->is_number_integer() || value->get<int64_t>() <= 0 || value->get<int64_t>() > max) {
      return Status::InvalidArgument(source() + ": '" + key + "' = " + value->dump() +
                                     " is not an integer from 1 to " + std::to_string(max));
    }
    *out = static_cast<int>(value->get<int64_t>());
    return Status::Ok();
  }
  if (fallback != 0) {
    *out = fallback;
    return Status::Ok();
  }
  return Status::InvalidArgument(source() + ": missing required key '" + *keys.begin() + "'");
}

Status HfConfigReader::Float(const char* key, double* out, bool required) const {
  const json* value = parsed_->Find(key);
  if (value == nullptr) {
    return required ? Status::InvalidArgument(source() + ": missing required key '" + key + "'")
                    : Status::Ok();
  }
  if (!value->is_number() || !(value->get<double>() > 0)) {
    return Status::InvalidArgument(source() + ": '" + key + "' = " + value->dump() +
                                   " is not a positive number");
  }
  *out = value->get<double>();
  return Status::Ok();
}

Status HfConfigReader::Bool(const char* key, bool* out) const {
  const json* value = parsed_->Find(key);
  if (value == nullptr) return Status::Ok();
  if (!value->is_boolean()) {
    return Status::InvalidArgument(source() + ": '" + key + "' = " + value->dump() +
                                   " is not a boolean");
  }
  *out = value->get<bool>();
  return Status::Ok();
}

Status HfConfigReader::TokenId(const char* key, int64_t* out) const {
  const json* found = parsed_->Find(key);
  if (found == nullptr) return Status::Ok();
  const json& value = found->is_array() && !found->empty() ? (*found)[0] : *found;
  if (!value.is_number_integer() || value.get<int64_t>() < 0) {
    return Status::InvalidArgument(source() + ": '" + key + "' = " + found->dump() +
                                   " is not a token id");
  }
  *out = value.get<int64_t>();
  return Status::Ok();
}

Status HfConfigReader::OneOf(const char* key, std::initializer_list<const char*> allowed) const {
  const json* value = parsed_->Find(key);
  if (value == nullptr) return Status::Ok();
  std::string names;
  for (const char* name : allowed) {
    if (value->is_string() && value->get<std::string>() == name) return Status::Ok();
    names += std::string(names.empty() ? "" : ", ") + name;
  }
  return Status::InvalidArgument(source() + ": '" + key + "' = " + value->dump() +
                                 " is not supported (supported: " + names + ")");
}

Status HfConfigReader::RequireBool(const char* key, bool wanted, bool absent_ok,
                                   const std::string& why) const {
  const json* value = parsed_->Find(key);
  if (value == nullptr) {
    if (absent_ok) return Status::Ok();
    return Status::InvalidArgument(source() + ": '" + key + "' is absent, which means " +
                                   (wanted ? "false" : "true") + ": not supported (" + why + ")");
  }
  if (value->is_boolean() && value->get<bool>() == wanted) return Status::Ok();
  return Unsupported(key, why);
}

Status HfConfigReader::RequireNumber(const char* key, double wanted, const std::string& why) const {
  const json* value = parsed_->Find(key);
  if (value == nullptr || *value == wanted) return Status::Ok();
  return Unsupported(key, why);
}

Status HfConfigReader::RequireAbsent(const char* key, const std::string& why) const {
  const json* value = parsed_->Find(key);
  if (value == nullptr || (value->is_array() && value->empty())) return Status::Ok();
  return Unsupported(key, why);
}

Result<std::vector<std::string>> HfConfigReader::StringList(const char* key, size_t size,
                                                            const std::string& why) const {
  const json* value = parsed_->Find(key);
  if (value == nullptr || !value->is_array() || value->size() != size) return Unsupported(key, why);
  std::vector<std::string> out;
  for (const json& item : *value) {
    if (!item.is_string()) return Unsupported(key, why);
    out.push_back(item.get<std::string>());
  }
  return out;
}

Result<std::vector<int64_t>> HfConfigReader::IntList(const char* key, size_t max_size,
                                                     const std::string& why) const {
  const json* value = parsed_->Find(key);
  if (value == nullptr || !value->is_array() || value->size() > max_size) {
    return Unsupported(key, why);
  }
  std::vector<int64_t> out;
  for (const json& item : *value) {
    if (!item.is_number_integer() || item.get<int64_t>() < 0 || item.get<int64_t>() > INT32_MAX) {
      return Unsupported(key, why);
    }
    out.push_back(item.get<int64_t>());
  }
  return out;
}

Status HfConfigReader::Unsupported(const char* key, const std::string& why) const {
  const json* value = parsed_->Find(key);
  return UnsupportedValue(source(), key, value != nullptr ? *value : json(), why);
}

Status HfConfigReader::ReadRope(const HfRopeRules& rules, HfConfig& c) const {
  const char* key = "rope_parameters";
  const json* found = parsed_->Find(key);
  if (found == nullptr) {
    key = "rope_scaling";
    found = parsed_->Find(key);
  }
  if (found == nullptr) return Status::Ok();
  if (!found->is_object()) return Unsupported(key, "not an object");
  std::string k = key;
  const json* chosen = found;
  if (auto local = found->find("sliding_attention"); local != found->end() && local->is_object()) {
    KVSERVE_RETURN_IF_ERROR(ReadLocalRope(*local, source(), k, c));
  }
  if (auto full = found->find("full_attention"); full != found->end() && full->is_object()) {
    chosen = &*full;
    k += ".full_attention";
  } else if (found->contains("sliding_attention")) {
    return Status::Ok();  // only local layers described
  }
  const json& rope = *chosen;
  if (auto theta = rope.find("rope_theta"); theta != rope.end() && !theta->is_null()) {
    if (!theta->is_number() || !(theta->get<double>() > 0)) {
      return UnsupportedValue(source(), k + ".rope_theta", *theta, "not a positive number");
    }
    c.rope_theta = theta->get<double>();
    c.rope_theta_given = true;
  }
  auto type = rope.find("rope_type");
  std::string type_key = k + ".rope_type";
  if (type == rope.end()) {
    type = rope.find("type");
    type_key = k + ".type";
  }
  if (type == rope.end() || !type->is_string()) {
    return Status::InvalidArgument(source() + ": '" + k + "' = " + rope.dump() +
                                   " has no rope_type string");
  }
  const std::string name = type->get<std::string>();
  if (name == "default") return Status::Ok();
  if (name == "linear" && rules.linear) {
    if (rope.find("factor") == rope.end()) {
      return Status::InvalidArgument(source() + ": '" + k + "' = " + rope.dump() +
                                     " has no factor");
    }
    c.rope_scaling = HfRopeScaling::kLinear;
    return RopeNumber(rope, source(), k, "factor", 1.0, &c.rope_factor);
  }
  if (name == "llama3" && rules.llama3) return ReadLlama3Rope(rope, source(), k, c);
  if (name == "yarn" && rules.yarn) return ReadYarnRope(rope, source(), k, c);
  return UnsupportedValue(source(), type_key, *type, rules.supported);
}

}  // namespace kvserve
