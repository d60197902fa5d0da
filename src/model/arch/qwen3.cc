// The qwen3 architecture (dense Qwen 3): llama's layer with an RMSNorm of every q and k head
// (attn_q_norm, attn_k_norm) before RoPE on split halves, no biases; head_dim from
// attention.key_length (it need not be n_embd / n_heads).
//
// Hugging Face: Qwen3ForCausalLM (llama's keys and head_dim; use_sliding_window must be false).
#include "model/architecture.h"
#include "model/decoder_blocks.h"
#include "model/hf_families.h"

namespace kvserve {

namespace {

Result<std::unique_ptr<Model>> LoadQwen3(GgufFile file, ModelConfig config,
                                         const Backend& backend) {
  return LoadLlamaStyle(std::move(file), std::move(config), backend,
                        {.rope_mode = RopeMode::kSplitHalves, .qk_norm = true});
}

Status ReadQwen3Config(const HfConfigReader& r, HfConfig& c) {
  KVSERVE_RETURN_IF_ERROR(ReadHfDecoderConfig(r, {}, c));
  return r.RequireBool("use_sliding_window", false, true,
                       "llama.cpp's Qwen files attend to the whole context");
}

Result<HfMapping> MapQwen3Tensor(std::string_view hf_name, const HfConfig& c) {
  static const HfDecoderTensors tensors{.layer = [] {
    HfLayerNames names = LlamaLayerNames();
    names["self_attn.q_norm.weight"] = "attn_q_norm.weight";
    names["self_attn.k_norm.weight"] = "attn_k_norm.weight";
    return names;
  }()};
  return MapHfDecoderTensor(hf_name, c, tensors);
}

void WriteQwen3Metadata(const HfConfig& c, GgufWriter& w) { AddHfDecoderMetadata(c, {}, w); }

}  // namespace

KVSERVE_ARCHITECTURE(qwen3) {
  static const Architecture entry{.gguf_name = "qwen3",
                                  .load = &LoadQwen3,
                                  .hf_classes = {{"Qwen3ForCausalLM", "qwen3", &ReadQwen3Config,
                                                  &MapQwen3Tensor, &WriteQwen3Metadata}}};
  return entry;
}

}  // namespace kvserve
