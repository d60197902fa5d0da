// The gemma3 architecture (Gemma 3, text): the Gemma decoder (gemma_decoder.h) with an RMSNorm of
// every q and k head before RoPE and no soft-capping. Layer i is global when
// i % attention.sliding_window_pattern == pattern - 1 (6 where the key is missing, as released
// files), else local: a sliding window of attention.sliding_window keys and RoPE base
// rope.freq_base_swa (10000 where missing) without scaling; global layers use rope.freq_base and
// the rope.scaling keys (linear).
#include <string>

#include "model/architectures.h"
#include "model/gemma_decoder.h"

namespace kvserve {

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

}  // namespace kvserve
