// The llama architecture (Llama 1/2/3, TinyLlama, stories): RMSNorm, RoPE on interleaved pairs of
// q and k (Llama 3's frequency divisors from rope_freqs.weight where the file has them, linear
// position scaling where it says so), grouped-query attention, SwiGLU feed-forward, optionally
// tied output. Mistral's files are llama too: where llama.attention.sliding_window is set, every
// layer attends over that window (llama.cpp's converter does not write the key for Mistral; our
// Hugging Face folders do).
//
// Hugging Face: LlamaForCausalLM and MistralForCausalLM (hidden_act silu; rope_scaling absent,
// "default", "linear" or "llama3"; Mistral's sliding_window). q and k rows are permuted from
// rotate-half to interleaved pairs, as llama.cpp's converter does.
#include "model/architecture.h"
#include "model/decoder_blocks.h"
#include "model/hf_families.h"

namespace kvserve {

namespace {

Result<std::unique_ptr<Model>> LoadLlama(GgufFile file, ModelConfig config,
                                         const Backend& backend) {
  return LoadLlamaStyle(std::move(file), std::move(config), backend,
                        {.rope_mode = RopeMode::kInterleaved, .sliding_window = true});
}

constexpr HfDecoderKeys kLlamaKeys{.rope = kLlama3RopeRules};

Status ReadLlamaConfig(const HfConfigReader& r, HfConfig& c) {
  return ReadHfDecoderConfig(r, kLlamaKeys, c);
}

Status ReadMistralConfig(const HfConfigReader& r, HfConfig& c) {
  KVSERVE_RETURN_IF_ERROR(ReadHfDecoderConfig(r, kLlamaKeys, c));
  KVSERVE_RETURN_IF_ERROR(r.Count({"sliding_window"}, 1 << 24, &c.sliding_window, -1));
  if (c.sliding_window < 0) c.sliding_window = 0;  // absent or null: no window
  return Status::Ok();
}

Result<HfMapping> MapLlamaTensor(std::string_view hf_name, const HfConfig& c) {
  static const HfDecoderTensors tensors{.layer = LlamaLayerNames(), .permute_qk = true};
  return MapHfDecoderTensor(hf_name, c, tensors);
}

void WriteLlamaMetadata(const HfConfig& c, GgufWriter& w) {
  AddHfDecoderMetadata(c, {.vocab_size = true}, w);
}

}  // namespace

KVSERVE_ARCHITECTURE(llama) {
  static const Architecture entry{
      .gguf_name = "llama",
      .load = &LoadLlama,
      .hf_classes = {
          {"LlamaForCausalLM", "llama", &ReadLlamaConfig, &MapLlamaTensor, &WriteLlamaMetadata},
          {"MistralForCausalLM", "mistral", &ReadMistralConfig, &MapLlamaTensor,
           &WriteLlamaMetadata}}};
  return entry;
}

}  // namespace kvserve
