// The qwen2 architecture (Qwen 2, Qwen 2.5): llama's layer with biases on the q, k and v
// projections and RoPE on split halves (pairs i, i + rope_dims/2).
//
// Hugging Face: Qwen2ForCausalLM (llama's keys; attention_bias allowed; use_sliding_window must
// be false: llama.cpp's Qwen files attend to the whole context).
#include "model/architecture.h"
#include "model/decoder_blocks.h"
#include "model/hf_families.h"

namespace kvserve {

namespace {

Result<std::unique_ptr<Model>> LoadQwen2(GgufFile file, ModelConfig config,
                                         const Backend& backend) {
  return LoadLlamaStyle(std::move(file), std::move(config), backend,
                        {.rope_mode = RopeMode::kSplitHalves, .qkv_bias = true});
}

Status ReadQwen2Config(const HfConfigReader& r, HfConfig& c) {
  KVSERVE_RETURN_IF_ERROR(ReadHfDecoderConfig(r, {.attention_bias = true}, c));
  return r.RequireBool("use_sliding_window", false, true,
                       "llama.cpp's Qwen files attend to the whole context");
}

Result<HfMapping> MapQwen2Tensor(std::string_view hf_name, const HfConfig& c) {
  static const HfDecoderTensors tensors{.layer = [] {
    HfLayerNames names = LlamaLayerNames();
    names["self_attn.q_proj.bias"] = "attn_q.bias";
    names["self_attn.k_proj.bias"] = "attn_k.bias";
    names["self_attn.v_proj.bias"] = "attn_v.bias";
    return names;
  }()};
  return MapHfDecoderTensor(hf_name, c, tensors);
}

void WriteQwen2Metadata(const HfConfig& c, GgufWriter& w) { AddHfDecoderMetadata(c, {}, w); }

}  // namespace

KVSERVE_ARCHITECTURE(qwen2) {
  static const Architecture entry{.gguf_name = "qwen2",
                                  .load = &LoadQwen2,
                                  .hf_classes = {{"Qwen2ForCausalLM", "qwen2", &ReadQwen2Config,
                                                  &MapQwen2Tensor, &WriteQwen2Metadata}}};
  return entry;
}

}  // namespace kvserve
