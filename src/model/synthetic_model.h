// Random-weight models for benchmarks and tests (`kvserve synth`). The file has the tensor names
// and metadata keys of llama.cpp's converters, so llama.cpp reads it too, and the tokenizer is
// copied from a vocabulary-only GGUF (every tokenizer.* key), which also fixes n_vocab.
//
// Values: every matrix element ~ normal(0, stddev), norm weights 1 (unless a recipe asks for
// kNearOne), biases 0. Row r of tensor t
// draws from its own SplitMix64 stream seeded by (seed, t, r), so the bytes depend only on the
// options and the vocabulary, never on the thread count. Matrices (token and position embeddings
// included) are stored in the chosen type; a row length that is not a multiple of a block type's
// 32 elements falls back to F16 (as llama.cpp's quantizer does); 1-D tensors are F32.
// Tensors are generated while the file is written, kChunkBytes of output at a time, so memory use
// stays a few MiB whatever the model size. What tensors and keys an architecture has, and its
// named shapes, are its own: a `SyntheticRecipe` in its src/model/arch/<name>.cc
// (Architecture::synthetic); this file only checks shapes, draws values and writes.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/ggml_type.h"
#include "io/gguf_reader.h"
#include "io/gguf_writer.h"
#include "model/model_config.h"
#include "util/status.h"

namespace kvserve {

// The shape of a model to synthesize. n_vocab comes from the vocabulary file.
struct SyntheticShape {
  std::string arch = "llama";  // general.architecture: one with a SyntheticRecipe
  int n_embd = 0;
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;  // llama only; gpt2 uses n_heads
  int n_ff = 0;
  int n_ctx = 0;
  float norm_eps = 1e-5f;
  float rope_freq_base = 10000.0f;  // llama only
  bool tied_output = false;         // llama: no output.weight; gpt2 is always tied
  // qwen3moe: n_expert SwiGLU experts of width n_ff, n_expert_used of them per token (the router,
  // ffn_gate_inp, is F32 as in llama.cpp's files).
  int n_expert = 0;
  int n_expert_used = 0;
  int head_dim = 0;  // 0: n_embd / n_heads; else attention.key_length (gpt-oss: 64 heads of 64)
  int window = 0;    // gpt-oss, gemma4: attention.sliding_window of its windowed layers
  // gemma4: layer i is global when i % swa_period == swa_period - 1, else windowed with heads of
  // head_dim / 2; per_layer_input wide per-layer inputs; the last shared_kv_layers layers read
  // earlier layers' caches.
  int swa_period = 0;
  int per_layer_input = 0;
  int shared_kv_layers = 0;
  int n_ff_expert = 0;    // gemma4 with experts: an expert's width (n_ff is the dense MLP's)
  int n_embd_target = 0;  // gemma4-assistant: the target's hidden width (embedding_length_out)
  // Rotary dims when only part of a head rotates (rope.dimension_count); 0: the whole head.
  int rope_dims = 0;
  // qwen35's interleaved M-RoPE sections (rope.dimension_sections, [t, h, w, e] pairs), summing
  // to RopeDims() / 2. Text tokens have the same t, h and w positions (e is 0).
  std::array<int, 4> rope_sections{};
  // qwen35: layer i is gated full attention when (i + 1) % full_attention_interval == 0, else a
  // Gated DeltaNet layer: ssm_group_count key heads (ssm.group_count) and ssm_time_step_rank value
  // heads (ssm.time_step_rank, a multiple of the key heads), all ssm_state_size wide
  // (ssm.state_size; ssm.inner_size is ssm_state_size * ssm_time_step_rank), after a causal
  // depthwise convolution of ssm_conv_kernel taps (ssm.conv_kernel).
  int full_attention_interval = 0;
  int ssm_state_size = 0;
  int ssm_group_count = 0;
  int ssm_time_step_rank = 0;
  int ssm_conv_kernel = 0;
  // qwen35: MTP (nextn) layers after the n_layers main ones (nextn_predict_layers; block_count is
  // n_layers + nextn_layers). Each is a gated full-attention decoder layer with the nextn.*
  // tensors; llama.cpp runs at most one.
  int nextn_layers = 0;
  // t5 (encoder-decoder): n_layers encoder blocks, then n_decoder_layers decoder blocks
  // (decoder_block_count, written where set, as Hugging Face configs with num_decoder_layers
  // have it; 0: as many as the encoder); rel_buckets relative-position buckets
  // (attention.relative_buckets_count); gated_ffn: T5 v1.1's gated GELU (ffn_gate), else v1.0's
  // ReLU.
  int n_decoder_layers = 0;
  int rel_buckets = 0;
  bool gated_ffn = false;

