// Hugging Face's T5ForConditionalGeneration (model_type t5: T5 v1.0 and v1.1 / Flan-T5) as
// llama.cpp's converter reads it (conversion/t5.py, T5Model; names from gguf-py's
// tensor_mapping.py), the t5 architecture's class (arch/t5.cc). Kept apart from the loader's file.
//
// config.json -> GGUF t5.* keys, in the converter's order:
//   n_positions (512 when absent, as the converter warns) -> context_length
//   d_model -> embedding_length; d_ff -> feed_forward_length; num_layers -> block_count
//   num_decoder_layers (when given) -> decoder_block_count
//   num_heads -> attention.head_count; d_kv -> attention.key_length and value_length
//   layer_norm_epsilon -> attention.layer_norm_epsilon and attention.layer_norm_rms_epsilon
//   relative_attention_num_buckets -> attention.relative_buckets_count
//   decoder_start_token_id -> decoder_start_token_id (required, as the converter requires it)
// Tensors, as stored (no transform; F32, F16 and BF16 kept, norms widened to F32):
//   shared -> token_embd; encoder.embed_tokens and decoder.embed_tokens skipped (the converter
//     keeps the first of the three and T5's checkpoints tie them; a checkpoint with no "shared"
//     has no token_embd, which the loader names); lm_head -> output (when stored)
//   encoder.block.N.layer.0.: layer_norm -> enc.blk.N.attn_norm; SelfAttention.{q,k,v,o} ->
//     attn_{q,k,v,o}; SelfAttention.relative_attention_bias [buckets, heads] -> attn_rel_b
//     (GGML {heads, buckets}, the same bytes)
//   encoder.block.N.layer.1.: layer_norm -> ffn_norm; DenseReluDense.wi (v1.0) -> ffn_up,
//     wi_0 -> ffn_gate and wi_1 -> ffn_up (v1.1), wo -> ffn_down
//   decoder.block.N.layer.0. as the encoder's, under dec.blk.N.; layer.1.: layer_norm ->
//     cross_attn_norm, EncDecAttention.{q,k,v,o,relative_attention_bias} ->
//     cross_attn_{q,k,v,o,rel_b}; layer.2. as the encoder's layer.1.
//   encoder.final_layer_norm -> enc.output_norm; decoder.final_layer_norm -> dec.output_norm
// Refused by key: a feed_forward_proj other than relu and gated-gelu (llama.cpp's t5 graph runs
// ReLU, or GELU where ffn_gate is stored), a relative_attention_max_distance other than 128
// (llama.cpp's, fixed).
#pragma once

#include <vector>

#include "model/architecture.h"

namespace kvserve {

// T5ForConditionalGeneration, for the t5 architecture's entry.
std::vector<HfClass> T5HfClasses();
// T5EncoderModel (conversion/t5.py's T5EncoderModel: T5 text encoders), for the t5encoder
// architecture's entry: the same keys and encoder tensors, no decoder_block_count,
// decoder_start_token_id, decoder or lm_head.
std::vector<HfClass> T5EncoderHfClasses();

}  // namespace kvserve
