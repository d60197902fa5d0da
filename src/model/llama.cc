// The llama architecture (Llama 1/2/3, TinyLlama, stories): RMSNorm, RoPE on interleaved pairs of
// q and k (Llama 3's frequency divisors from rope_freqs.weight where the file has them, linear
// position scaling where it says so), grouped-query attention, SwiGLU feed-forward, optionally
// tied output. Mistral's files are llama too: where llama.attention.sliding_window is set, every
// layer attends over that window (llama.cpp's converter does not write the key for Mistral; our
// Hugging Face folders do).
#include "model/architectures.h"
#include "model/decoder_blocks.h"

namespace kvserve {

Result<std::unique_ptr<Model>> LoadLlama(GgufFile file, ModelConfig config,
                                         const Backend& backend) {
  return LoadLlamaStyle(std::move(file), std::move(config), backend,
                        {.rope_mode = RopeMode::kInterleaved, .sliding_window = true});
}

}  // namespace kvserve
