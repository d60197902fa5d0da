#include "io/hf_unigram.h"

#include "util/base64.h"

namespace kvserve {

namespace {

using nlohmann::json;

constexpr const char* kSpmSpace = "\xE2\x96\x81";  // ▁
constexpr const char* kSpaceRuns = " {2,}";        // transformers' remove_extra_whitespaces

Status Refuse(const std::string& what) { return Status::InvalidArgument(what); }

// `node`, or its children when it is a Sequence (in `list`), in order.
std::vector<const json*> StagesOf(const json& node, const char* list) {
  std::vector<const json*> out;
  if (node.is_object() && node.value("type", std::string()) == "Sequence" && node.contains(list) &&
      node[list].is_array()) {
    for (const json& child : node[list]) {
      for (const json* stage : StagesOf(child, list)) out.push_back(stage);
    }
  } else if (!node.is_null()) {
    out.push_back(&node);
  }
  return out;
}

std::string TypeOf(const json& stage) {
  return stage.is_object() && stage.contains("type") && stage["type"].is_string()
             ? stage["type"].get<std::string>()
             : std::string();
}

Status ReadVocab(const json& model, HfUnigram& out) {
  const auto vocab = model.find("vocab");
  if (vocab == model.end() || !vocab->is_array()) {
    return Refuse("model.vocab is not an array of [piece, score]");
  }
  for (size_t id = 0; id < vocab->size(); ++id) {
    const json& entry = (*vocab)[id];
    if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string() || !entry[1].is_number()) {
      return Refuse("model.vocab[" + std::to_string(id) + "] = " + entry.dump() +
                    " is not [piece, score]");
    }
    out.pieces.push_back(entry[0].get<std::string>());
    out.scores.push_back(static_cast<float>(entry[1].get<double>()));
  }
  const json unk = model.value("unk_id", json());
  if (!unk.is_number_integer() || unk.get<int64_t>() < 0 ||
      unk.get<int64_t>() >= static_cast<int64_t>(out.pieces.size())) {
    return Refuse("model.unk_id " + unk.dump() + " is not a piece id below " +
                  std::to_string(out.pieces.size()) +
                  " (a SentencePiece unigram model always has an unknown piece)");
  }
  out.unk_id = static_cast<int32_t>(unk.get<int64_t>());
  if (model.value("byte_fallback", false)) {
    return Refuse(
        "model.byte_fallback true is not supported: llama.cpp's unigram tokenizer "
        "never falls back to byte tokens");
  }
  return Status::Ok();
}

// Precompiled first, then the whitespace recipe: Replace(" {2,}"), Strip allowed before it.
Status ReadNormalizer(const json& normalizer, HfUnigram& out) {
  const std::vector<const json*> stages = StagesOf(normalizer, "normalizers");
  bool strip = false;
  for (size_t i = 0; i < stages.size(); ++i) {
    const json& stage = *stages[i];
    const std::string type = TypeOf(stage);
    if (type == "Precompiled" && i == 0) {
      const json charsmap = stage.value("precompiled_charsmap", json());
      if (charsmap.is_null() || (charsmap.is_string() && charsmap.get<std::string>().empty())) {
        continue;
      }
      if (!charsmap.is_string()) return Refuse("normalizer Precompiled: charsmap is not a string");
      auto bytes = Base64Decode(charsmap.get<std::string>());
      if (!bytes.ok()) {
        return Refuse("normalizer Precompiled precompiled_charsmap: " + bytes.message());
      }
      out.precompiled_charsmap = std::move(*bytes);
    } else if (type == "Strip" && stage.value("strip_right", true)) {
      strip = true;
    } else if (type == "Replace" && stage.contains("pattern") && stage["pattern"].is_object() &&
               stage["pattern"].value("Regex", std::string()) == kSpaceRuns &&
               (stage.value("content", std::string()) == kSpmSpace ||
                stage.value("content", std::string()) == " ")) {
      out.remove_extra_whitespaces = true;
    } else if (type == "Precompiled") {
      return Refuse("normalizer stage " + std::to_string(i) + " Precompiled after another stage " +
                    "is not supported (SentencePiece applies its charsmap first)");
    } else {
      return Refuse("normalizer stage " + std::to_string(i) + " " + stage.dump() +
                    " is not supported for a Unigram model (supported: Precompiled first, then "
                    "Strip and Replace(Regex \" {2,}\") as transformers writes them)");
    }
  }
  if (strip && !out.remove_extra_whitespaces) {
    return Refuse(
        "normalizer Strip without Replace(Regex \" {2,}\") is not SentencePiece's "
        "remove_extra_whitespaces, which strips and collapses together");
  }
  return Status::Ok();
}

// Metaspace("▁"), after an optional WhitespaceSplit.
Status ReadPreTokenizer(const json& pre, HfUnigram& out) {
  const std::vector<const json*> parts = StagesOf(pre, "pretokenizers");
  const bool split = parts.size() == 2 && TypeOf(*parts[0]) == "WhitespaceSplit";
  if (parts.empty() || parts.size() > 2 || (parts.size() == 2 && !split) ||
      TypeOf(*parts.back()) != "Metaspace") {
    return Refuse("pre_tokenizer " + pre.dump() +
                  " is not supported for a Unigram model (supported: Metaspace, or WhitespaceSplit "
                  "then Metaspace)");
  }
  const json& meta = *parts.back();
  if (meta.value("replacement", std::string(kSpmSpace)) != kSpmSpace) {
    return Refuse("pre_tokenizer Metaspace replacement " + meta["replacement"].dump() +
                  " is not \"\xE2\x96\x81\"");
  }
  std::string scheme = meta.value("add_prefix_space", true) ? "always" : "never";
  if (meta.contains("prepend_scheme")) scheme = meta.value("prepend_scheme", std::string());
  if (scheme != "always" && scheme != "first" && scheme != "never") {
    return Refuse("pre_tokenizer Metaspace prepend_scheme " + meta["prepend_scheme"].dump() +
                  " is not \"always\", \"first\" or \"never\"");
  }
  if (split && scheme != "always") {
    return Refuse("pre_tokenizer " + pre.dump() + ": WhitespaceSplit with prepend_scheme \"" +
                  scheme +
                  "\" joins the words without a \xE2\x96\x81, which SentencePiece never does");
  }
  out.add_space_prefix = scheme != "never";
  out.remove_extra_whitespaces = out.remove_extra_whitespaces || split;
  return Status::Ok();
}

// TemplateProcessing single: [special] $A [special].
Status ReadPostProcessor(const json& post, HfUnigram& out) {
  if (post.is_null()) return Status::Ok();
  const json single = post.value("single", json());
  const auto special = [](const json& item) {
    return item.is_object() && item.contains("SpecialToken") && item["SpecialToken"].is_object()
               ? item["SpecialToken"].value("id", std::string())
               : std::string();
  };
  const auto sequence_a = [](const json& item) {
    return item.is_object() && item.contains("Sequence") && item["Sequence"].is_object() &&
           item["Sequence"].value("id", std::string()) == "A";
  };
  if (TypeOf(post) == "TemplateProcessing" && single.is_array() && !single.empty()) {
    const size_t a = single.size() >= 2 && !special(single[0]).empty() ? 1 : 0;
    const size_t n_after = single.size() - a - 1;
    if (a < single.size() && sequence_a(single[a]) &&
        (n_after == 0 || (n_after == 1 && !special(single.back()).empty()))) {
      if (a == 1) out.first_special = special(single[0]);
      if (n_after == 1) out.last_special = special(single.back());
      return Status::Ok();
    }
  }
  return Refuse("post_processor " + post.dump() +
                " is not supported for a Unigram model (supported: none, or TemplateProcessing "
                "whose single template is $A with at most one special token before and after)");
}

}  // namespace

Result<HfUnigram> ReadHfUnigram(const json& root) {
  HfUnigram out;
  const json null;
  const auto field = [&](const char* name) -> const json& {
    return root.contains(name) ? root[name] : null;
  };
  KVSERVE_RETURN_IF_ERROR(ReadVocab(field("model"), out));
  KVSERVE_RETURN_IF_ERROR(ReadNormalizer(field("normalizer"), out));
  KVSERVE_RETURN_IF_ERROR(ReadPreTokenizer(field("pre_tokenizer"), out));
  KVSERVE_RETURN_IF_ERROR(ReadPostProcessor(field("post_processor"), out));
  return out;
}

}  // namespace kvserve
