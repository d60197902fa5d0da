#include "model/qwen35_hf.h"

#include <map>
#include <string>
#include <string_view>

#include "model/hf_families.h"

namespace kvserve {

namespace {

// A count that may be 0: absent leaves `out`, 0 gives 0, else a positive integer up to `max`.
Status CountOrZero(const HfConfigReader& r, const char* key, int64_t max, int* out) {
  if (!r.Has(key)) return Status::Ok();
  if (r.RequireNumber(key, 0, "").ok()) {
    *out = 0;
    return Status::Ok();
  }
  return r.Count({key}, max, out);
}

// The decoder's keys (TextModel.set_gguf_parameters), and what kvserve's gated attention needs;
// intermediate_size is the dense model's (a mixture's layers have none: optional there, and the
// converter then writes no feed_forward_length).
Status ReadQwen35Shape(const HfConfigReader& r, HfConfig& c, bool dense = true) {
  KVSERVE_RETURN_IF_ERROR(r.Count({"hidden_size"}, kMaxHfDim, &c.n_embd));
  KVSERVE_RETURN_IF_ERROR(r.Count({"num_hidden_layers"}, 4096, &c.n_layers));
  KVSERVE_RETURN_IF_ERROR(r.Count({"num_attention_heads"}, 4096, &c.n_heads));
  KVSERVE_RETURN_IF_ERROR(r.Count({"num_key_value_heads"}, 4096, &c.n_kv_heads, c.n_heads));
  if (dense || r.Has("intermediate_size")) {
    KVSERVE_RETURN_IF_ERROR(r.Count({"intermediate_size"}, kMaxHfDim, &c.n_ff));
  }
  KVSERVE_RETURN_IF_ERROR(r.Count({"max_position_embeddings"}, 1 << 24, &c.n_ctx));
  KVSERVE_RETURN_IF_ERROR(r.Float("rms_norm_eps", &c.norm_eps, true));
  c.tie_word_embeddings = false;
  KVSERVE_RETURN_IF_ERROR(r.Bool("tie_word_embeddings", &c.tie_word_embeddings));
  KVSERVE_RETURN_IF_ERROR(r.OneOf("hidden_act", {"silu"}));
  const std::string why_bias = "kvserve's qwen35 has no such biases";
  KVSERVE_RETURN_IF_ERROR(r.RequireBool("attention_bias", false, true, why_bias));
  KVSERVE_RETURN_IF_ERROR(r.RequireBool("mlp_bias", false, true, why_bias));
  KVSERVE_RETURN_IF_ERROR(r.RequireBool(
      "attn_output_gate", true, true,
      "kvserve's qwen35 gates every attention output: q_proj holds each head's q, then its gate"));
  return ReadHfHeadDim(r, /*always=*/false, 0, c);
}

// Qwen3NextModel's ssm.* keys: the Gated DeltaNet layers' heads, their size and conv kernel.
Status ReadQwen35LinearAttention(const HfConfigReader& r, HfConfig& c) {
  KVSERVE_RETURN_IF_ERROR(r.Count({"linear_num_key_heads"}, 4096, &c.ssm_k_heads));
  KVSERVE_RETURN_IF_ERROR(r.Count({"linear_num_value_heads"}, 4096, &c.ssm_v_heads));
  KVSERVE_RETURN_IF_ERROR(r.Count({"linear_key_head_dim"}, 1024, &c.ssm_head_dim));
  int v_head_dim = 0;
  KVSERVE_RETURN_IF_ERROR(r.Count({"linear_value_head_dim"}, 1024, &v_head_dim));
  KVSERVE_RETURN_IF_ERROR(r.Count({"linear_conv_kernel_dim"}, 64, &c.ssm_conv_kernel));
  if (v_head_dim != c.ssm_head_dim) {
    return r.Unsupported("linear_value_head_dim",
                         "kvserve's qwen35 needs it equal to linear_key_head_dim " +
                             std::to_string(c.ssm_head_dim) + " (one ssm.state_size)");
  }
  if (c.ssm_v_heads % c.ssm_k_heads != 0) {
    return r.Unsupported("linear_num_value_heads",
                         "not a multiple of linear_num_key_heads " + std::to_string(c.ssm_k_heads));
  }
  return Status::Ok();
}

// full_attention_interval (the converter's default 4; layer_types, which it does not read, must
// agree) and the MTP layers.
Status ReadQwen35Layers(const HfConfigReader& r, HfConfig& c) {
  KVSERVE_RETURN_IF_ERROR(
      r.Count({"full_attention_interval"}, 4096, &c.full_attention_interval, 4));
  if (r.Has("layer_types")) {
    const std::string n = std::to_string(c.n_layers);
    auto types = r.StringList("layer_types", static_cast<size_t>(c.n_layers),
                              "not a list of " + n + " layer types");
    if (!types.ok()) return types.status();
    for (int i = 0; i < c.n_layers; ++i) {
      const bool full = (i + 1) % c.full_attention_interval == 0;
      const char* wanted = full ? "full_attention" : "linear_attention";
      if ((*types)[i] != wanted) {
        return r.Unsupported("layer_types", "layer " + std::to_string(i) + " is '" + (*types)[i] +
                                                "' where full_attention_interval " +
                                                std::to_string(c.full_attention_interval) +
                                                " gives '" + wanted +
                                                "'; the converter writes only the interval");
      }
    }
  }
  return CountOrZero(r, "mtp_num_hidden_layers", 64, &c.n_nextn_layers);
}

// Whether M-RoPE `sections` turn every pair of the first rope_dims dimensions by one of the
// first three positions (which text tokens set alike): llama.cpp's interleaved layout gives pair
// i sector i % Σ sections, by sector % 3 the t, h or w position while within 3 x that section,
// else the fourth (0 for text). The loader's own check (arch/qwen35.cc), made here to name the key.
bool SectionsTurnTextAlike(const std::vector<int>& sections, int rope_dims) {
  int64_t total = 0;
  for (int s : sections) total += s;
  if (total <= 0) return false;
  for (int i = 0; i < rope_dims / 2; ++i) {
    const int64_t sector = i % total;
    if (sector >= 3 * static_cast<int64_t>(sections[sector % 3])) return false;
  }
  return true;
}

// rope_parameters (or rope_scaling when that is absent): the type, theta (inside, else the
// top-level one), partial_rotary_factor (inside, else top-level, else 0.25) and mrope_section.
Status ReadQwen35Rope(const HfConfigReader& r, HfConfig& c) {
  const std::string p = r.Has("rope_parameters") ? "rope_parameters." : "rope_scaling.";
  const std::string type = r.Has((p + "rope_type").c_str()) ? p + "rope_type" : p + "type";
  KVSERVE_RETURN_IF_ERROR(r.OneOf(type.c_str(), {"default", "mrope"}));
  const std::string theta = r.Has((p + "rope_theta").c_str()) ? p + "rope_theta" : "rope_theta";
  c.rope_theta_given = r.Has(theta.c_str());
  KVSERVE_RETURN_IF_ERROR(r.Float(theta.c_str(), &c.rope_theta, false));
  const std::string partial_key = r.Has((p + "partial_rotary_factor").c_str())
                                      ? p + "partial_rotary_factor"
                                      : "partial_rotary_factor";
  double partial = 0.25;
  KVSERVE_RETURN_IF_ERROR(r.Float(partial_key.c_str(), &partial, false));
  c.rope_dims = static_cast<int>(c.head_dim * partial);  // Python's int(): truncated
  if (partial > 1.0 || c.rope_dims < 2 || c.rope_dims % 2 != 0) {
    return r.Unsupported(partial_key.c_str(),
                         "gives rope.dimension_count " + std::to_string(c.rope_dims) +
                             " of a head of " + std::to_string(c.head_dim) +
                             "; kvserve turns an even part of the head, at least one pair");
  }
  c.rope_sections = {11, 11, 10, 0};  // _Qwen35MRopeMixin's default
  const std::string sections_key = p + "mrope_section";
  if (r.Has(sections_key.c_str())) {
    auto sections = r.IntList(sections_key.c_str(), 64, "not a list of integers");
    if (!sections.ok()) return sections.status();
    c.rope_sections.assign(sections->begin(), sections->end());
    c.rope_sections.resize(4, 0);  // padded to, then cut at, [time, height, width, extra]
  }
  if (!SectionsTurnTextAlike(c.rope_sections, c.rope_dims)) {
    return r.Unsupported(sections_key.c_str(),
                         "leaves some of the " + std::to_string(c.rope_dims / 2) +
                             " rotated pairs to the fourth position; kvserve turns text tokens, "
                             "every pair by the same position");
  }
  return Status::Ok();
}

Status ReadQwen35Layout(const HfConfigReader& r, HfConfig& c, bool dense) {
  KVSERVE_RETURN_IF_ERROR(ReadQwen35Shape(r, c, dense));
  KVSERVE_RETURN_IF_ERROR(ReadQwen35LinearAttention(r, c));
  KVSERVE_RETURN_IF_ERROR(ReadQwen35Layers(r, c));
  return ReadQwen35Rope(r, c);
}

Status ReadQwen35Config(const HfConfigReader& r, HfConfig& c) {
  return ReadQwen35Layout(r, c, /*dense=*/true);
}

// The dense model's keys and the mixture's: TextModel's expert_count (num_local_experts or
// num_experts) and expert_used_count, Qwen2MoeModel's two widths. The converter writes the widths
// only when given; kvserve's qwen35moe needs both. Routing other than a softmax over every expert
// (a score function, expert groups) is refused: kvserve's qwen35moe reads no such key.
Status ReadQwen35MoeConfig(const HfConfigReader& r, HfConfig& c) {
  KVSERVE_RETURN_IF_ERROR(ReadQwen35Layout(r, c, /*dense=*/false));
  // The converter's order; Qwen's own key named when neither is given.
  const char* experts = r.Has("num_local_experts") ? "num_local_experts" : "num_experts";
  KVSERVE_RETURN_IF_ERROR(r.Count({experts}, 1024, &c.n_experts));
  KVSERVE_RETURN_IF_ERROR(r.Count({"num_experts_per_tok", "num_experts_per_token", "top_k_experts"},
                                  c.n_experts, &c.n_experts_used));
  KVSERVE_RETURN_IF_ERROR(r.Count({"moe_intermediate_size"}, kMaxHfDim, &c.n_ff_expert));
  KVSERVE_RETURN_IF_ERROR(
      r.Count({"shared_expert_intermediate_size"}, kMaxHfDim, &c.n_ff_shared_expert));
  for (const char* key :
       {"score_function", "scoring_func", "score_func", "moe_router_activation",
        "moe_router_activation_func", "expert_selection_fn", "n_group", "topk_group"}) {
    KVSERVE_RETURN_IF_ERROR(r.RequireAbsent(
        key, "kvserve's qwen35moe routes by a softmax over every expert, as Qwen3.5 MoE does"));
  }
  return Status::Ok();
}

// One linear_attn tensor: its GGUF name, transform and where its value heads are.
struct LinearAttnName {
  std::string_view hf;  // after "linear_attn."
  std::string_view gguf;
  HfTransform transform = HfTransform::kNone;
  bool tiled = true;       // value heads reordered when key heads are fewer
  bool whole_head = true;  // a value head is head_dim rows (columns); false: one
  bool after_qk = false;   // q and k rows (2 x key_dim) come first: qkv and conv1d
  bool columns = false;    // the heads are input columns (out_proj)
};

constexpr LinearAttnName kLinearAttn[] = {
    {.hf = "in_proj_qkv.weight", .gguf = "attn_qkv.weight", .after_qk = true},
    {.hf = "in_proj_z.weight", .gguf = "attn_gate.weight"},
    {.hf = "in_proj_b.weight", .gguf = "ssm_beta.weight", .whole_head = false},
    {.hf = "in_proj_a.weight", .gguf = "ssm_alpha.weight", .whole_head = false},
    {.hf = "A_log", .gguf = "ssm_a", .transform = HfTransform::kNegExp, .whole_head = false},
    {.hf = "dt_bias", .gguf = "ssm_dt.bias", .whole_head = false},
    {.hf = "conv1d.weight",
     .gguf = "ssm_conv1d.weight",
     .transform = HfTransform::kSqueeze,
     .after_qk = true},
    {.hf = "norm.weight", .gguf = "ssm_norm.weight", .tiled = false},  // gated: no + 1
    {.hf = "out_proj.weight", .gguf = "ssm_out.weight", .columns = true},
};

// HF name after "model.layers.N." -> GGUF name after "blk.N.", norms + 1: the dense model's, or
// (`moe`) with the mixture in place of the MLP (the experts apart: MapHfExperts).
const HfLayerNames& Qwen35LayerNames(bool moe) {
  static const HfLayerNames dense = [] {
    HfLayerNames n = LlamaLayerNames();
    n["post_attention_layernorm.weight"] = "post_attention_norm.weight";
    n["self_attn.q_norm.weight"] = "attn_q_norm.weight";
    n["self_attn.k_norm.weight"] = "attn_k_norm.weight";
    return n;
  }();
  static const HfLayerNames mixture = [] {
    HfLayerNames n = dense;
    for (const char* w : {"gate", "up", "down"}) n.erase("mlp." + std::string(w) + "_proj.weight");
    n["mlp.gate.weight"] = "ffn_gate_inp.weight";  // the router, [n_expert, n_embd]
    n["mlp.shared_expert.gate_proj.weight"] = "ffn_gate_shexp.weight";
    n["mlp.shared_expert.up_proj.weight"] = "ffn_up_shexp.weight";
    n["mlp.shared_expert.down_proj.weight"] = "ffn_down_shexp.weight";
    // [1, n_embd], not squeezed: GGML [n_embd, 1], kept in F32 as the router.
    n["mlp.shared_expert_gate.weight"] = "ffn_gate_inp_shexp.weight";
    return n;
  }();
  return moe ? mixture : dense;
}

Result<HfMapping> MapQwen35Layer(std::string_view rest, const HfConfig& c, int layer) {
  const bool moe = c.n_experts > 0;
  if (HfMapping m; moe && MapHfExperts(std::string(rest), c, layer, &m)) return m;
  if (rest.ends_with("rotary_emb.inv_freq")) return HfMapping{};  // the converter skips it
  if (rest.starts_with("linear_attn.")) {
    rest.remove_prefix(12);
    for (const LinearAttnName& t : kLinearAttn) {
      if (rest != t.hf) continue;
      HfMapping m{.name = GgufBlockName(layer, t.gguf), .transform = t.transform};
      if (t.tiled && c.ssm_k_heads != c.ssm_v_heads) {
        m.tiling = {
            .n_groups = c.ssm_k_heads,
            .per_group = c.ssm_v_heads / c.ssm_k_heads,
            .head_size = t.whole_head ? c.ssm_head_dim : 1,
            .first = t.after_qk ? 2 * static_cast<int64_t>(c.ssm_k_heads) * c.ssm_head_dim : 0,
            .columns = t.columns};
      }
      return m;
    }
    return Status::InvalidArgument("");
  }
  const HfLayerNames& names = Qwen35LayerNames(moe);
  auto it = names.find(rest);
  if (it == names.end()) return Status::InvalidArgument("");
  HfMapping m{.name = GgufBlockName(layer, it->second)};
  if (rest.ends_with("norm.weight")) m.transform = HfTransform::kPlusOne;
  return m;
}

// _QwenMtpMixin's names: mtp.layers.I.* is layer num_hidden_layers + I; mtp.fc, its two input
// norms and its output norm are that first MTP layer's nextn.* tensors.
Result<HfMapping> MapQwen35Mtp(std::string_view name, const HfConfig& c) {
  static const std::map<std::string_view, std::string_view> kNextn = {
      {"mtp.fc.weight", "nextn.eh_proj.weight"},
      {"mtp.pre_fc_norm_embedding.weight", "nextn.enorm.weight"},
      {"mtp.pre_fc_norm_hidden.weight", "nextn.hnorm.weight"},
      {"mtp.norm.weight", "nextn.shared_head_norm.weight"},
  };
  if (c.n_nextn_layers == 0) return Status::InvalidArgument("");
  if (auto it = kNextn.find(name); it != kNextn.end()) {
    // + 1 on the renamed norms (enorm, hnorm, shared_head.norm end in "norm.weight" there).
    HfMapping m{.name = GgufBlockName(c.n_layers, it->second)};
    if (it->second.ends_with("norm.weight")) m.transform = HfTransform::kPlusOne;
    return m;
  }
  int index = 0;
  std::string rest;
  if (!SplitHfLayer(name, "mtp.layers.", &index, &rest) || index >= c.n_nextn_layers) {
    return Status::InvalidArgument("");
  }
  return MapQwen35Layer(rest, c, c.n_layers + index);
}

// What TextModel.filter_tensors leaves out: the vision tower and its merger.
bool IsQwen35Vision(std::string_view name) {
  for (std::string_view part : {"visual.", "vision.", "vision_", "audio.", "audio_", "projector.",
                                "patch_embed", "merger."}) {
    if (name.find(part) != std::string_view::npos) return true;
  }
  return false;
}

Result<HfMapping> MapQwen35Tensor(std::string_view hf_name, const HfConfig& c) {
  std::string name(hf_name);  // "language_model." dropped wherever it is, as the converter does
  for (size_t at; (at = name.find("language_model.")) != std::string::npos;) name.erase(at, 15);
  if (IsQwen35Vision(name)) return HfMapping{};
  if (name.starts_with("model.mtp.")) name.erase(0, 6);
  if (name == "model.embed_tokens.weight") return HfMapping{.name = "token_embd.weight"};
  if (name == "model.norm.weight") {
    return HfMapping{.name = "output_norm.weight", .transform = HfTransform::kPlusOne};
  }
  if (name == "lm_head.weight") {
    return c.tie_word_embeddings ? HfMapping{} : HfMapping{.name = "output.weight"};
  }
  int layer = 0;
  std::string rest;
  Result<HfMapping> mapped = Status::InvalidArgument("");
  if (SplitHfLayer(name, "model.layers.", &layer, &rest) && layer < c.n_layers) {
    mapped = MapQwen35Layer(rest, c, layer);
  } else if (name.starts_with("mtp.")) {
    mapped = MapQwen35Mtp(name, c);
  }
  if (mapped.ok()) return mapped;
  return Status::InvalidArgument("tensor '" + std::string(hf_name) + "' is not part of a " +
                                 std::to_string(c.n_layers) + "-layer " + c.architecture +
                                 " with " + std::to_string(c.n_nextn_layers) + " MTP layers");
}

// Qwen3_5TextModel.set_gguf_parameters' keys.
void WriteQwen35Metadata(const HfConfig& c, GgufWriter& w) {
  const std::string a = c.gguf_arch + ".";
  auto u32 = [&](const char* key, int value) {
    w.SetUint32(a + key, static_cast<uint32_t>(value));
  };
  u32("context_length", c.n_ctx);
  u32("embedding_length", c.n_embd);
  u32("block_count", c.n_layers + c.n_nextn_layers);
  if (c.n_ff > 0) u32("feed_forward_length", c.n_ff);
  u32("attention.head_count", c.n_heads);
  u32("attention.head_count_kv", c.n_kv_heads);
  w.SetInt32Array(a + "rope.dimension_sections", {c.rope_sections.begin(), c.rope_sections.end()});
  if (c.rope_theta_given) w.SetFloat32(a + "rope.freq_base", static_cast<float>(c.rope_theta));
  w.SetFloat32(a + "attention.layer_norm_rms_epsilon", static_cast<float>(c.norm_eps));
  if (c.head_dim_given) {
    u32("attention.key_length", c.head_dim);
    u32("attention.value_length", c.head_dim);
  }
  u32("ssm.conv_kernel", c.ssm_conv_kernel);
  u32("ssm.state_size", c.ssm_head_dim);
  u32("ssm.group_count", c.ssm_k_heads);
  u32("ssm.time_step_rank", c.ssm_v_heads);
  u32("ssm.inner_size", c.ssm_head_dim * c.ssm_v_heads);
  u32("full_attention_interval", c.full_attention_interval);
  u32("rope.dimension_count", c.rope_dims);
  if (c.n_nextn_layers > 0) u32("nextn_predict_layers", c.n_nextn_layers);
}

// Qwen3_5MoeTextModel's: the dense keys and the experts'.
void WriteQwen35MoeMetadata(const HfConfig& c, GgufWriter& w) {
  WriteQwen35Metadata(c, w);
  const std::string a = c.gguf_arch + ".";
  w.SetUint32(a + "expert_count", static_cast<uint32_t>(c.n_experts));
  w.SetUint32(a + "expert_used_count", static_cast<uint32_t>(c.n_experts_used));
  w.SetUint32(a + "expert_feed_forward_length", static_cast<uint32_t>(c.n_ff_expert));
  w.SetUint32(a + "expert_shared_feed_forward_length", static_cast<uint32_t>(c.n_ff_shared_expert));
}

}  // namespace

std::vector<HfClass> Qwen35HfClasses() {
  return {{"Qwen3_5ForConditionalGeneration", "qwen3_5", &ReadQwen35Config, &MapQwen35Tensor,
           &WriteQwen35Metadata},
          {"Qwen3_5ForCausalLM", "qwen3_5_text", &ReadQwen35Config, &MapQwen35Tensor,
           &WriteQwen35Metadata}};
}

std::vector<HfClass> Qwen35MoeHfClasses() {
  return {{"Qwen3_5MoeForConditionalGeneration", "qwen3_5_moe", &ReadQwen35MoeConfig,
           &MapQwen35Tensor, &WriteQwen35MoeMetadata},
          {"Qwen3_5MoeForCausalLM", "qwen3_5_moe_text", &ReadQwen35MoeConfig, &MapQwen35Tensor,
           &WriteQwen35MoeMetadata}};
}

}  // namespace kvserve
