// The linear-attention sublayer of Qwen3.5 / Qwen3-Next (Gated DeltaNet), as one self-loading
// block, as llama.cpp's qwen35 graph computes it: qkv = attn_qkv · xn, z = attn_gate · xn; a short
// causal convolution (ssm_conv1d, kernel K) of qkv then SiLU; per value head the gated delta rule
// over q, k (L2-normalized) and v with gate g = softplus(ssm_alpha · xn + ssm_dt.bias) * ssm_a and
// beta = sigmoid(ssm_beta · xn); then RMSNorm per head (ssm_norm) times silu(z), and ssm_out.
// The norm before it and the residual after it are the layer's own.
//
// Its memory of a sequence is the convolution's last K - 1 inputs and the delta rule's matrices,
// one state per layer in a recurrent-state group's blocks (kv/recurrent_state_kind.h): the state
// after a sequence's token at position p lives in the block of logical block p / block_size, so
// every full block keeps the state after its last position (a prefix-cache checkpoint).
#pragma once

#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/weight_matrix.h"
#include "kv/kv_layer_view.h"
#include "kv/kv_spec.h"
#include "model/forward_batch.h"
#include "model/model_config.h"
#include "model/moe_feed_forward.h"
#include "model/weight_loader.h"

namespace kvserve {

// The delta net's sizes (<arch>.ssm.* keys as llama.cpp names them).
struct DeltaNetShape {
  int head_dim = 0;     // ssm.state_size: the key and value head size S
  int n_k_heads = 0;    // ssm.group_count
  int n_v_heads = 0;    // ssm.time_step_rank
  int conv_kernel = 0;  // ssm.conv_kernel: K

  int key_dim() const { return n_k_heads * head_dim; }
  int value_dim() const { return n_v_heads * head_dim; }
  int conv_channels() const { return 2 * key_dim() + value_dim(); }
  // Floats of one layer's state: the convolution's [K - 1, channels], then the delta rule's
  // [n_v_heads, S, S].
  int64_t conv_floats() const { return static_cast<int64_t>(conv_kernel - 1) * conv_channels(); }
  int64_t state_floats() const {
    return conv_floats() + static_cast<int64_t>(n_v_heads) * head_dim * head_dim;
  }

  // Reads ssm.state_size, group_count, time_step_rank, conv_kernel and inner_size (which must be
  // n_v_heads * state_size); errors name the key and the value.
  static Result<DeltaNetShape> Read(const GgufFile& file, const std::string& arch);
};

// The recurrent-state group of `layers` for a delta net of `shape`; each layer's state has
// `extra_floats` more floats past the delta net's own (where the model keeps other per-sequence
// state that follows the same checkpoints: qwen35_nextn.h).
KvGroupSpec DeltaNetGroup(const DeltaNetShape& shape, std::vector<int> layers,
                          int64_t extra_floats = 0);

// The runs of the batch's rows over a recurrent-state layer's blocks (one per block holding a
// state that a sequence's rows reach; rows in kNoBlock blocks run on into the next), with each
// state's part at `offset` floats into its block: `from` is the state before the run's first row
// (null at position 0), `to` where the state after its last row goes. The batch's rows of one
// sequence are contiguous with consecutive positions.
std::vector<RecurrentRun> RecurrentRuns(const ForwardBatch& batch, const KvLayerView& kv,
                                        int64_t offset);

// Workspace buffer ids of the block, past the mixture of experts' (moe_feed_forward.h), so a
// layer may have both; an architecture using it starts its own at kDeltaNetBufferEnd.
enum DeltaNetBuffer : int {
  kDeltaQkv = kMoeBufferEnd,  // [n_tokens, conv_channels]: attn_qkv · xn
  kDeltaConv,                 // [n_tokens, conv_channels]: silu(conv(qkv))
  kDeltaZ,                    // [n_tokens, value_dim]
  kDeltaAlpha,                // [n_tokens, n_v_heads]
  kDeltaBetaIn,               // [n_tokens, n_v_heads]: ssm_beta · xn
  kDeltaBeta,                 // [n_tokens, n_v_heads]
  kDeltaG,                    // [n_tokens, n_v_heads]
  kDeltaOut,                  // [n_tokens, value_dim]
  kDeltaNetBufferEnd
};

class GatedDeltaNetBlock {
 public:
  // Reads <prefix>attn_qkv, attn_gate, ssm_conv1d, ssm_dt.bias, ssm_a, ssm_beta, ssm_alpha,
  // ssm_norm and ssm_out with the shapes of `shape` and c.n_embd; adds them to `weights`. Must
  // not move afterwards.
  Status Load(const WeightLoader& r, const ModelConfig& c, const DeltaNetShape& shape,
              const std::string& prefix, WeightList& weights);

  // out = ssm_out · (RMSNorm(delta rule) * silu(z)) of xn, reading and leaving each sequence's
  // state in the layer's recurrent-state blocks. The batch's rows of one sequence are contiguous
  // with consecutive positions.  xn, out: [n_tokens, n_embd]
  void Forward(const Backend& be, const ModelConfig& c, const ForwardBatch& batch,
               const KvLayerView& kv, const float* xn, float* out, Workspace& ws) const;

 private:
  DeltaNetShape shape_;
  WeightMatrix w_qkv_;        // [conv_channels, n_embd]
  WeightMatrix w_gate_;       // [value_dim, n_embd]: z
  WeightMatrix w_beta_;       // [n_v_heads, n_embd]
  WeightMatrix w_alpha_;      // [n_v_heads, n_embd]
  WeightMatrix w_out_;        // [n_embd, value_dim]
  WeightVector conv_;         // [conv_channels, K]
  WeightVector dt_bias_, a_;  // [n_v_heads]; a = -exp(A_log), as the converter stores it
  WeightVector norm_;         // [head_dim]
};

}  // namespace kvserve
