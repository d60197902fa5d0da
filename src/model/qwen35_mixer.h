// The first half of a Qwen3.5 layer (qwen35 and qwen35moe alike), as one self-loading block:
// x += mixer(attn_norm(x)), the mixer a Gated DeltaNet (gated_delta_net_block.h) or gated full
// attention (gated_attention_block.h) as the layout says, then xn = post_attention_norm(x) for
// the layer's feed-forward, whose residual is the architecture's own. Norm weights are used as
// stored.
#pragma once

#include <string>

#include "kernels/backend.h"
#include "kernels/weight_matrix.h"
#include "kv/kv_layer_view.h"
#include "model/forward_batch.h"
#include "model/gated_attention_block.h"
#include "model/gated_delta_net_block.h"
#include "model/model_config.h"
#include "model/qwen35_layout.h"
#include "model/weight_loader.h"

namespace kvserve {

class Qwen35Mixer {
 public:
  // Reads blk.<il>.attn_norm and post_attention_norm ([n_embd]) and the layer's mixer; adds them
  // to `weights`. Must not move afterwards.
  Status Load(const WeightLoader& r, const ModelConfig& c, const Qwen35Layout& layout, int il,
              WeightList& weights);

  // x += mixer(attn_norm(x)) through `proj`, then xn = post_attention_norm(x); the mixer reads
  // and writes the layer's cache (K/V or recurrent states).  x, xn, proj: [n_tokens, n_embd]
  void Forward(const Backend& be, const ModelConfig& c, const ForwardBatch& batch,
               const KvLayerView& kv, const RopeParams& rope, float* x, float* xn, float* proj,
               Workspace& ws) const;

  // The K/V of attn_norm(x) stored in the layer's cache alone (an attention layer's; xn is
  // scratch): the MTP layer's catch-up (qwen35_nextn.h).
  void StoreKv(const Backend& be, const ModelConfig& c, const ForwardBatch& batch,
               const KvLayerView& kv, const RopeParams& rope, const float* x, float* xn,
               Workspace& ws) const;

 private:
  bool recurrent_ = false;
  WeightVector attn_norm_, post_attn_norm_;  // [n_embd]
  GatedDeltaNetBlock delta_;                 // recurrent layers
  GatedAttentionBlock attention_;            // the others
};

}  // namespace kvserve
