// The gemma3 architecture (Gemma 3, text): the Gemma decoder (gemma_decoder.h) with an RMSNorm of
// every q and k head before RoPE and no soft-capping. Layer i is global when
// i % attention.sliding_window_pattern == pattern - 1 (6 where the key is missing, as released
// files), else local: a sliding window of attention.sliding_window keys and RoPE base
// rope.freq_base_swa (10000 where missing) without scaling; global layers use rope.freq_base and
// the rope.scaling keys (linear).
//
// Hugging Face: Gemma3ForCausalLM and Gemma3ForConditionalGeneration (its text part; vision
// weights are skipped): gemma2's keys, with the Gemma 3 text config class's defaults where
// missing, no attention soft-cap, rope_local_base_freq and sliding_window_pattern (or
// layer_types, which must follow an every-Nth-layer-global pattern).
#include <string>

#include "model/architecture.h"
#include "model/gemma_decoder.h"
#include "model/hf_families.h"

namespace kvserve {

namespace {

Result<std::unique_ptr<Model>> LoadGemma3(GgufFile file, ModelConfig config,
                                          const Backend& backend) {
  KVSERVE_RETURN_IF_ERROR(config.ReadRopeScaling(file));
  const std::string& a = config.arch;
  auto window = file.GetUint(a + ".attention.sliding_window");
  auto pattern = file.GetUintOr(a + ".attention.sliding_window_pattern", 6);
  auto base_swa = file.GetFloatOr(a + ".rope.freq_base_swa", 10000.0);
  if (!window.ok()) return window.status();
  if (!pattern.ok()) return pattern.status();
  if (!base_swa.ok()) return base_swa.status();
  if (*pattern == 0) {
    return Status::InvalidArgument(file.path() + ": metadata key '" + a +
                                   ".attention.sliding_window_pattern' = 0 must be positive");
  }
  const RopeParams global{.rope_dims = config.rope_dims,
                          .freq_base = config.rope_freq_base,
                          .mode = RopeMode::kSplitHalves,
                          .position_scale = config.rope_position_scale};
  RopeParams local = global;
  local.freq_base = static_cast<float>(*base_swa);
  local.position_scale = 1.0f;
  GemmaOptions options{.qk_norm = true};
  const int n = static_cast<int>(*pattern);
  for (int i = 0; i < config.n_layers; ++i) {
    const bool is_global = i % n == n - 1;
    options.layers.push_back(
        {.window = is_global ? 0 : static_cast<int>(*window), .rope = is_global ? global : local});
  }
  return LoadGemma(std::move(file), std::move(config), backend, std::move(options));
}

// Every sliding_window_pattern-th layer is global; layer_types (transformers 4.53+) must follow
// such a pattern.
Status ReadGemma3Pattern(const HfConfigReader& r, HfConfig& c) {
  c.sliding_window_pattern = 6;
  KVSERVE_RETURN_IF_ERROR(r.Count({"sliding_window_pattern"}, 4096, &c.sliding_window_pattern, 6));
  if (!r.Has("layer_types")) return Status::Ok();
  auto types = r.StringList("layer_types", static_cast<size_t>(c.n_layers),
                            "not a list of " + std::to_string(c.n_layers) + " layer types");
  if (!types.ok()) return types.status();
  int pattern = c.n_layers + 1;  // the first global layer's index + 1; none: all local
  for (size_t i = 0; i < types->size(); ++i) {
    if ((*types)[i] == "full_attention") {
      pattern = static_cast<int>(i) + 1;
      break;
    }
  }
  for (size_t i = 0; i < types->size(); ++i) {
    const char* want =
        i % pattern == static_cast<size_t>(pattern - 1) ? "full_attention" : "sliding_attention";
    if ((*types)[i] != want) {
      return r.Unsupported("layer_types", "layer " + std::to_string(i) + " breaks the every-" +
                                              std::to_string(pattern) + "th-layer-global pattern");
    }
  }
  c.sliding_window_pattern = pattern;
  return Status::Ok();
}

// The Gemma 3 text config class's defaults where a key is missing.
Status ReadGemma3Config(const HfConfigReader& r, HfConfig& c) {
  KVSERVE_RETURN_IF_ERROR(ReadHfDecoderConfig(r,
                                              {.n_heads = 8,
                                               .n_kv_heads = 4,
                                               .n_ctx = 131072,
                                               .norm_eps = 1e-6,
                                               .rope_theta = 1000000.0,
                                               .head_dim = 256,
                                               .head_dim_always = true,
                                               .tied = true,
                                               .gelu = true},
                                              c));
  KVSERVE_RETURN_IF_ERROR(r.Count({"sliding_window"}, 1 << 24, &c.sliding_window, 4096));
  KVSERVE_RETURN_IF_ERROR(r.RequireNumber(
      "query_pre_attn_scalar", c.head_dim,
      "kvserve scales queries by 1/sqrt(head_dim " + std::to_string(c.head_dim) + ")"));
  KVSERVE_RETURN_IF_ERROR(r.RequireAbsent("attn_logit_softcapping", "Gemma 3 has none"));
  KVSERVE_RETURN_IF_ERROR(r.Float("final_logit_softcapping", &c.final_softcap, false));
  if (c.rope_local_theta == 0) c.rope_local_theta = 10000.0;
  KVSERVE_RETURN_IF_ERROR(r.Float("rope_local_base_freq", &c.rope_local_theta, false));
  return ReadGemma3Pattern(r, c);
}

Result<HfMapping> MapGemma3Tensor(std::string_view hf_name, const HfConfig& c) {
  static const HfDecoderTensors tensors{
      .layer =
          [] {
            HfLayerNames names = GemmaLayerNames();
            names["self_attn.q_norm.weight"] = "attn_q_norm.weight";
            names["self_attn.k_norm.weight"] = "attn_k_norm.weight";
            return names;
          }(),
      .norm_plus_one = true,
      .lm_head_tied = true};
  return MapHfDecoderTensor(hf_name, c, tensors);
}

void WriteGemma3Metadata(const HfConfig& c, GgufWriter& w) {
  AddHfDecoderMetadata(c, {.rope_dimension_count = false}, w);
  if (c.final_softcap > 0) {
    w.SetFloat32("gemma3.final_logit_softcapping", static_cast<float>(c.final_softcap));
  }
  w.SetFloat32("gemma3.rope.freq_base_swa", static_cast<float>(c.rope_local_theta));
  w.SetUint32("gemma3.attention.sliding_window_pattern",
              static_cast<uint32_t>(c.sliding_window_pattern));
}

}  // namespace

KVSERVE_ARCHITECTURE(gemma3) {
  static const Architecture entry{
      .gguf_name = "gemma3",
      .load = &LoadGemma3,
      .hf_classes = {{"Gemma3ForCausalLM", "gemma3_text", &ReadGemma3Config, &MapGemma3Tensor,
                      &WriteGemma3Metadata},
                     {"Gemma3ForConditionalGeneration", "gemma3", &ReadGemma3Config,
                      &MapGemma3Tensor, &WriteGemma3Metadata}}};
  return entry;
}

}  // namespace kvserve
