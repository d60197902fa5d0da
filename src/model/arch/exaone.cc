// The exaone architecture (LG AI Research's EXAONE 3.0 and 3.5): llama's layer (RMSNorm,
// grouped-query attention without biases, SwiGLU feed-forward, optionally tied output) with RoPE
// on split halves, Llama 3's frequency divisors from rope_freqs.weight where the file has them.
// llama.cpp's `exaone` reads the same tensors and keys.
//
// Hugging Face: ExaoneForCausalLM. Its config names the layer count num_layers and the RMSNorm
// epsilon layer_norm_epsilon (written as attention.layer_norm_rms_epsilon, the key llama.cpp's
// loader reads); activation_function silu; rope_scaling absent, "default", "linear" or "llama3";
// head_dim where given. Its tensors are GPT-2-style names ("transformer.h.N.attn.attention.q_proj",
// "mlp.c_fc_0" the gate, "mlp.c_fc_1" the up projection), q and k rows in rotate-half order as
// split-half RoPE reads them: nothing is permuted.
#include <string>

#include "model/architecture.h"
#include "model/decoder_blocks.h"
#include "model/hf_families.h"

namespace kvserve {

namespace {

Result<std::unique_ptr<Model>> LoadExaone(GgufFile file, ModelConfig config,
                                          const Backend& backend) {
  return LoadLlamaStyle(std::move(file), std::move(config), backend,
                        {.rope_mode = RopeMode::kSplitHalves});
}

Status ReadExaoneConfig(const HfConfigReader& r, HfConfig& c) {
  KVSERVE_RETURN_IF_ERROR(r.Count({"hidden_size"}, kMaxHfDim, &c.n_embd));
  KVSERVE_RETURN_IF_ERROR(r.Count({"num_layers", "num_hidden_layers"}, 4096, &c.n_layers));
  KVSERVE_RETURN_IF_ERROR(r.Count({"num_attention_heads"}, 4096, &c.n_heads));
  KVSERVE_RETURN_IF_ERROR(r.Count({"num_key_value_heads"}, 4096, &c.n_kv_heads, c.n_heads));
  KVSERVE_RETURN_IF_ERROR(r.Count({"intermediate_size"}, kMaxHfDim, &c.n_ff));
  KVSERVE_RETURN_IF_ERROR(r.Count({"max_position_embeddings"}, 1 << 24, &c.n_ctx));
  KVSERVE_RETURN_IF_ERROR(r.Float("layer_norm_epsilon", &c.norm_eps, true));
  c.rope_theta_given = r.Has("rope_theta");
  KVSERVE_RETURN_IF_ERROR(r.Float("rope_theta", &c.rope_theta, false));
  KVSERVE_RETURN_IF_ERROR(r.ReadRope(kLlama3RopeRules, c));
  KVSERVE_RETURN_IF_ERROR(r.Bool("tie_word_embeddings", &c.tie_word_embeddings));
  KVSERVE_RETURN_IF_ERROR(r.OneOf("activation_function", {"silu"}));
  KVSERVE_RETURN_IF_ERROR(
      r.RequireNumber("partial_rotary_factor", 1.0, "kvserve rotates whole heads"));
  return ReadHfHeadDim(r, /*always=*/false, 0, c);
}

Result<HfMapping> MapExaoneTensor(std::string_view hf_name, const HfConfig& c) {
  static const HfDecoderTensors tensors{
      .layer = {{"ln_1.weight", "attn_norm.weight"},
                {"attn.attention.q_proj.weight", "attn_q.weight"},
                {"attn.attention.k_proj.weight", "attn_k.weight"},
                {"attn.attention.v_proj.weight", "attn_v.weight"},
                {"attn.attention.out_proj.weight", "attn_output.weight"},
                {"ln_2.weight", "ffn_norm.weight"},
                {"mlp.c_fc_0.weight", "ffn_gate.weight"},
                {"mlp.c_fc_1.weight", "ffn_up.weight"},
                {"mlp.c_proj.weight", "ffn_down.weight"}},
      .layer_prefix = "transformer.h.",
      .embedding = "transformer.wte.weight",
      .final_norm = "transformer.ln_f.weight"};
  return MapHfDecoderTensor(hf_name, c, tensors);
}

void WriteExaoneMetadata(const HfConfig& c, GgufWriter& w) { AddHfDecoderMetadata(c, {}, w); }

}  // namespace

KVSERVE_ARCHITECTURE(exaone) {
  static const Architecture entry{.gguf_name = "exaone",
                                  .load = &LoadExaone,
                                  .hf_classes = {{"ExaoneForCausalLM", "exaone", &ReadExaoneConfig,
                                                  &MapExaoneTensor, &WriteExaoneMetadata}}};
  return entry;
}

}  // namespace kvserve
