// A loaded decoder-only transformer (llama or gpt2) and its forward pass. Immutable after Load():
// one Transformer can serve any number of runners, each with its own ForwardScratch and KV views.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "io/gguf_reader.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/matmul.h"
#include "model/forward_batch.h"
#include "model/model_config.h"
#include "model/weights.h"
#include "util/aligned_allocator.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace kvserve {

// Working memory of a forward pass. Grows to the largest batch seen and is then reused, so steady
// decoding does not allocate. One per runner (not shared between threads calling Forward).
struct ForwardScratch {
  // 64-byte aligned: rows of n_embd, n_ff, ... floats (multiples of 16) stay on line boundaries,
  // which lets the float matmul read activation rows in place instead of copying them.
  AlignedFloats x, xn, q, k, v, attn, proj, ff_gate, ff_up, qkv, logits_in, attn_tmp;
  std::vector<uint8_t> embd_row;  // one stored-layout embedding row, when read from a packed copy
  MatmulScratch matmul;
};

class Transformer {
 public:
  // `path` is a GGUF file or a Hugging Face model folder (model/hf_folder.h).
  static Result<std::unique_ptr<Transformer>> Load(const std::string& path);
  static Result<std::unique_ptr<Transformer>> FromGguf(GgufFile file);

  const ModelConfig& config() const { return config_; }
  const GgufFile& file() const { return file_; }
  const ModelWeights& weights() const { return weights_; }

  // Runs every token of `batch` through the model. Each token's K and V are stored at its slot in
  // `kv` (one view per layer) before attention, so tokens of the same sequence in this batch see
  // each other causally. Writes logits for batch.logit_rows: [logit_rows.size(), n_vocab].
  void Forward(const ForwardBatch& batch, std::span<const KvLayerView> kv, ForwardScratch& scratch,
               ThreadPool& pool, float* logits) const;

 private:
  Transformer() = default;
  void Embed(const ForwardBatch& batch, float* x, float* tmp,
             std::vector<uint8_t>& row_bytes) const;
  void Attention(const ForwardBatch& batch, const KvLayerView& kv, ForwardScratch& s,
                 ThreadPool& pool) const;
  void LlamaLayer(int il, const ForwardBatch& batch, const KvLayerView& kv, ForwardScratch& s,
                  ThreadPool& pool) const;
  void Gpt2Layer(int il, const ForwardBatch& batch, const KvLayerView& kv, ForwardScratch& s,
                 ThreadPool& pool) const;
  void MatmulInto(const WeightMatrix& w, const float* x, int m, float* y, ForwardScratch& s,
                  ThreadPool& pool) const;

  GgufFile file_;  // owns the mapping the weights point into
  ModelConfig config_;
  ModelWeights weights_;
  const KernelTable* kernels_ = nullptr;
};

}  // namespace kvserve
