// The phi3 architecture (Phi-3, Phi-3.5 mini at its trained context): llama's layer with one fused
// q/k/v projection (attn_qkv: rows q, k, v), one fused gate/up projection (ffn_up: 2 * n_ff rows,
// gate then up) and RoPE on split halves. LongRoPE files (rope_factors_long/short) are refused.
// phi3.attention.sliding_window is read by neither kvserve nor llama.cpp (which disables Phi's
// window because converted files carry a wrong value): attention is global, as llama.cpp's.
//
// Hugging Face: Phi3ForCausalLM (llama's keys, original_max_position_embeddings, sliding_window
// kept as metadata; default RoPE only, whole-head rotation).
#include "model/architecture.h"
#include "model/decoder_blocks.h"
#include "model/hf_families.h"

namespace kvserve {

namespace {

Result<std::unique_ptr<Model>> LoadPhi3(GgufFile file, ModelConfig config, const Backend& backend) {
  return LoadLlamaStyle(
      std::move(file), std::move(config), backend,
      {.rope_mode = RopeMode::kSplitHalves, .fused_qkv = true, .fused_gate_up = true});
}

Status ReadPhi3Config(const HfConfigReader& r, HfConfig& c) {
  KVSERVE_RETURN_IF_ERROR(ReadHfDecoderConfig(
      r,
      {.rope = {.linear = false,
                .supported = "kvserve implements default RoPE for Phi-3 (no LongRoPE)"}},
      c));
  KVSERVE_RETURN_IF_ERROR(r.Count({"original_max_position_embeddings"}, 1 << 24, &c.original_ctx));
  KVSERVE_RETURN_IF_ERROR(r.Count({"sliding_window"}, 1 << 24, &c.sliding_window, -1));
  if (c.sliding_window < 0) c.sliding_window = 0;
  return r.RequireNumber("partial_rotary_factor", 1.0, "kvserve rotates whole heads");
}

Result<HfMapping> MapPhi3Tensor(std::string_view hf_name, const HfConfig& c) {
  static const HfDecoderTensors tensors{
      .layer = {
          {"input_layernorm.weight", "attn_norm.weight"},
          {"self_attn.qkv_proj.weight", "attn_qkv.weight"},
          {"self_attn.o_proj.weight", "attn_output.weight"},
          {"post_attention_layernorm.weight", "ffn_norm.weight"},
          {"mlp.gate_up_proj.weight", "ffn_up.weight"},  // gate, up
          {"mlp.down_proj.weight", "ffn_down.weight"},
      }};
  return MapHfDecoderTensor(hf_name, c, tensors);
}

void WritePhi3Metadata(const HfConfig& c, GgufWriter& w) {
  AddHfDecoderMetadata(c, {.window_always = true}, w);
  w.SetUint32("phi3.rope.scaling.original_context_length", static_cast<uint32_t>(c.original_ctx));
}

}  // namespace

KVSERVE_ARCHITECTURE(phi3) {
  static const Architecture entry{.gguf_name = "phi3",
                                  .load = &LoadPhi3,
                                  .hf_classes = {{"Phi3ForCausalLM", "phi3", &ReadPhi3Config,
                                                  &MapPhi3Tensor, &WritePhi3Metadata}}};
  return entry;
}

}  // namespace kvserve
