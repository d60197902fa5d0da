// The llama architecture (Llama 1/2/3, TinyLlama, stories): RMSNorm, RoPE on interleaved pairs of
// q and k (Llama 3's frequency divisors from rope_freqs.weight where the file has them, linear
// position scaling where it says so), grouped-query attention, SwiGLU feed-forward, optionally
// tied output.
#include "model/architectures.h"
#include "model/decoder_blocks.h"

namespace kvserve {

Result<std::unique_ptr<Model>> LoadLlama(GgufFile file, ModelConfig config,
                                         const Backend& backend) {
  return LoadLlamaStyle(std::move(file), std::move(config), backend,
                        {.rope_mode = RopeMode::kInterleaved});
}

}  // namespace kvserve
