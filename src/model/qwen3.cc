// The qwen3 architecture (dense Qwen 3): llama's layer with an RMSNorm of every q and k head
// (attn_q_norm, attn_k_norm) before RoPE on split halves, no biases; head_dim from
// attention.key_length (it need not be n_embd / n_heads).
#include "model/architectures.h"
#include "model/decoder_blocks.h"

namespace kvserve {

Result<std::unique_ptr<Model>> LoadQwen3(GgufFile file, ModelConfig config,
                                         const Backend& backend) {
  return LoadLlamaStyle(std::move(file), std::move(config), backend,
                        {.rope_mode = RopeMode::kSplitHalves, .qk_norm = true});
}

}  // namespace kvserve
