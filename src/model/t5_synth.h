// The random-weight recipe of llama.cpp's t5 architecture (T5 v1.0 and v1.1 / Flan-T5: an
// encoder and a decoder with relative position biases), for `kvserve synth` (synthetic_model.h).
// The architecture's entry (src/model/arch/t5.cc) points its Architecture::synthetic here.
#pragma once

#include "model/synthetic_model.h"

namespace kvserve {

// Tensors (llama.cpp's names and order; GGML dims [n_in, n_out]; att = n_heads * head_dim, which
// may differ from n_embd as in real T5 files):
//   token_embd [n_embd -> n_vocab]; output [n_embd -> n_vocab] unless tied (v1.0: absent)
//   enc.blk.<i>.: attn_norm {n_embd}; attn_rel_b {n_heads, rel_buckets} (layer 0 only, F32 as
//     llama.cpp never quantizes it, normal(0, 50 stddev): SyntheticFill::kWide); attn_q, attn_k,
//     attn_v [n_embd -> att]; attn_o [att -> n_embd]; ffn_norm {n_embd}; ffn_gate (gated_ffn
//     only), ffn_up [n_embd -> n_ff]; ffn_down [n_ff -> n_embd]
//   enc.output_norm {n_embd}
//   dec.blk.<i>.: attn_norm, attn_rel_b (layer 0 only), attn_q/k/v/o as the encoder's;
//     cross_attn_norm {n_embd}; cross_attn_q [n_embd -> att] (of the decoder's stream),
//     cross_attn_k, cross_attn_v [n_embd -> att] (of the encoder's output); cross_attn_o
//     [att -> n_embd]; the feed-forward as the encoder's (no cross_attn_rel_b: real checkpoints
//     have none)
//   dec.output_norm {n_embd}
// Every norm is 1 + normal (SyntheticFill::kNearOne), so a test tells the encoder's final norm
// from the decoder's. Keys: T5Model.set_gguf_parameters's (llama.cpp's conversion/t5.py), in its
// order; decoder_start_token_id is 0 (T5's pad token; stories260K's <unk>). Presets: t5-tiny
// (v1.1: gated GELU, separate output), t5-tiny-v1 (v1.0: ReLU, tied), t5-small, t5-base.
const SyntheticRecipe& T5Synthetic();
// t5encoder (llama.cpp's encoder-only T5): token_embd, the enc.* tensors and keys above, no
// output. Preset: t5encoder-tiny (t5-tiny's encoder).
const SyntheticRecipe& T5EncoderSynthetic();

}  // namespace kvserve
