#include "model/synthetic_model.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "kernels/quantize.h"
#include "model/architecture.h"
#include "model/gguf_converter.h"
#include "util/thread_pool.h"

namespace kvserve {

namespace {

constexpr uint32_t kQuantizationVersion = 2;  // GGML_QNT_VERSION

uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The seed of row `row` of tensor `tensor`: a function of the three numbers only.
uint64_t RowSeed(uint64_t seed, uint64_t tensor, uint64_t row) {
  return Mix64(Mix64(seed + 0x9E3779B97F4A7C15ull) ^ (tensor << 40) ^ row);
}

// n normals ~ N(0, stddev²) by Box-Muller, two per 64-bit SplitMix64 draw (24-bit uniforms).
void FillNormalRow(uint64_t state, float stddev, float* out, int64_t n) {
  constexpr float kInv24 = 1.0f / 16777216.0f;
  constexpr float kTwoPi = 2.0f * std::numbers::pi_v<float>;
  for (int64_t i = 0; i < n; i += 2) {
    state += 0x9E3779B97F4A7C15ull;
    const uint64_t bits = Mix64(state);
    const float u1 = static_cast<float>((bits >> 40) + 1) * kInv24;  // (0, 1]
    const float u2 = static_cast<float>(bits & 0xFFFFFF) * kInv24;   // [0, 1)
    const float r = stddev * std::sqrt(-2.0f * std::log(u1));
    out[i] = r * std::cos(kTwoPi * u2);
    if (i + 1 < n) out[i + 1] = r * std::sin(kTwoPi * u2);
  }
}

// Rows of dims[0] elements in a tensor: the product of its other dimensions.
int64_t Rows(const SyntheticModel::TensorPlan& t) {
  int64_t rows = 1;
  for (size_t i = 1; i < t.dims.size(); ++i) rows *= t.dims[i];
  return rows;
}

Status CheckRange(const char* field, int64_t value, int64_t min, int64_t max) {
  if (value < min || value > max) {
    return Status::InvalidArgument(std::string(field) + " " + std::to_string(value) +
                                   " is out of range (" + std::to_string(min) + " to " +
                                   std::to_string(max) + ")");
  }
  return Status::Ok();
}

// qwen35's delta-net fields and its M-RoPE sections (SyntheticRecipe::delta_net).
Status CheckDeltaNet(const SyntheticShape& s) {
  KVSERVE_RETURN_IF_ERROR(
      CheckRange("full attention interval", s.full_attention_interval, 1, s.n_layers));
  KVSERVE_RETURN_IF_ERROR(CheckRange("ssm state size", s.ssm_state_size, 1, 1024));
  KVSERVE_RETURN_IF_ERROR(CheckRange("ssm group count", s.ssm_group_count, 1, 1024));
  KVSERVE_RETURN_IF_ERROR(CheckRange("ssm time step rank", s.ssm_time_step_rank, 1, 1024));
  KVSERVE_RETURN_IF_ERROR(CheckRange("ssm conv kernel", s.ssm_conv_kernel, 1, 64));
  if (s.ssm_time_step_rank % s.ssm_group_count != 0) {
    return Status::InvalidArgument("ssm time step rank (value heads) " +
                                   std::to_string(s.ssm_time_step_rank) +
                                   " is not a multiple of the ssm group count (key heads) " +
                                   std::to_string(s.ssm_group_count));
  }
  int sections = 0;
  for (int section : s.rope_sections) {
    KVSERVE_RETURN_IF_ERROR(CheckRange("rope section", section, 0, 1024));
    sections += section;
  }
  if (sections != s.RopeDims() / 2) {
    return Status::InvalidArgument("rope sections sum to " + std::to_string(sections) +
                                   ", not half the rope dims " + std::to_string(s.RopeDims()));
  }
  return Status::Ok();
}

Status CheckShape(const SyntheticShape& s, const SyntheticRecipe& recipe) {
  KVSERVE_RETURN_IF_ERROR(CheckRange("--embd", s.n_embd, 1, 1 << 16));
  KVSERVE_RETURN_IF_ERROR(CheckRange("--layers", s.n_layers, 1, 1024));
  KVSERVE_RETURN_IF_ERROR(CheckRange("--heads", s.n_heads, 1, 1024));
  KVSERVE_RETURN_IF_ERROR(CheckRange("--kv-heads", s.n_kv_heads, 1, 1024));
  KVSERVE_RETURN_IF_ERROR(CheckRange("--ff", s.n_ff, 1, 1 << 18));
  KVSERVE_RETURN_IF_ERROR(CheckRange("--ctx", s.n_ctx, 1, 1 << 20));
  KVSERVE_RETURN_IF_ERROR(CheckRange("--window", s.window, 0, 1 << 20));
  KVSERVE_RETURN_IF_ERROR(CheckRange("swa period", s.swa_period, 0, 1024));
  KVSERVE_RETURN_IF_ERROR(CheckRange("per-layer input", s.per_layer_input, 0, 1 << 16));
  KVSERVE_RETURN_IF_ERROR(CheckRange("shared KV layers", s.shared_kv_layers, 0, s.n_layers - 1));
  KVSERVE_RETURN_IF_ERROR(
      CheckRange("--target-embd", s.n_embd_target, recipe.drafter ? 1 : 0, 1 << 16));
  // llama.cpp's qwen35 and qwen35moe graphs run one MTP layer; no other recipe has any.
  KVSERVE_RETURN_IF_ERROR(CheckRange("nextn layers", s.nextn_layers, 0, recipe.delta_net ? 1 : 0));
  KVSERVE_RETURN_IF_ERROR(
      CheckRange("decoder layers", s.n_decoder_layers, 0, recipe.encoder_decoder ? 1024 : 0));
  KVSERVE_RETURN_IF_ERROR(
      CheckRange("relative buckets", s.rel_buckets, recipe.encoder_decoder ? 1 : 0, 1024));
  if (s.head_dim != 0) {
    KVSERVE_RETURN_IF_ERROR(CheckRange("--head-dim", s.head_dim, 1, 1024));
  } else if (s.n_embd % s.n_heads != 0) {
    return Status::InvalidArgument("--embd " + std::to_string(s.n_embd) +
                                   " is not a multiple of --heads " + std::to_string(s.n_heads));
  }
  if (s.n_heads % s.n_kv_heads != 0) {
    return Status::InvalidArgument("--heads " + std::to_string(s.n_heads) +
                                   " is not a multiple of --kv-heads " +
                                   std::to_string(s.n_kv_heads));
  }
  if (!recipe.grouped_kv && s.n_kv_heads != s.n_heads) {
    return Status::InvalidArgument("--kv-heads " + std::to_string(s.n_kv_heads) +
                                   " must equal --heads " + std::to_string(s.n_heads) + " for " +
                                   s.arch);
  }
  if (recipe.experts) {
    KVSERVE_RETURN_IF_ERROR(CheckRange("--experts", s.n_expert, 1, 1024));
    KVSERVE_RETURN_IF_ERROR(CheckRange("--experts-used", s.n_expert_used, 1, s.n_expert));
  }
  if (recipe.rotary && s.HeadDim() % 2 != 0) {
    return Status::InvalidArgument("head size " + std::to_string(s.HeadDim()) +
                                   " (--embd / --heads) must be even for " + s.arch +
                                   "'s rotary embedding");
  }
  KVSERVE_RETURN_IF_ERROR(CheckRange("rope dims", s.rope_dims, 0, s.HeadDim()));
  if (s.rope_dims % 2 != 0) {
    return Status::InvalidArgument("rope dims " + std::to_string(s.rope_dims) + " must be even");
  }
  if (recipe.delta_net) KVSERVE_RETURN_IF_ERROR(CheckDeltaNet(s));
  if (!(s.norm_eps > 0.0f && s.norm_eps <= 1.0f)) {
    return Status::InvalidArgument("norm epsilon " + std::to_string(s.norm_eps) +
                                   " is out of range");
  }
  if (!(s.rope_freq_base > 0.0f) || !std::isfinite(s.rope_freq_base)) {
    return Status::InvalidArgument("rope base " + std::to_string(s.rope_freq_base) +
                                   " is out of range");
  }
  return Status::Ok();
}

Result<const SyntheticRecipe*> FindRecipe(const std::string& arch) {
  const Architecture* entry = FindArchitecture(arch);
  if (entry == nullptr || entry->synthetic == nullptr) {
    return Status::InvalidArgument("architecture '" + arch + "' has no synthetic recipe (known: " +
                                   SyntheticArchitectureNames() + ")");
  }
  return entry->synthetic;
}

}  // namespace

Result<SyntheticShape> SyntheticPreset(const std::string& name) {
  for (const Architecture* entry : Architectures()) {
    if (entry->synthetic == nullptr) continue;
    for (const NamedShape& preset : entry->synthetic->presets) {
      if (name == preset.name) return preset.shape;
    }
  }
  return Status::InvalidArgument("unknown preset '" + name + "' (known: " + SyntheticPresetNames() +
                                 ")");
}

std::string SyntheticPresetNames() {
  std::string names;
  for (const Architecture* entry : Architectures()) {
    if (entry->synthetic == nullptr) continue;
    for (const NamedShape& preset : entry->synthetic->presets) {
      names += (names.empty() ? "" : ", ") + std::string(preset.name);
    }
  }
  return names;
}

std::string SyntheticArchitectureNames() {
  std::string names;
  for (const Architecture* entry : Architectures()) {
    if (entry->synthetic != nullptr) {
      names += (names.empty() ? "" : ", ") + std::string(entry->gguf_name);
    }
  }
  return names;
}

const char* DefaultVocabFile(const std::string& arch) {
  const Architecture* entry = FindArchitecture(arch);
  return entry != nullptr && entry->synthetic != nullptr ? entry->synthetic->vocab_file
                                                         : "ggml-vocab-llama-spm.gguf";
}

void AddSyntheticDecoderGlobals(const SyntheticShape& s, int64_t n_vocab, SyntheticTensors& out) {
  out.Matrix("token_embd.weight", s.n_embd, n_vocab);
  out.Vector("output_norm.weight", s.n_embd, SyntheticFill::kOnes);
  if (!s.tied_output) out.Matrix("output.weight", s.n_embd, n_vocab);
}

void AddSyntheticAttention(const SyntheticShape& s, int layer, bool qk_norm,
                           SyntheticTensors& out) {
  const int64_t head_dim = s.n_embd / s.n_heads;
  const int64_t kv_dim = head_dim * s.n_kv_heads;
  const std::string p = "blk." + std::to_string(layer) + ".";
  out.Vector(p + "attn_norm.weight", s.n_embd, SyntheticFill::kOnes);
  out.Matrix(p + "attn_q.weight", s.n_embd, s.n_embd);
  out.Matrix(p + "attn_k.weight", s.n_embd, kv_dim);
  out.Matrix(p + "attn_v.weight", s.n_embd, kv_dim);
  if (qk_norm) {
    out.Vector(p + "attn_q_norm.weight", head_dim, SyntheticFill::kOnes);
    out.Vector(p + "attn_k_norm.weight", head_dim, SyntheticFill::kOnes);
  }
  out.Matrix(p + "attn_output.weight", s.n_embd, s.n_embd);
  out.Vector(p + "ffn_norm.weight", s.n_embd, SyntheticFill::kOnes);
}

void AddSyntheticDecoderMetadata(const SyntheticShape& s, int64_t n_vocab, GgufWriter& w) {
  const std::string p = s.arch + ".";
  w.SetUint32(p + "context_length", s.n_ctx);
  w.SetUint32(p + "embedding_length", s.n_embd);
  w.SetUint32(p + "feed_forward_length", s.n_ff);
  w.SetUint32(p + "block_count", s.n_layers);
  w.SetUint32(p + "attention.head_count", s.n_heads);
  w.SetUint32(p + "attention.head_count_kv", s.n_kv_heads);
  w.SetFloat32(p + "attention.layer_norm_rms_epsilon", s.norm_eps);
  w.SetUint32(p + "rope.dimension_count", s.RopeDims());
  if (s.head_dim != 0) {
    w.SetUint32(p + "attention.key_length", s.head_dim);
    w.SetUint32(p + "attention.value_length", s.head_dim);
  }
  w.SetFloat32(p + "rope.freq_base", s.rope_freq_base);
  w.SetUint32(p + "vocab_size", static_cast<uint32_t>(n_vocab));
}

// The recipe's requests, planned in the file's type.
class SyntheticModel::Planner final : public SyntheticTensors {
 public:
  explicit Planner(SyntheticModel& model) : model_(model) {}
  void Matrix(const std::string& name, int64_t n_in, int64_t n_out) override {
    Matrix(name, n_in, n_out, model_.options_.type);
  }
  void F32Matrix(const std::string& name, int64_t n_in, int64_t n_out,
                 SyntheticFill fill) override {
    model_.plan_.push_back({name, GgmlType::kF32, {n_in, n_out}, fill});
  }
  void Vector(const std::string& name, int64_t n, SyntheticFill fill) override {
    model_.plan_.push_back({name, GgmlType::kF32, {n}, fill});
  }
  void Experts(const std::string& name, int64_t n_in, int64_t n_out, int64_t n_expert) override {
    Matrix(name, n_in, n_out, model_.options_.expert_type.value_or(model_.options_.type));
    model_.plan_.back().dims.push_back(n_expert);
  }

