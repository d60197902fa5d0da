// The phi3 architecture (Phi-3, Phi-3.5 mini at its trained context): llama's layer with one fused
// q/k/v projection (attn_qkv: rows q, k, v), one fused gate/up projection (ffn_up: 2 * n_ff rows,
// gate then up) and RoPE on split halves. LongRoPE files (rope_factors_long/short) are refused.
// phi3.attention.sliding_window is read by neither kvserve nor llama.cpp (which disables Phi's
// window because converted files carry a wrong value): attention is global, as llama.cpp's.
#include "model/architectures.h"
#include "model/decoder_blocks.h"

namespace kvserve {

Result<std::unique_ptr<Model>> LoadPhi3(GgufFile file, ModelConfig config, const Backend& backend) {
  return LoadLlamaStyle(
      std::move(file), std::move(config), backend,
      {.rope_mode = RopeMode::kSplitHalves, .fused_qkv = true, .fused_gate_up = true});
}

}  // namespace kvserve
