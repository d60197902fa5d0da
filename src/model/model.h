// One loaded decoder-only model, whatever its architecture: the interface the engine, the CLI and
// the tests see. Each architecture is one file (llama.cc, gpt2.cc, ...) that builds its forward
// pass from the backend's operations and the shared blocks of decoder_blocks.h, and one line in
// the registry (model.cc). Immutable after load: one Model serves any number of runners, each
// with its own KV cache and workspace.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "io/gguf_reader.h"
#include "kernels/backend.h"
#include "kernels/weight_matrix.h"
#include "kv/kv_cache.h"
#include "kv/kv_spec.h"
#include "model/forward_batch.h"
#include "model/hidden_state_drafter.h"
#include "model/model_config.h"
#include "model/nextn_drafter.h"
#include "model/weight_loader.h"
#include "util/status.h"

namespace kvserve {

class Model {
 public:
  virtual ~Model() = default;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelConfig& config() const { return config_; }
  // The file the weights point into (metadata: tokenizer, chat template).
  const GgufFile& file() const { return file_; }
  const Backend& backend() const { return backend_; }
  // Every matrix the forward pass multiplies, each once (a tied embedding counts as the output).
  std::span<const WeightMatrix* const> matrices() const { return matrices_; }
  // The share of tokens that multiply `m`: 1, or for a mixture's expert the routed share
  // (expert_used_count / expert_count); what decode reads and prefill multiplies per token.
  double TokenShare(const WeightMatrix* m) const;

  // The KV cache this model needs: its layer groups and their row shapes.
  virtual KvSpec kv_spec() const;
  // The most positions the architecture can address (learned position embeddings), or 0 when
  // only the context length limits it. Everyone asks here; nobody checks the architecture name.
  virtual int max_positions() const { return 0; }
  // Whether a context of n_ctx positions fits max_positions(); the error names both.
  Status CheckContextSize(int n_ctx) const;

  // Runs every token of `batch` through the model. Each token's K and V are stored at its slot in
  // `kv` before attention, so tokens of the same sequence in this batch see each other causally.
  // Writes logits for batch.logit_rows: [logit_rows.size(), n_vocab], host memory.
  virtual void Forward(const ForwardBatch& batch, KvCache& kv, Workspace& ws,
                       float* logits) const = 0;

  // The token embedding the forward pass starts from ([n_vocab, n_embd]), for drafters that read
  // it (HiddenStateDrafter); nullptr where an architecture does not expose it.
  virtual const WeightMatrix* token_embedding() const { return nullptr; }
  // Non-null for a drafter that runs only beside a target (gemma4-assistant): Forward is never
  // called on it, and the CLI and the engine refuse it as the model to serve.
  virtual const HiddenStateDrafter* hidden_state_drafter() const { return nullptr; }
  // Non-null when the file has multi-token-prediction layers the model runs (Qwen3.5's nextn
  // layer): `--spec mtp` drafts with them.
  virtual const NextnDrafter* nextn_drafter() const { return nullptr; }

  // Encoder-decoder models (T5). cross_group(): the KV group whose blocks hold each sequence's
  // cross-attention K/V over its encoder input, which Forward's decoder reads (key_counts of that
  // group: the input's length); -1 for a decoder-only model, which never gets Encode.
  virtual int cross_group() const { return -1; }
  // Runs the encoder over every sequence's whole input and stores, for every decoder layer, the
  // K and V of its output at batch.cross_slots. Writes nothing else of `kv`.
  virtual void Encode(const EncodeBatch& batch, KvCache& kv, Workspace& ws) const {}
  // The token a decoder's output starts from (T5's decoder_start_token_id); -1: none.
  virtual int32_t decoder_start_token() const { return -1; }

  // Embeddings (engine/embedder.h): whether Embed computes them. Embed writes the hidden state of
  // every token of each of the batch's sequences after the final norm (T5: the encoder's output),
  // as llama.cpp's embeddings read it; batch.cross_slots is not read, nothing is cached.
  // hidden: [batch.n_tokens(), n_embd], host memory.
  virtual bool computes_embeddings() const { return false; }
  virtual void Embed(const EncodeBatch& batch, float* hidden, Workspace& ws) const {}
  // A model without a decoder (t5encoder): it computes embeddings only, and the engine refuses
  // requests for text.
  virtual bool encoder_only() const { return false; }
  // Ok, or (encoder_only) the error every path that generates text gives, naming the
  // architecture and what the model computes instead.
  Status CheckGeneratesText() const;

 protected:
  Model(GgufFile file, ModelConfig config, const Backend& backend);
  // Declares the matrices Forward multiplies and the vectors it reads (the model's own members;
  // duplicates and empty vectors count once / not at all) and lets the backend prepare them
  // (WeightMatrix::packed, WeightVector::prepared). Every architecture's loader calls it once,
  // with all of them.
  void DeclareWeights(const WeightList& weights);

  GgufFile file_;  // owns the mapping the weights point into
  ModelConfig config_;
  const Backend& backend_;

 private:
  std::vector<WeightMatrix*> owned_matrices_;  // the derived model's members
  std::vector<const WeightMatrix*> matrices_;
  std::vector<WeightVector*> vectors_;                          // the derived model's members
  std::vector<std::pair<const WeightMatrix*, double>> routed_;  // WeightList::routed
  std::shared_ptr<uint8_t> prepared_storage_;  // the backend's copies (WeightMatrix::packed)
};

// Loads a GGUF file or a Hugging Face folder (model/hf_folder.h) for `backend`, which must outlive
// the model. Unknown architectures are refused by name, with the list of supported ones.
Result<std::unique_ptr<Model>> LoadModel(const std::string& path, const Backend& backend);
Result<std::unique_ptr<Model>> LoadModel(GgufFile file, const Backend& backend);
// "llama, gpt2": the architectures of the registry, for messages.
std::string SupportedArchitectures();

}  // namespace kvserve
