// The decoder Gemma 2 and Gemma 3 share (llama.cpp's gemma2/gemma3 graphs): embeddings times
// sqrt(n_embd); per layer x += post_attention_norm(wo · attention(rope(q), rope(k), v) of
// RMSNorm(x)), then x += post_ffw_norm(w_down · (gelu(gate) * up) of RMSNorm(x)); final RMSNorm,
// the tied output, and optionally a final logit soft-cap. Norm weights are used as stored (the
// files already hold Gemma's 1 + w). What differs between layers (a sliding window or not, the
// RoPE base and scale, the attention soft-cap) is per-layer data the architecture file states;
// the forward pass has no branch on the architecture's name.
#pragma once

#include <memory>
#include <vector>

#include "kernels/backend.h"
#include "model/model.h"
#include "model/model_config.h"

namespace kvserve {

// One layer's attention: the window (0 = global; it becomes its KV group's cache kind, which
// the attention reads), its RoPE, its score soft-cap.
struct GemmaLayerAttention {
  int window = 0;
  RopeParams rope;
  float soft_cap = 0.0f;  // attn_logit_softcapping; 0 = none
};

struct GemmaOptions {
  bool qk_norm = false;         // attn_q_norm, attn_k_norm on each head before RoPE (gemma3)
  float final_soft_cap = 0.0f;  // final_logit_softcapping; 0 = none
  std::vector<GemmaLayerAttention> layers;  // [n_layers]
};

// Reads the RMS epsilon and every tensor (blk.N.attn_norm, attn_q/k/v, [attn_q_norm, attn_k_norm],
// attn_output, post_attention_norm, ffn_norm, ffn_gate, ffn_up, ffn_down, post_ffw_norm;
// output_norm, token_embd, output where the file has it). The KvSpec groups the local layers by
// window (a SlidingWindowKind group each) and the global ones (one FullCausalKind group).
Result<std::unique_ptr<Model>> LoadGemma(GgufFile file, ModelConfig config, const Backend& backend,
                                         GemmaOptions options);

}  // namespace kvserve
