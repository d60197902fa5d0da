// Embeddings: each input's token states from a model that computes them (Model::Embed: T5's
// encoder, a t5encoder file), pooled into one vector per input and normalized, as llama.cpp's
// llama-embedding and its server's /v1/embeddings compute them. Served by `kvserve embed` and
// POST /v1/embeddings.
//
// Thread rules: Run may be called from any thread; one batch runs at a time (a mutex), on the
// embedder's own workspace, beside the engine's runner (the model is immutable and read by both).
#pragma once

#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/backend.h"
#include "model/model.h"
#include "util/status.h"

namespace kvserve {

// How an input's token states become its vector (llama.cpp's pooling types): kNone keeps every
// token's; kMean averages them; kCls takes the first token's, kLast the last one's.
enum class Pooling { kNone, kMean, kCls, kLast };
// "none", "mean", "cls", "last".
const char* PoolingName(Pooling pooling);
// The pooling named `name`; the error names the field (`field`) and the value.
Result<Pooling> ParsePooling(std::string_view name, std::string_view field);
// The pooling the file asks for (<arch>.pooling_type, llama.cpp's numbers: 0 none, 1 mean, 2 cls,
// 3 last), else mean: an OpenAI client expects one vector per input. Rank (4) is refused.
Result<Pooling> FilePooling(const Model& model);

// llama.cpp's --embd-normalize (common_embd_normalize): -1 none; 0 scaled so that the largest
// |value| is 32760 (int16's range); 1 taxicab (sum of |values| = 1); 2 euclidean (length 1, the
// default, as OpenAI's embeddings are); p > 2: the p-norm. A zero vector stays zero.
void NormalizeEmbedding(std::span<float> v, int norm);
// Whether `norm` is one of those (-1 or more).
Status CheckNormalize(int norm, std::string_view field);

struct EmbedOptions {
  Pooling pooling = Pooling::kMean;
  int normalize = 2;
};

struct Embeddings {
  int dim = 0;  // floats per vector: the model's n_embd
  // Pooled: one vector per input, in order. kNone: every token's, input after input.
  std::vector<std::vector<float>> vectors;
  std::vector<int> input_tokens;  // per input: its tokens
  int total_tokens = 0;
};

class Embedder {
 public:
  // `model` is borrowed and must outlive the embedder. An input may have up to max_input_tokens
  // tokens (the context); inputs are encoded together up to max_batch_tokens a forward pass (a
  // longer input alone). n_threads: the workspace's (0 = one per core), made at the first Run.
  Embedder(const Model& model, int n_threads, int max_input_tokens, int max_batch_tokens);

  // Errors: a model that computes no embeddings, an empty input list or input, a token out of
  // the vocabulary, an input longer than max_input_tokens (each names the input by index).
  Result<Embeddings> Run(std::span<const std::vector<int32_t>> inputs, const EmbedOptions& options);
  // Whether the model computes embeddings, else why not (for the route and the CLI to refuse
  // early).
  Status Supported() const;
  int max_input_tokens() const { return max_input_tokens_; }
  int dim() const { return model_.config().n_embd; }

 private:
  Status Check(std::span<const std::vector<int32_t>> inputs) const;
  // The states of inputs[first .. first + count) into `states` ([their tokens, dim]).
  void EncodeBatchOf(std::span<const std::vector<int32_t>> inputs, size_t first, size_t count,
                     std::vector<float>& states);

  const Model& model_;
  int n_threads_;
  int max_input_tokens_;
  int max_batch_tokens_;
  std::mutex mutex_;  // guards workspace_ and runs
  std::unique_ptr<Workspace> workspace_;
};

}  // namespace kvserve
