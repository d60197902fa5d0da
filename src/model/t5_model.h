// T5 (encoder-decoder), as llama.cpp's t5 architecture reads its GGUF files: an encoder of
// bidirectional self-attention layers over the whole input, and a decoder whose layers attend
// causally to the output so far (the KV cache's full causal group) and then to the encoder's
// output (the cross-attention group, kv/cross_attention_kind.h, filled once by Encode). See
// t5_blocks.h for the sublayers and t5_position_bias.h for the relative position bias.
//
// The KV spec: group 0, the decoder's self-attention layers 0 .. n_dec - 1; group 1
// (cross_group()), their cross-attention layers, model layers n_dec .. 2 n_dec - 1. The output is
// token_embd when the file has no output.weight, unscaled, as llama.cpp computes it (Hugging
// Face's T5 v1.0 scales its tied output by n_embd^-0.5: the same argmax, other logits).
#pragma once

#include <memory>

#include "io/gguf_reader.h"
#include "kernels/backend.h"
#include "model/model.h"
#include "model/model_config.h"
#include "util/status.h"

namespace kvserve {

Result<std::unique_ptr<Model>> LoadT5(GgufFile file, ModelConfig config, const Backend& backend);
// A t5encoder file (llama.cpp's encoder-only T5: enc.blk.N.*, token_embd, enc.output_norm; for
// embeddings, as T5 text encoders are used): no decoder, no KV cache.
Result<std::unique_ptr<Model>> LoadT5Encoder(GgufFile file, ModelConfig config,
                                             const Backend& backend);

}  // namespace kvserve