  int HeadDim() const { return head_dim > 0 ? head_dim : n_embd / n_heads; }
  int RopeDims() const { return rope_dims > 0 ? rope_dims : HeadDim(); }
  // qwen35: layer i is a delta-net (recurrent) layer, not full attention.
  bool RecurrentLayer(int i) const {
    return full_attention_interval > 0 && (i + 1) % full_attention_interval != 0;
  }
  // gemma4, gemma4-assistant: layer i is global (else windowed) when i % swa_period ==
  // swa_period - 1; every layer without a period.
  bool GlobalLayer(int i) const { return swa_period == 0 || i % swa_period == swa_period - 1; }
};

// The named shapes of every architecture's recipe (gpt2-124m, tinyllama-1.1b, ...).
Result<SyntheticShape> SyntheticPreset(const std::string& name);
// "gpt2-124m, tinyllama-1.1b, ...", for usage and error messages.
std::string SyntheticPresetNames();
// "gpt2, llama, qwen3moe": the architectures with a recipe.
std::string SyntheticArchitectureNames();
// The vocabulary file a preset or architecture uses by default, relative to shared/models.
const char* DefaultVocabFile(const std::string& arch);

// kNegative: -|x|, x ~ normal(0, stddev) (qwen35's ssm_a, which llama.cpp's converter stores as
// -exp(A_log): negative decay rates, small enough that the recurrence keeps a long memory).
// kNearOne: 1 + x, x ~ normal(0, 5 stddev) (0.1 at the default): RMSNorm weights that differ per
// channel and per tensor, where a test must tell one norm from another (qwen35's nextn norms);
// within [0.5, 2] in practice, so 1 + (w - 1) gives w back exactly.
// kWide: x ~ normal(0, 50 stddev) (1 at the default): T5's relative position biases, added to
// the attention scores as they are, large enough to make attention depend on the distance.
enum class SyntheticFill { kRandom, kOnes, kZeros, kNegative, kNearOne, kWide };

// The tensors a recipe asks for, in file order. Matrices take the file's type (F16 where a row
// does not fill whole blocks); vectors and F32 matrices are F32.
class SyntheticTensors {
 public:
  virtual ~SyntheticTensors() = default;
  // n_out rows of n_in (GGML dims [n_in, n_out]).
  virtual void Matrix(const std::string& name, int64_t n_in, int64_t n_out) = 0;
  virtual void F32Matrix(const std::string& name, int64_t n_in, int64_t n_out,
                         SyntheticFill fill = SyntheticFill::kRandom) = 0;
  virtual void Vector(const std::string& name, int64_t n, SyntheticFill fill) = 0;
  // n_expert matrices of n_out rows of n_in in one 3-D tensor (dims [n_in, n_out, n_expert]).
  virtual void Experts(const std::string& name, int64_t n_in, int64_t n_out, int64_t n_expert) = 0;
};

struct NamedShape {
  const char* name;
  SyntheticShape shape;
};

// What an architecture gives `kvserve synth`: its tensors and its "<arch>." keys for a shape (the
// shape checked against the rules below first), its default vocabulary and its named shapes.
struct SyntheticRecipe {
  const char* vocab_file;  // relative to shared/models
  bool grouped_kv = true;  // n_kv_heads may differ from n_heads (else it is set to n_heads)
  bool rotary = true;      // the head size must be even
  bool experts = false;    // n_expert and n_expert_used are required and checked
  bool always_tied = false;
  bool drafter = false;  // drafts for a target: n_embd_target is required
  // Gated DeltaNet layers (qwen35): full_attention_interval, the ssm_* fields and rope_sections
  // are required and checked.
  bool delta_net = false;
  // An encoder and a decoder with relative position buckets (t5): rel_buckets is required.
  bool encoder_decoder = false;
  void (*tensors)(const SyntheticShape& s, int64_t n_vocab, SyntheticTensors& out);
  void (*metadata)(const SyntheticShape& s, int64_t n_vocab, GgufWriter& w);
  std::vector<NamedShape> presets;
};

// Parts the decoders' recipes share. Globals: token_embd, output_norm, output unless tied.
void AddSyntheticDecoderGlobals(const SyntheticShape& s, int64_t n_vocab, SyntheticTensors& out);
// A layer's q/k/v/o (q/k norms with qk_norm), attn_norm and ffn_norm, under blk.<layer>.
void AddSyntheticAttention(const SyntheticShape& s, int layer, bool qk_norm, SyntheticTensors& out);
// The keys of a RMSNorm RoPE decoder: shape, heads, kv heads, epsilon, rope dims and base.
void AddSyntheticDecoderMetadata(const SyntheticShape& s, int64_t n_vocab, GgufWriter& w);

struct SyntheticOptions {
  SyntheticShape shape;
  GgmlType type = GgmlType::kF32;  // of the matrices: F32, F16, BF16, Q8_0 or Q4_0
  // Of the experts' 3-D tensors where set (gpt-oss's files: MXFP4); else `type`.
  std::optional<GgmlType> expert_type;
  uint64_t seed = 1;
  float stddev = 0.02f;
  int n_threads = 0;  // 0 = one per hardware thread; does not change the output
  std::string name;   // general.name; empty = "synthetic <arch>"
};

class SyntheticModel {
 public:
  // Output bytes generated per producer step.
  static constexpr size_t kChunkBytes = 4 << 20;

