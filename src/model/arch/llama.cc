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
#include <string>

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

// Random weights (`kvserve synth --arch llama`).
void SynthLlamaTensors(const SyntheticShape& s, int64_t n_vocab, SyntheticTensors& out) {
  AddSyntheticDecoderGlobals(s, n_vocab, out);
  for (int i = 0; i < s.n_layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    AddSyntheticAttention(s, i, /*qk_norm=*/false, out);
    out.Matrix(p + "ffn_gate.weight", s.n_embd, s.n_ff);
    out.Matrix(p + "ffn_up.weight", s.n_embd, s.n_ff);
    out.Matrix(p + "ffn_down.weight", s.n_ff, s.n_embd);
  }
}

NamedShape LlamaShape(const char* name, int embd, int layers, int heads, int kv_heads, int ff,
                      int ctx) {
  return {name,
          {.arch = "llama",
           .n_embd = embd,
           .n_layers = layers,
           .n_heads = heads,
           .n_kv_heads = kv_heads,
           .n_ff = ff,
           .n_ctx = ctx,
           .norm_eps = 1e-5f,
           .rope_freq_base = 10000.0f}};
}

// TinyLlama 1.1B's shape (/work/shared/anchors.md) and llama2.c's stories models.
const SyntheticRecipe& LlamaSynthetic() {
  static const SyntheticRecipe recipe{
      .vocab_file = "ggml-vocab-llama-spm.gguf",
      .tensors = &SynthLlamaTensors,
      .metadata = &AddSyntheticDecoderMetadata,
      .presets = {LlamaShape("tinyllama-1.1b", 2048, 22, 32, 4, 5632, 2048),
                  LlamaShape("stories-15m", 288, 6, 6, 6, 768, 256),
                  LlamaShape("stories-260k", 64, 5, 8, 4, 172, 512)}};
  return recipe;
}

}  // namespace

KVSERVE_ARCHITECTURE(llama) {
  static const Architecture entry{
      .gguf_name = "llama",
      .load = &LoadLlama,
      .hf_classes = {{"LlamaForCausalLM", "llama", &ReadLlamaConfig, &MapLlamaTensor,
                      &WriteLlamaMetadata},
                     {"MistralForCausalLM", "mistral", &ReadMistralConfig, &MapLlamaTensor,
                      &WriteLlamaMetadata}},
      .synthetic = &LlamaSynthetic()};
  return entry;
}

}  // namespace kvserve
