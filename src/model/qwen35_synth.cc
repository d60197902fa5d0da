#include "model/qwen35_synth.h"

#include <string>

namespace kvserve {

namespace {

void AddDeltaNet(const SyntheticShape& s, const std::string& p, SyntheticTensors& out) {
  const int64_t key_dim = static_cast<int64_t>(s.ssm_state_size) * s.ssm_group_count;
  const int64_t value_dim = static_cast<int64_t>(s.ssm_state_size) * s.ssm_time_step_rank;
  out.Matrix(p + "attn_qkv.weight", s.n_embd, 2 * key_dim + value_dim);
  out.Matrix(p + "attn_gate.weight", s.n_embd, value_dim);
  out.F32Matrix(p + "ssm_conv1d.weight", s.ssm_conv_kernel, 2 * key_dim + value_dim);
  out.Vector(p + "ssm_dt.bias", s.ssm_time_step_rank, SyntheticFill::kRandom);
  out.Vector(p + "ssm_a", s.ssm_time_step_rank, SyntheticFill::kNegative);
  out.Matrix(p + "ssm_beta.weight", s.n_embd, s.ssm_time_step_rank);
  out.Matrix(p + "ssm_alpha.weight", s.n_embd, s.ssm_time_step_rank);
  out.Vector(p + "ssm_norm.weight", s.ssm_state_size, SyntheticFill::kOnes);
  out.Matrix(p + "ssm_out.weight", value_dim, s.n_embd);
}

void AddGatedAttention(const SyntheticShape& s, const std::string& p, SyntheticTensors& out) {
  const int64_t head_dim = s.HeadDim();
  out.Matrix(p + "attn_q.weight", s.n_embd, 2 * head_dim * s.n_heads);
  out.Matrix(p + "attn_k.weight", s.n_embd, head_dim * s.n_kv_heads);
  out.Matrix(p + "attn_v.weight", s.n_embd, head_dim * s.n_kv_heads);
  out.Vector(p + "attn_q_norm.weight", head_dim, SyntheticFill::kOnes);
  out.Vector(p + "attn_k_norm.weight", head_dim, SyntheticFill::kOnes);
  out.Matrix(p + "attn_output.weight", head_dim * s.n_heads, s.n_embd);
}

// Every layer's norms and mixer, with `ffn` adding the layer's feed-forward under prefix p; then
// the MTP layers (llama.cpp's load_block_mtp): a gated full-attention layer whatever
// full_attention_interval says, and its nextn.* tensors. eh_proj [2 n_embd -> n_embd] maps the
// concatenation (enorm(token embedding), hnorm(hidden)); shared_head_norm is the norm before the
// shared output head. The three nextn norms are kNearOne, so that a test tells them from each
// other and from output_norm; no nextn.embed_tokens or shared_head_head (llama.cpp then takes
// token_embd and output, as the released Qwen3.5 files have it).
template <typename Ffn>
void AddLayers(const SyntheticShape& s, int64_t n_vocab, SyntheticTensors& out, Ffn&& ffn) {
  AddSyntheticDecoderGlobals(s, n_vocab, out);
  for (int i = 0; i < s.n_layers + s.nextn_layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    const bool mtp = i >= s.n_layers;
    out.Vector(p + "attn_norm.weight", s.n_embd, SyntheticFill::kOnes);
    if (!mtp && s.RecurrentLayer(i)) {
      AddDeltaNet(s, p, out);
    } else {
      AddGatedAttention(s, p, out);
    }
    out.Vector(p + "post_attention_norm.weight", s.n_embd, SyntheticFill::kOnes);
    ffn(p);
    if (mtp) {
      out.Matrix(p + "nextn.eh_proj.weight", 2 * int64_t{s.n_embd}, s.n_embd);
      out.Vector(p + "nextn.enorm.weight", s.n_embd, SyntheticFill::kNearOne);
      out.Vector(p + "nextn.hnorm.weight", s.n_embd, SyntheticFill::kNearOne);
      out.Vector(p + "nextn.shared_head_norm.weight", s.n_embd, SyntheticFill::kNearOne);
    }
  }
}

void SynthQwen35Tensors(const SyntheticShape& s, int64_t n_vocab, SyntheticTensors& out) {
  AddLayers(s, n_vocab, out, [&](const std::string& p) {
    out.Matrix(p + "ffn_gate.weight", s.n_embd, s.n_ff);
    out.Matrix(p + "ffn_up.weight", s.n_embd, s.n_ff);
    out.Matrix(p + "ffn_down.weight", s.n_ff, s.n_embd);
  });
}

// An expert's width: n_ff_expert, or n_ff where unset.
int64_t ExpertWidth(const SyntheticShape& s) { return s.n_ff_expert > 0 ? s.n_ff_expert : s.n_ff; }

// The router F32 and the shared expert's gate a 1-D F32 vector, as in llama.cpp's files.
void SynthQwen35MoeTensors(const SyntheticShape& s, int64_t n_vocab, SyntheticTensors& out) {
  const int64_t n_ff_exp = ExpertWidth(s);
  AddLayers(s, n_vocab, out, [&](const std::string& p) {
    out.F32Matrix(p + "ffn_gate_inp.weight", s.n_embd, s.n_expert);
    out.Experts(p + "ffn_gate_exps.weight", s.n_embd, n_ff_exp, s.n_expert);
    out.Experts(p + "ffn_up_exps.weight", s.n_embd, n_ff_exp, s.n_expert);
    out.Experts(p + "ffn_down_exps.weight", n_ff_exp, s.n_embd, s.n_expert);
    out.Vector(p + "ffn_gate_inp_shexp.weight", s.n_embd, SyntheticFill::kRandom);
    out.Matrix(p + "ffn_gate_shexp.weight", s.n_embd, s.n_ff);
    out.Matrix(p + "ffn_up_shexp.weight", s.n_embd, s.n_ff);
    out.Matrix(p + "ffn_down_shexp.weight", s.n_ff, s.n_embd);
  });
}

// The keys of llama.cpp's converter (Qwen3_5TextModel): the decoder's, the M-RoPE sections, the
// delta net's ssm.* and the attention period; with MTP layers, block_count counts them and
// nextn_predict_layers is written (_QwenMtpMixin). No attention.recurrent_layers array: llama.cpp
// then takes the period for the main layers and marks the MTP layers non-recurrent.
void SynthQwen35Metadata(const SyntheticShape& s, int64_t n_vocab, GgufWriter& w) {
  const std::string a = s.arch + ".";
  AddSyntheticDecoderMetadata(s, n_vocab, w);
  if (s.nextn_layers > 0) {
    w.SetUint32(a + "block_count", s.n_layers + s.nextn_layers);  // in place: the key order kept
    w.SetUint32(a + "nextn_predict_layers", s.nextn_layers);
  }
  w.SetInt32Array(a + "rope.dimension_sections", {s.rope_sections.begin(), s.rope_sections.end()});
  w.SetUint32(a + "ssm.conv_kernel", s.ssm_conv_kernel);
  w.SetUint32(a + "ssm.state_size", s.ssm_state_size);
  w.SetUint32(a + "ssm.group_count", s.ssm_group_count);
  w.SetUint32(a + "ssm.time_step_rank", s.ssm_time_step_rank);
  w.SetUint32(a + "ssm.inner_size", s.ssm_state_size * s.ssm_time_step_rank);
  w.SetUint32(a + "full_attention_interval", s.full_attention_interval);
}

// Qwen3_5MoeTextModel's: qwen35's and the experts' (n_ff is the shared expert's width).
void SynthQwen35MoeMetadata(const SyntheticShape& s, int64_t n_vocab, GgufWriter& w) {
  const std::string a = s.arch + ".";
  SynthQwen35Metadata(s, n_vocab, w);
  w.SetUint32(a + "expert_count", s.n_expert);
  w.SetUint32(a + "expert_used_count", s.n_expert_used);
  w.SetUint32(a + "expert_feed_forward_length", static_cast<uint32_t>(ExpertWidth(s)));
  w.SetUint32(a + "expert_shared_feed_forward_length", s.n_ff);
}

// Tests: 8 layers, of which 3 and 7 attend; 4 query heads of 32 (wider than n_embd / n_heads)
// over 2 KV heads, a quarter of each head rotating (8 dims, sections 2 + 1 + 1), base 10000 so
// that every pair turns visibly over a short prompt; delta nets of 2 key heads and 4 value heads
// of 16 (two value heads per key head, as in the larger Qwen3.5 models).
SyntheticShape TinyShape() {
  return {.arch = "qwen35",
          .n_embd = 64,
          .n_layers = 8,
          .n_heads = 4,
          .n_kv_heads = 2,
          .n_ff = 128,
          .n_ctx = 512,
          .norm_eps = 1e-6f,
          .rope_freq_base = 10000.0f,
          .head_dim = 32,
          .rope_dims = 8,
          .rope_sections = {2, 1, 1, 0},
          .full_attention_interval = 4,
          .ssm_state_size = 16,
          .ssm_group_count = 2,
          .ssm_time_step_rank = 4,
          .ssm_conv_kernel = 4};
}

// Tests of the K-quant recipes: qwen35-tiny's layout at 256 wide, every row llama.cpp quantizes
// a multiple of the 256-element super-block (attn_output and ssm_out 512, ffn_down 512), so that
// llama-quantize's Q4_K_M keeps its Q4_K / Q6_K choices. 4 layers, the last attending: 4 query
// heads of 128 over 2 KV heads (q 1024 rows), a quarter rotating (32 dims, sections 6 + 5 + 5);
// delta nets of 2 key heads and 4 value heads of 128 (key dim 256, value dim 512). F32: 15.8 MB.
SyntheticShape SmallShape() {
  return {.arch = "qwen35",
          .n_embd = 256,
          .n_layers = 4,
          .n_heads = 4,
          .n_kv_heads = 2,
          .n_ff = 512,
          .n_ctx = 512,
          .norm_eps = 1e-6f,
          .rope_freq_base = 10000.0f,
          .head_dim = 128,
          .rope_dims = 32,
          .rope_sections = {6, 5, 5, 0},
          .full_attention_interval = 4,
          .ssm_state_size = 128,
          .ssm_group_count = 2,
          .ssm_time_step_rank = 4,
          .ssm_conv_kernel = 4};
}

// Qwen/Qwen3.5-0.8B's text model (config.json's text_config, as remembered, not checked against
// the file here): hidden 1024, 24 layers, full_attention_interval 4, 8 heads of 256 over 2 KV
// heads, partial_rotary_factor 0.25 (64 rope dims), mrope_section [11, 11, 10], rope_theta 1e7,
// linear attention 16 key and 16 value heads of 128, conv kernel 4, intermediate 3584, context
// 262144, rms_norm_eps 1e-6, tied embeddings, mtp_num_hidden_layers 1. Its vocabulary (248320
// tokens) is not among the shared files: the default qwen2 one gives 151936.
SyntheticShape Qwen35_0_8B() {
  return {.arch = "qwen35",
          .n_embd = 1024,
          .n_layers = 24,
          .n_heads = 8,
          .n_kv_heads = 2,
          .n_ff = 3584,
          .n_ctx = 262144,
          .norm_eps = 1e-6f,
          .rope_freq_base = 1e7f,
          .tied_output = true,
          .head_dim = 256,
          .rope_dims = 64,
          .rope_sections = {11, 11, 10, 0},
          .full_attention_interval = 4,
          .ssm_state_size = 128,
          .ssm_group_count = 16,
          .ssm_time_step_rank = 16,
          .ssm_conv_kernel = 4,
          .nextn_layers = 1};
}

// A preset with one MTP layer after its main stack.
SyntheticShape WithMtp(SyntheticShape s) {
  s.nextn_layers = 1;
  return s;
}

// qwen35-tiny's layers with a mixture in place of the MLP: 8 experts of 32, 2 per token, and a
// shared expert of 64.
SyntheticShape MoeTinyShape() {
  SyntheticShape s = TinyShape();
  s.arch = "qwen35moe";
  s.n_ff = 64;
  s.n_ff_expert = 32;
  s.n_expert = 8;
  s.n_expert_used = 2;
  return s;
}

// qwen35-small's layers with a mixture in place of the MLP: 4 experts of 256, 2 per token, and a
// shared expert of 256. F32: 25 MB.
SyntheticShape MoeSmallShape() {
  SyntheticShape s = SmallShape();
  s.arch = "qwen35moe";
  s.n_ff = 256;
  s.n_ff_expert = 256;
  s.n_expert = 4;
  s.n_expert_used = 2;
  return s;
}

// Qwen/Qwen3.5-35B-A3B's text model. From llama.cpp's sources and documents: 40 layers (its
// LLM_TYPE_35B_A3B), 16 query heads over 2 KV heads, 256 experts, 8 routed per token plus one
// shared expert, full_attention_interval 4 and mrope_section [11, 11, 10] (the converter's
// defaults), a quarter of each head rotating. As remembered, not checked against config.json
// here: hidden 2048, heads of 256, moe_intermediate_size 512, shared_expert_intermediate_size
// 512, linear attention 16 key and 32 value heads of 128, conv kernel 4, rope_theta 1e7, context
// 262144, rms_norm_eps 1e-6, untied output, mtp_num_hidden_layers 1. Its vocabulary (248320 tokens)
// is not among the shared files: the default qwen2 one gives 151936.
SyntheticShape Qwen35Moe35BA3B() {
  return {.arch = "qwen35moe",
          .n_embd = 2048,
          .n_layers = 40,
          .n_heads = 16,
          .n_kv_heads = 2,
          .n_ff = 512,
          .n_ctx = 262144,
          .norm_eps = 1e-6f,
          .rope_freq_base = 1e7f,
          .n_expert = 256,
          .n_expert_used = 8,
          .head_dim = 256,
          .n_ff_expert = 512,
          .rope_dims = 64,
          .rope_sections = {11, 11, 10, 0},
          .full_attention_interval = 4,
          .ssm_state_size = 128,
          .ssm_group_count = 16,
          .ssm_time_step_rank = 32,
          .ssm_conv_kernel = 4,
          .nextn_layers = 1};
}

}  // namespace

const SyntheticRecipe& Qwen35MoeSynthetic() {
  static const SyntheticRecipe recipe{.vocab_file = "vocab/ggml-vocab-qwen2.gguf",
                                      .experts = true,
                                      .delta_net = true,
                                      .tensors = &SynthQwen35MoeTensors,
                                      .metadata = &SynthQwen35MoeMetadata,
                                      .presets = {{"qwen35moe-tiny", MoeTinyShape()},
                                                  {"qwen35moe-tiny-mtp", WithMtp(MoeTinyShape())},
                                                  {"qwen35moe-small", MoeSmallShape()},
                                                  {"qwen35moe-35b-a3b", Qwen35Moe35BA3B()}}};
  return recipe;
}

const SyntheticRecipe& Qwen35Synthetic() {
  static const SyntheticRecipe recipe{.vocab_file = "vocab/ggml-vocab-qwen2.gguf",
                                      .delta_net = true,
                                      .tensors = &SynthQwen35Tensors,
                                      .metadata = &SynthQwen35Metadata,
                                      .presets = {{"qwen35-tiny", TinyShape()},
                                                  {"qwen35-tiny-mtp", WithMtp(TinyShape())},
                                                  {"qwen35-small", SmallShape()},
                                                  {"qwen35-0.8b", Qwen35_0_8B()}}};
  return recipe;
}

}  // namespace kvserve
