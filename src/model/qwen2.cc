// The qwen2 architecture (Qwen 2, Qwen 2.5): llama's layer with biases on the q, k and v
// projections and RoPE on split halves (pairs i, i + rope_dims/2).
#include "model/architectures.h"
#include "model/decoder_blocks.h"

namespace kvserve {

Result<std::unique_ptr<Model>> LoadQwen2(GgufFile file, ModelConfig config,
                                         const Backend& backend) {
  return LoadLlamaStyle(std::move(file), std::move(config), backend,
                        {.rope_mode = RopeMode::kSplitHalves, .qkv_bias = true});
}

}  // namespace kvserve