  struct TensorPlan {
    std::string name;
    GgmlType type;
    std::vector<int64_t> dims;  // GGML order
    SyntheticFill fill;
  };

  // Checks the shape (every field named with its value on error) and plans the tensors.
  // `vocab` is borrowed: it must outlive the model and any writer AddTo fills.
  static Result<SyntheticModel> Create(const SyntheticOptions& options, const GgufFile& vocab);

  const std::vector<TensorPlan>& plan() const { return plan_; }
  int n_vocab() const { return n_vocab_; }
  uint64_t ParameterCount() const;
  uint64_t TensorBytes() const;
  // One line per matrix that fell back to F16.
  const std::vector<std::string>& notes() const { return notes_; }

  // Adds the metadata and the streamed tensors to `writer` (alignment 32).
  void AddTo(GgufWriter& writer) const;
  Status WriteFile(const std::string& path) const;

 private:
  class Planner;
  SyntheticModel(const SyntheticOptions& options, const GgufFile& vocab,
                 const SyntheticRecipe& recipe)
      : options_(options), vocab_(&vocab), recipe_(&recipe) {}
  // Generates tensor `index` of the plan into `sink`, kChunkBytes at a time.
  Status Produce(size_t index, const ByteSink& sink) const;

  SyntheticOptions options_;
  const GgufFile* vocab_;
  const SyntheticRecipe* recipe_;  // the architecture's, static
  int n_vocab_ = 0;
  std::vector<TensorPlan> plan_;
  std::vector<std::string> notes_;
};

}  // namespace kvserve
