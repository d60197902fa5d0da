#include "model/gemma4_hf.h"

#include <algorithm>
#include <iterator>
#include <string>
#include <string_view>

#include "model/hf_families.h"

namespace kvserve {

namespace {

constexpr const char* kFullRope = "rope_parameters.full_attention";

// A count that may be 0: absent leaves `out`, 0 gives 0, else a positive integer up to `max`.
Status CountOrZero(const HfConfigReader& r, const char* key, int64_t max, int* out) {
  if (!r.Has(key)) return Status::Ok();
  if (r.RequireNumber(key, 0, "").ok()) {
    *out = 0;
    return Status::Ok();
  }
  return r.Count({key}, max, out);
}

Status Required(const HfConfigReader& r, const char* key) {
  if (r.Has(key)) return Status::Ok();
  return Status::InvalidArgument(r.source() + ": missing required key '" + key + "'");
}

// The keys every decoder has, with Gemma3Model's defaults (the converter's for Gemma 4 too), and
// the two head sizes: head_dim (sliding-window layers) and global_head_dim (full layers).
Status ReadGemma4Shape(const HfConfigReader& r, HfConfig& c) {
  KVSERVE_RETURN_IF_ERROR(r.Count({"hidden_size"}, kMaxHfDim, &c.n_embd));
  KVSERVE_RETURN_IF_ERROR(r.Count({"num_hidden_layers"}, 4096, &c.n_layers));
  KVSERVE_RETURN_IF_ERROR(r.Count({"num_attention_heads"}, 4096, &c.n_heads, 8));
  KVSERVE_RETURN_IF_ERROR(r.Count({"num_key_value_heads"}, 4096, &c.n_kv_heads, 4));
  KVSERVE_RETURN_IF_ERROR(r.Count({"intermediate_size"}, kMaxHfDim, &c.n_ff));
  KVSERVE_RETURN_IF_ERROR(r.Count({"max_position_embeddings"}, 1 << 24, &c.n_ctx, 131072));
  c.norm_eps = 1e-6;
  KVSERVE_RETURN_IF_ERROR(r.Float("rms_norm_eps", &c.norm_eps, false));
  c.tie_word_embeddings = true;
  KVSERVE_RETURN_IF_ERROR(r.Bool("tie_word_embeddings", &c.tie_word_embeddings));
  KVSERVE_RETURN_IF_ERROR(r.Has("hidden_activation")
                              ? r.OneOf("hidden_activation", {"gelu_pytorch_tanh"})
                              : r.OneOf("hidden_act", {"gelu_pytorch_tanh"}));
  const std::string why_bias = "kvserve's gemma4 has no such biases";
  KVSERVE_RETURN_IF_ERROR(r.RequireBool("attention_bias", false, true, why_bias));
  KVSERVE_RETURN_IF_ERROR(r.RequireBool("mlp_bias", false, true, why_bias));
  KVSERVE_RETURN_IF_ERROR(r.Count({"head_dim"}, 1024, &c.head_dim_swa));
  KVSERVE_RETURN_IF_ERROR(r.RequireAbsent("per_layer_config",
                                          "kvserve reads the head sizes from global_head_dim and "
                                          "head_dim, the KV heads from num_key_value_heads"));
  KVSERVE_RETURN_IF_ERROR(r.Count({"global_head_dim"}, 1 << 16, &c.head_dim));
  c.head_dim_given = true;
  for (const auto& [key, value] :
       {std::pair{"head_dim", c.head_dim_swa}, {"global_head_dim", c.head_dim}}) {
    if (value % 2 != 0) return r.Unsupported(key, "odd; RoPE turns pairs");
  }
  return Status::Ok();
}

// What kvserve's gemma4 and gemma4-assistant loaders do not compute, refused by key.
Status CheckGemma4Limits(const HfConfigReader& r, const HfConfig& c) {
  KVSERVE_RETURN_IF_ERROR(r.RequireNumber("num_global_key_value_heads", c.n_kv_heads,
                                          "kvserve's " + c.gguf_arch +
                                              " has one KV head count, num_key_value_heads " +
                                              std::to_string(c.n_kv_heads) + ", for every layer"));
  KVSERVE_RETURN_IF_ERROR(r.RequireAbsent("attn_logit_softcapping", "Gemma 4 has none"));
  if (c.n_embd_per_layer > 0) {
    KVSERVE_RETURN_IF_ERROR(r.RequireNumber("vocab_size_per_layer_input", c.n_vocab,
                                            "kvserve's per-layer token embedding has vocab_size " +
                                                std::to_string(c.n_vocab) + " rows"));
  }
  return Status::Ok();
}

// rope_parameters per layer type: full layers "proportional" (their partial_rotary_factor gives
// rope_freqs), sliding-window layers "default" over the whole head.
Status ReadGemma4Rope(const HfConfigReader& r, HfConfig& c) {
  const std::string full = kFullRope;
  KVSERVE_RETURN_IF_ERROR(Required(r, (full + ".rope_type").c_str()));
  KVSERVE_RETURN_IF_ERROR(r.OneOf((full + ".rope_type").c_str(), {"proportional"}));
  double partial = 1.0;
  KVSERVE_RETURN_IF_ERROR(r.Float((full + ".partial_rotary_factor").c_str(), &partial, true));
  if (partial > 1.0) {
    return r.Unsupported((full + ".partial_rotary_factor").c_str(), "more than the whole head");
  }
  KVSERVE_RETURN_IF_ERROR(r.RequireNumber(
      (full + ".factor").c_str(), 1.0,
      "llama.cpp's converter writes no scaling for proportional RoPE; kvserve applies none"));
  c.rope_theta = 1000000.0;  // Gemma3Model's default for the global layers
  KVSERVE_RETURN_IF_ERROR(r.Float((full + ".rope_theta").c_str(), &c.rope_theta, false));
  c.rope_theta_given = true;
  KVSERVE_RETURN_IF_ERROR(r.OneOf("rope_parameters.sliding_attention.rope_type", {"default"}));
  KVSERVE_RETURN_IF_ERROR(
      r.Float("rope_parameters.sliding_attention.rope_theta", &c.rope_local_theta, false));
  const std::string why =
      "the converter writes rope.dimension_count_swa = head_dim; kvserve turns "
      "the whole head of a sliding-window layer";
  KVSERVE_RETURN_IF_ERROR(
      r.RequireNumber("rope_parameters.sliding_attention.partial_rotary_factor", 1.0, why));
  KVSERVE_RETURN_IF_ERROR(r.RequireNumber("rope_parameters.partial_rotary_factor", 1.0, why));
  c.rope_dims_swa = c.head_dim_swa;
  c.rope_freqs = ProportionalRopeFreqs(c.head_dim, partial);
  return Status::Ok();
}

// layer_types, the count of shared-KV layers (up to every layer) and the feed-forward widths.
Status ReadGemma4Layers(const HfConfigReader& r, HfConfig& c) {
  KVSERVE_RETURN_IF_ERROR(Required(r, "layer_types"));
  const std::string n = std::to_string(c.n_layers);
  auto types = r.StringList("layer_types", static_cast<size_t>(c.n_layers),
                            "not a list of " + n + " layer types");
  if (!types.ok()) return types.status();
  for (size_t i = 0; i < types->size(); ++i) {
    const std::string& t = (*types)[i];
    if (t != "sliding_attention" && t != "full_attention") {
      return r.Unsupported("layer_types", "layer " + std::to_string(i) + " is '" + t + "'");
    }
    c.swa_layers.push_back(t == "sliding_attention");
  }
  KVSERVE_RETURN_IF_ERROR(Required(r, "num_kv_shared_layers"));
  KVSERVE_RETURN_IF_ERROR(CountOrZero(r, "num_kv_shared_layers", 4096, &c.n_kv_shared_layers));
  if (c.n_kv_shared_layers > c.n_layers) {
    return r.Unsupported("num_kv_shared_layers", "more than the " + n + " layers");
  }
  const int n_kv = c.n_layers - c.n_kv_shared_layers;
  bool double_wide = false;
  KVSERVE_RETURN_IF_ERROR(r.Bool("use_double_wide_mlp", &double_wide));
  if (double_wide) {
    for (int i = 0; i < c.n_layers; ++i) c.n_ff_layers.push_back(i < n_kv ? c.n_ff : 2 * c.n_ff);
  }
  KVSERVE_RETURN_IF_ERROR(
      CountOrZero(r, "hidden_size_per_layer_input", kMaxHfDim, &c.n_embd_per_layer));
  return r.Count({"sliding_window"}, 1 << 24, &c.sliding_window);
}

// The mixture of experts (26B-A4B), when enable_moe_block or an expert count says so.
Status ReadGemma4Experts(const HfConfigReader& r, HfConfig& c) {
  bool moe = false;
  KVSERVE_RETURN_IF_ERROR(r.Bool("enable_moe_block", &moe));
  if (!moe && !r.Has("num_experts") && !r.Has("num_local_experts")) return Status::Ok();
  KVSERVE_RETURN_IF_ERROR(r.Count({"num_local_experts", "num_experts"}, 4096, &c.n_experts));
  KVSERVE_RETURN_IF_ERROR(r.Count({"num_experts_per_tok", "num_experts_per_token", "top_k_experts"},
                                  c.n_experts, &c.n_experts_used));
  return r.Count({"expert_intermediate_size", "moe_intermediate_size"}, kMaxHfDim, &c.n_ff_expert);
}

// The target's caches: K and V of its own in every layer with a cache, and the loader's
// shared-KV rule (the last two layers with a cache are a sliding-window one, then a full one,
// whose caches the shared layers read).
Status CheckGemma4Caches(const HfConfigReader& r, const HfConfig& c) {
  KVSERVE_RETURN_IF_ERROR(r.RequireBool(
      "attention_k_eq_v", false, true,
      "kvserve's gemma4 needs v_proj in every layer with a cache of its own; the full layers' V "
      "taken from K is not implemented"));
  const int n_kv = c.n_layers - c.n_kv_shared_layers;
  if (n_kv < 1 || (c.n_kv_shared_layers > 0 &&
                   (n_kv < 2 || !c.swa_layers[n_kv - 2] || c.swa_layers[n_kv - 1]))) {
    return r.Unsupported("num_kv_shared_layers",
                         "of " + std::to_string(c.n_layers) +
                             " layers; the last two layers with a cache must be a "
                             "sliding-window one, then a full one (kvserve's gemma4)");
  }
  return Status::Ok();
}

// What Gemma4Model's set_gguf_parameters reads, for the target and its assistant alike.
Status ReadGemma4Common(const HfConfigReader& r, HfConfig& c) {
  KVSERVE_RETURN_IF_ERROR(ReadGemma4Shape(r, c));
  KVSERVE_RETURN_IF_ERROR(ReadGemma4Rope(r, c));
  KVSERVE_RETURN_IF_ERROR(ReadGemma4Layers(r, c));
  return r.Float("final_logit_softcapping", &c.final_softcap, false);
}

Status ReadGemma4Config(const HfConfigReader& r, HfConfig& c) {
  KVSERVE_RETURN_IF_ERROR(ReadGemma4Common(r, c));
  KVSERVE_RETURN_IF_ERROR(ReadGemma4Experts(r, c));
  KVSERVE_RETURN_IF_ERROR(CheckGemma4Caches(r, c));
  return CheckGemma4Limits(r, c);
}

// Gemma4AssistantModel's: Gemma 4's keys, then backbone_hidden_size (the target's width). The
// drafter keeps no cache (its layers read the target's, whatever the target computed them
// from), so the target's cache rules do not apply; it has no experts and no per-layer inputs.
Status ReadGemma4AssistantConfig(const HfConfigReader& r, HfConfig& c) {
  KVSERVE_RETURN_IF_ERROR(ReadGemma4Common(r, c));
  const std::string why = "kvserve's gemma4-assistant has no experts";
  KVSERVE_RETURN_IF_ERROR(r.RequireBool("enable_moe_block", false, true, why));
  KVSERVE_RETURN_IF_ERROR(r.RequireAbsent("num_experts", why));
  KVSERVE_RETURN_IF_ERROR(r.RequireAbsent("num_local_experts", why));
  if (c.n_embd_per_layer > 0) {
    return r.Unsupported("hidden_size_per_layer_input",
                         "kvserve's gemma4-assistant has no per-layer inputs");
  }
  KVSERVE_RETURN_IF_ERROR(r.Count({"backbone_hidden_size"}, kMaxHfDim, &c.n_embd_out));
  if (c.n_embd_out == c.n_embd) {
    return r.Unsupported("backbone_hidden_size",
                         "equal to hidden_size; kvserve's gemma4-assistant loader takes "
                         "embedding_length_out for the target's width, which must differ");
  }
  if (c.sliding_window < 2) {
    return r.Unsupported("sliding_window",
                         "kvserve's gemma4-assistant needs a window of 2 or more");
  }
  return CheckGemma4Limits(r, c);
}

// HF name after "model.layers.N." -> GGUF name after "blk.N.".
HfLayerNames Gemma4LayerNames() {
  HfLayerNames names = GemmaLayerNames();
  for (const auto& [hf, gguf] :
       std::initializer_list<std::pair<std::string_view, std::string_view>>{
           {"self_attn.q_norm.weight", "attn_q_norm.weight"},
           {"self_attn.k_norm.weight", "attn_k_norm.weight"},
           {"per_layer_input_gate.weight", "inp_gate.weight"},
           {"per_layer_projection.weight", "proj.weight"},
           {"post_per_layer_input_norm.weight", "post_norm.weight"},
           {"layer_scalar", "layer_output_scale.weight"},
           {"layer_scalar.weight", "layer_output_scale.weight"},
           {"pre_feedforward_layernorm_2.weight", "pre_ffw_norm_2.weight"},
           {"post_feedforward_layernorm_1.weight", "post_ffw_norm_1.weight"},
           {"post_feedforward_layernorm_2.weight", "post_ffw_norm_2.weight"},
           {"router.proj.weight", "ffn_gate_inp.weight"},
           {"router.scale", "ffn_gate_inp.scale"},
           {"router.per_expert_scale", "ffn_down_exps.scale"},
           // [n_expert, 2 n_ff, n_embd] (each expert's gate rows, then its up rows): as stored.
           {"experts.gate_up_proj", "ffn_gate_up_exps.weight"},
           {"experts.gate_up_proj.weight", "ffn_gate_up_exps.weight"},
           {"experts.down_proj", "ffn_down_exps.weight"},  // [n_expert, n_embd, n_ff]
           {"experts.down_proj.weight", "ffn_down_exps.weight"},
       }) {
    names[hf] = gguf;
  }
  return names;
}

// The tensors outside the layers, by HF name (after "language_model." is dropped, wherever it is)
// -> GGUF name; the decoder's embedding, final norm and layers are mapped after these.
Result<HfMapping> MapGemma4Globals(std::string_view hf_name, const HfConfig& c,
                                   const HfLayerNames& globals, const HfDecoderTensors& tensors) {
  std::string name(hf_name);
  if (size_t at = name.find("language_model."); at != std::string::npos) name.erase(at, 15);
  if (auto it = globals.find(name); it != globals.end()) {
    return HfMapping{.name = std::string(it->second)};
  }
  return MapHfDecoderTensor(hf_name, c, tensors);
}

Result<HfMapping> MapGemma4Tensor(std::string_view hf_name, const HfConfig& c) {
  static const HfLayerNames kGlobals = {
      {"model.embed_tokens_per_layer.weight", "per_layer_token_embd.weight"},
      {"model.per_layer_model_projection.weight", "per_layer_model_proj.weight"},
      {"model.per_layer_projection_norm.weight", "per_layer_proj_norm.weight"},
  };
  static const HfDecoderTensors tensors{.layer = Gemma4LayerNames(), .lm_head_tied = true};
  return MapGemma4Globals(hf_name, c, kGlobals, tensors);
}

// The assistant's layer (constants.py's GEMMA4_ASSISTANT list): Gemma 4's without K, V, their
// norms, per-layer inputs or experts; anything else in a layer is refused by name.
HfLayerNames Gemma4AssistantLayerNames() {
  static constexpr std::string_view kKept[] = {"attn_norm.weight",
                                               "attn_q.weight",
                                               "attn_q_norm.weight",
                                               "attn_output.weight",
                                               "post_attention_norm.weight",
                                               "ffn_norm.weight",
                                               "ffn_gate.weight",
                                               "ffn_up.weight",
                                               "ffn_down.weight",
                                               "post_ffw_norm.weight",
                                               "layer_output_scale.weight"};
  HfLayerNames names;
  for (const auto& [hf, gguf] : Gemma4LayerNames()) {
    if (std::find(std::begin(kKept), std::end(kKept), gguf) != std::end(kKept)) names[hf] = gguf;
  }
  return names;
}

// Gemma4AssistantModel's tensors: the masked embedding (centroids, token ordering) skipped as
// the converter skips it; pre_projection [n_embd, 2 n_target] and post_projection
// [n_target, n_embd] into nextn.*; the decoder's as Gemma 4's.
Result<HfMapping> MapGemma4AssistantTensor(std::string_view hf_name, const HfConfig& c) {
  if (hf_name.find("masked_embedding") != std::string_view::npos) return HfMapping{};
  static const HfLayerNames kGlobals = {
      {"pre_projection.weight", "nextn.pre_projection.weight"},
      {"post_projection.weight", "nextn.post_projection.weight"},
  };
  static const HfDecoderTensors tensors{.layer = Gemma4AssistantLayerNames(), .lm_head_tied = true};
  return MapGemma4Globals(hf_name, c, kGlobals, tensors);
}

void WriteGemma4Metadata(const HfConfig& c, GgufWriter& w) {
  AddHfDecoderMetadata(c, {}, w);  // key_length and rope.dimension_count: the full layers' head
  const std::string a = c.gguf_arch + ".";
  w.SetUint32(a + "attention.key_length_swa", static_cast<uint32_t>(c.head_dim_swa));
  w.SetUint32(a + "attention.value_length_swa", static_cast<uint32_t>(c.head_dim_swa));
  w.SetUint32(a + "rope.dimension_count_swa", static_cast<uint32_t>(c.rope_dims_swa));
  if (c.rope_local_theta > 0) {
    w.SetFloat32(a + "rope.freq_base_swa", static_cast<float>(c.rope_local_theta));
  }
  w.SetBoolArray(a + "attention.sliding_window_pattern", c.swa_layers);
  w.SetUint32(a + "attention.shared_kv_layers", static_cast<uint32_t>(c.n_kv_shared_layers));
  w.SetUint32(a + "embedding_length_per_layer_input", static_cast<uint32_t>(c.n_embd_per_layer));
  if (!c.n_ff_layers.empty()) {
    w.SetInt32Array(a + "feed_forward_length",
                    std::vector<int32_t>(c.n_ff_layers.begin(), c.n_ff_layers.end()));
  }
  if (c.final_softcap > 0) {
    w.SetFloat32(a + "final_logit_softcapping", static_cast<float>(c.final_softcap));
  }
  if (c.n_experts > 0) {
    w.SetUint32(a + "expert_count", static_cast<uint32_t>(c.n_experts));
    w.SetUint32(a + "expert_used_count", static_cast<uint32_t>(c.n_experts_used));
    w.SetUint32(a + "expert_feed_forward_length", static_cast<uint32_t>(c.n_ff_expert));
  }
}

// Gemma 4's keys, then the target's width and one next-token layer per block (the converter's).
void WriteGemma4AssistantMetadata(const HfConfig& c, GgufWriter& w) {
  WriteGemma4Metadata(c, w);
  const std::string a = c.gguf_arch + ".";
  w.SetUint32(a + "embedding_length_out", static_cast<uint32_t>(c.n_embd_out));
  w.SetUint32(a + "nextn_predict_layers", static_cast<uint32_t>(c.n_layers));
}

}  // namespace

std::vector<float> ProportionalRopeFreqs(int head_dim, double partial_rotary_factor) {
  const int n_pairs = head_dim / 2;
  const int n_rot = static_cast<int>(head_dim * partial_rotary_factor / 2);  // as Python's int()
  std::vector<float> out(static_cast<size_t>(n_pairs), 1e30f);
  for (int i = 0; i < n_rot && i < n_pairs; ++i) out[static_cast<size_t>(i)] = 1.0f;
  return out;
}

std::vector<HfClass> Gemma4HfClasses() {
  return {{"Gemma4ForConditionalGeneration", "gemma4", &ReadGemma4Config, &MapGemma4Tensor,
           &WriteGemma4Metadata},
          {"Gemma4ForCausalLM", "gemma4_text", &ReadGemma4Config, &MapGemma4Tensor,
           &WriteGemma4Metadata}};
}

std::vector<HfClass> Gemma4AssistantHfClasses() {
  return {{"Gemma4AssistantForCausalLM", "gemma4_assistant", &ReadGemma4AssistantConfig,
           &MapGemma4AssistantTensor, &WriteGemma4AssistantMetadata},
          {"Gemma4UnifiedAssistantForCausalLM", "gemma4_unified_assistant",
           &ReadGemma4AssistantConfig, &MapGemma4AssistantTensor, &WriteGemma4AssistantMetadata}};
}

}  // namespace kvserve