 private:
  void Matrix(const std::string& name, int64_t n_in, int64_t n_out, GgmlType wanted) {
    GgmlType type = wanted;
    const uint32_t block = TraitsOf(type).block_elements;
    if (block > 1 && n_in % block != 0) {
      type = GgmlType::kF16;
      model_.notes_.push_back("tensor '" + name + "': row length " + std::to_string(n_in) +
                              " is not a multiple of the " + GgmlTypeName(wanted) + " block size " +
                              std::to_string(block) + "; stored as F16");
    }
    model_.plan_.push_back({name, type, {n_in, n_out}, SyntheticFill::kRandom});
  }

  SyntheticModel& model_;
};

Result<SyntheticModel> SyntheticModel::Create(const SyntheticOptions& options,
                                              const GgufFile& vocab) {
  auto recipe = FindRecipe(options.shape.arch);
  if (!recipe.ok()) return recipe.status();
  KVSERVE_RETURN_IF_ERROR(CheckShape(options.shape, **recipe));
  SyntheticShape shape = options.shape;
  if ((*recipe)->always_tied) shape.tied_output = true;
  KVSERVE_RETURN_IF_ERROR(LlamaFileType(options.type));
  if (options.expert_type) KVSERVE_RETURN_IF_ERROR(LlamaFileType(*options.expert_type));
  if (!(options.stddev > 0.0f) || !std::isfinite(options.stddev)) {
    return Status::InvalidArgument("stddev " + std::to_string(options.stddev) +
                                   " must be positive");
  }
  const GgufValue* tokens = vocab.Find("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->type != GgufValueType::kArray ||
      tokens->array_type != GgufValueType::kString) {
    return Status::InvalidArgument(
        vocab.path() + ": no string array 'tokenizer.ggml.tokens' (not a vocabulary file?)");
  }
  if (tokens->array_size == 0 || tokens->array_size > (1u << 24)) {
    return Status::InvalidArgument(vocab.path() + ": vocabulary size " +
                                   std::to_string(tokens->array_size) +
                                   " is out of range (1 to 16777216)");
  }
  SyntheticModel model(options, vocab, **recipe);
  model.options_.shape = shape;
  model.n_vocab_ = static_cast<int>(tokens->array_size);
  Planner planner(model);
  (*recipe)->tensors(shape, model.n_vocab_, planner);
  return model;
}

uint64_t SyntheticModel::ParameterCount() const {
  uint64_t n = 0;
  for (const TensorPlan& t : plan_) {
    uint64_t elements = 1;
    for (int64_t d : t.dims) elements *= static_cast<uint64_t>(d);
    n += elements;
  }
  return n;
}

uint64_t SyntheticModel::TensorBytes() const {
  uint64_t n = 0;
  for (const TensorPlan& t : plan_) {
    n += RowBytes(t.type, t.dims[0]) * static_cast<uint64_t>(Rows(t));
  }
  return n;
}

void SyntheticModel::AddTo(GgufWriter& writer) const {
  const SyntheticShape& s = options_.shape;
  writer.SetString("general.architecture", s.arch);
  writer.SetString("general.name", options_.name.empty() ? "synthetic " + s.arch : options_.name);
  writer.SetUint32("general.alignment", 32);
  writer.SetUint32("general.file_type", LlamaFileType(options_.type).value());
  if (TraitsOf(options_.type).block_elements > 1) {
    writer.SetUint32("general.quantization_version", kQuantizationVersion);
  }
  recipe_->metadata(s, n_vocab_, writer);
  for (const auto& [key, value] : vocab_->metadata()) {
    if (key.starts_with("tokenizer.")) writer.CopyValue(key, value);
  }
  for (size_t i = 0; i < plan_.size(); ++i) {
    writer.AddTensor(plan_[i].name, plan_[i].type, plan_[i].dims,
                     [this, i](const ByteSink& sink) { return Produce(i, sink); });
  }
}

Status SyntheticModel::WriteFile(const std::string& path) const {
  GgufWriter writer(32);
  AddTo(writer);
  return writer.WriteFile(path);
}

Status SyntheticModel::Produce(size_t index, const ByteSink& sink) const {
  const TensorPlan& t = plan_[index];
  const int64_t n_in = t.dims[0];
  const int64_t n_rows = Rows(t);
  const size_t row_bytes = RowBytes(t.type, n_in);
  if (t.fill == SyntheticFill::kOnes || t.fill == SyntheticFill::kZeros) {
    const std::vector<float> row(n_in, t.fill == SyntheticFill::kOnes ? 1.0f : 0.0f);
    return sink(reinterpret_cast<const uint8_t*>(row.data()), row_bytes);
  }
  const bool negative = t.fill == SyntheticFill::kNegative;
  const bool near_one = t.fill == SyntheticFill::kNearOne;
  const float stddev = near_one                         ? 5.0f * options_.stddev
                       : t.fill == SyntheticFill::kWide ? 50.0f * options_.stddev
                                                        : options_.stddev;
  ThreadPool pool(options_.n_threads);
  const int64_t rows_per_chunk = std::max<int64_t>(1, kChunkBytes / row_bytes);
  std::vector<uint8_t> out(rows_per_chunk * row_bytes);
  std::vector<std::vector<float>> scratch(pool.size(), std::vector<float>(n_in));
  for (int64_t first = 0; first < n_rows; first += rows_per_chunk) {
    const int64_t rows = std::min(rows_per_chunk, n_rows - first);
    pool.Run([&](int thread) {
      float* row = scratch[thread].data();
      const int64_t begin = rows * thread / pool.size();
      const int64_t end = rows * (thread + 1) / pool.size();
      for (int64_t r = begin; r < end; ++r) {
        FillNormalRow(RowSeed(options_.seed, index, first + r), stddev, row, n_in);
        if (negative) {
          for (int64_t i = 0; i < n_in; ++i) row[i] = -std::fabs(row[i]);
        }
        if (near_one) {
          for (int64_t i = 0; i < n_in; ++i) row[i] += 1.0f;
        }
        QuantizeRow(t.type, row, n_in, out.data() + r * row_bytes);
      }
    });
    KVSERVE_RETURN_IF_ERROR(sink(out.data(), rows * row_bytes));
  }
  return Status::Ok();
}

}  // namespace kvserve
