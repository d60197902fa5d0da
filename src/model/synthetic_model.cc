#include "model/synthetic_model.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "kernels/quantize.h"
#include "model/gguf_converter.h"
#include "util/thread_pool.h"

namespace kvserve {

namespace {

struct Preset {
  const char* name;
  SyntheticShape shape;
};

// Shapes of /work/shared/anchors.md (gpt2-124m, tinyllama-1.1b) and of the llama2.c stories models.
const Preset kPresets[] = {
    {"gpt2-124m",
     {.arch = "gpt2",
      .n_embd = 768,
      .n_layers = 12,
      .n_heads = 12,
      .n_kv_heads = 12,
      .n_ff = 3072,
      .n_ctx = 1024,
      .norm_eps = 1e-5f,
      .tied_output = true}},
    {"tinyllama-1.1b",
     {.arch = "llama",
      .n_embd = 2048,
      .n_layers = 22,
      .n_heads = 32,
      .n_kv_heads = 4,
      .n_ff = 5632,
      .n_ctx = 2048,
      .norm_eps = 1e-5f,
      .rope_freq_base = 10000.0f}},
    {"stories-15m",
     {.arch = "llama",
      .n_embd = 288,
      .n_layers = 6,
      .n_heads = 6,
      .n_kv_heads = 6,
      .n_ff = 768,
      .n_ctx = 256,
      .norm_eps = 1e-5f,
      .rope_freq_base = 10000.0f}},
    {"stories-260k",
     {.arch = "llama",
      .n_embd = 64,
      .n_layers = 5,
      .n_heads = 8,
      .n_kv_heads = 4,
      .n_ff = 172,
      .n_ctx = 512,
      .norm_eps = 1e-5f,
      .rope_freq_base = 10000.0f}},
};

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

Status CheckShape(const SyntheticShape& s) {
  KVSERVE_RETURN_IF_ERROR(CheckRange("--embd", s.n_embd, 1, 1 << 16));
  KVSERVE_RETURN_IF_ERROR(CheckRange("--layers", s.n_layers, 1, 1024));
  KVSERVE_RETURN_IF_ERROR(CheckRange("--heads", s.n_heads, 1, 1024));
  KVSERVE_RETURN_IF_ERROR(CheckRange("--kv-heads", s.n_kv_heads, 1, 1024));
  KVSERVE_RETURN_IF_ERROR(CheckRange("--ff", s.n_ff, 1, 1 << 18));
  KVSERVE_RETURN_IF_ERROR(CheckRange("--ctx", s.n_ctx, 1, 1 << 20));
  if (s.n_embd % s.n_heads != 0) {
    return Status::InvalidArgument("--embd " + std::to_string(s.n_embd) +
                                   " is not a multiple of --heads " + std::to_string(s.n_heads));
  }
  if (s.n_heads % s.n_kv_heads != 0) {
    return Status::InvalidArgument("--heads " + std::to_string(s.n_heads) +
                                   " is not a multiple of --kv-heads " +
                                   std::to_string(s.n_kv_heads));
  }
  if (s.arch == "gpt2" && s.n_kv_heads != s.n_heads) {
    return Status::InvalidArgument("--kv-heads " + std::to_string(s.n_kv_heads) +
                                   " must equal --heads " + std::to_string(s.n_heads) +
                                   " for gpt2");
  }
  if (s.arch == "qwen3moe") {
    KVSERVE_RETURN_IF_ERROR(CheckRange("--experts", s.n_expert, 1, 1024));
    KVSERVE_RETURN_IF_ERROR(CheckRange("--experts-used", s.n_expert_used, 1, s.n_expert));
  }
  if (s.arch != "gpt2" && (s.n_embd / s.n_heads) % 2 != 0) {
    return Status::InvalidArgument("head size " + std::to_string(s.n_embd / s.n_heads) +
                                   " (--embd / --heads) must be even for llama's rotary embedding");
  }
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

}  // namespace

Result<SyntheticShape> SyntheticPreset(const std::string& name) {
  for (const Preset& preset : kPresets) {
    if (name == preset.name) return preset.shape;
  }
  return Status::InvalidArgument("unknown preset '" + name + "' (known: " + SyntheticPresetNames() +
                                 ")");
}

std::string SyntheticPresetNames() {
  std::string names;
  for (const Preset& preset : kPresets)
    names += (names.empty() ? "" : ", ") + std::string(preset.name);
  return names;
}

const char* DefaultVocabFile(const std::string& arch) {
  return arch == "gpt2" ? "ggml-vocab-gpt-2.gguf" : "ggml-vocab-llama-spm.gguf";
}

Result<SyntheticModel> SyntheticModel::Create(const SyntheticOptions& options,
                                              const GgufFile& vocab) {
  KVSERVE_RETURN_IF_ERROR(CheckShape(options.shape));
  KVSERVE_RETURN_IF_ERROR(LlamaFileType(options.type));
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
  SyntheticModel model(options, vocab);
  model.n_vocab_ = static_cast<int>(tokens->array_size);
  if (model.options_.shape.arch == "gpt2") {
    model.options_.shape.tied_output = true;
    model.options_.shape.n_kv_heads = model.options_.shape.n_heads;
  }
  model.PlanTensors();
  return model;
}

void SyntheticModel::AddMatrix(const std::string& name, int64_t n_in, int64_t n_out) {
  GgmlType type = options_.type;
  const uint32_t block = TraitsOf(type).block_elements;
  if (block > 1 && n_in % block != 0) {
    type = GgmlType::kF16;
    notes_.push_back("tensor '" + name + "': row length " + std::to_string(n_in) +
                     " is not a multiple of the " + GgmlTypeName(options_.type) + " block size " +
                     std::to_string(block) + "; stored as F16");
  }
  plan_.push_back({name, type, {n_in, n_out}, TensorPlan::Fill::kRandom});
}

void SyntheticModel::AddExperts(const std::string& name, int64_t n_in, int64_t n_out,
                                int64_t n_expert) {
  AddMatrix(name, n_in, n_out);
  plan_.back().dims.push_back(n_expert);
}

void SyntheticModel::AddVector(const std::string& name, int64_t n, TensorPlan::Fill fill) {
  plan_.push_back({name, GgmlType::kF32, {n}, fill});
}

void SyntheticModel::PlanTensors() {
  const SyntheticShape& s = options_.shape;
  const int64_t embd = s.n_embd;
  const int64_t head_dim = s.n_embd / s.n_heads;
  const int64_t kv_dim = head_dim * s.n_kv_heads;
  using Fill = TensorPlan::Fill;
  AddMatrix("token_embd.weight", embd, n_vocab_);
  if (s.arch == "gpt2") {
    AddMatrix("position_embd.weight", embd, s.n_ctx);
    AddVector("output_norm.weight", embd, Fill::kOnes);
    AddVector("output_norm.bias", embd, Fill::kZeros);
  } else {
    AddVector("output_norm.weight", embd, Fill::kOnes);
    if (!s.tied_output) AddMatrix("output.weight", embd, n_vocab_);
  }
  for (int i = 0; i < s.n_layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    AddVector(p + "attn_norm.weight", embd, Fill::kOnes);
    if (s.arch == "gpt2") {
      AddVector(p + "attn_norm.bias", embd, Fill::kZeros);
      AddMatrix(p + "attn_qkv.weight", embd, 3 * embd);
      AddVector(p + "attn_qkv.bias", 3 * embd, Fill::kZeros);
      AddMatrix(p + "attn_output.weight", embd, embd);
      AddVector(p + "attn_output.bias", embd, Fill::kZeros);
      AddVector(p + "ffn_norm.weight", embd, Fill::kOnes);
      AddVector(p + "ffn_norm.bias", embd, Fill::kZeros);
      AddMatrix(p + "ffn_up.weight", embd, s.n_ff);
      AddVector(p + "ffn_up.bias", s.n_ff, Fill::kZeros);
      AddMatrix(p + "ffn_down.weight", s.n_ff, embd);
      AddVector(p + "ffn_down.bias", embd, Fill::kZeros);
    } else if (s.arch == "qwen3moe") {
      AddMatrix(p + "attn_q.weight", embd, embd);
      AddMatrix(p + "attn_k.weight", embd, kv_dim);
      AddMatrix(p + "attn_v.weight", embd, kv_dim);
      AddVector(p + "attn_q_norm.weight", head_dim, Fill::kOnes);
      AddVector(p + "attn_k_norm.weight", head_dim, Fill::kOnes);
      AddMatrix(p + "attn_output.weight", embd, embd);
      AddVector(p + "ffn_norm.weight", embd, Fill::kOnes);
      plan_.push_back(
          {p + "ffn_gate_inp.weight", GgmlType::kF32, {embd, s.n_expert}, Fill::kRandom});
      AddExperts(p + "ffn_gate_exps.weight", embd, s.n_ff, s.n_expert);
      AddExperts(p + "ffn_up_exps.weight", embd, s.n_ff, s.n_expert);
      AddExperts(p + "ffn_down_exps.weight", s.n_ff, embd, s.n_expert);
    } else {
      AddMatrix(p + "attn_q.weight", embd, embd);
      AddMatrix(p + "attn_k.weight", embd, kv_dim);
      AddMatrix(p + "attn_v.weight", embd, kv_dim);
      AddMatrix(p + "attn_output.weight", embd, embd);
      AddVector(p + "ffn_norm.weight", embd, Fill::kOnes);
      AddMatrix(p + "ffn_gate.weight", embd, s.n_ff);
      AddMatrix(p + "ffn_up.weight", embd, s.n_ff);
      AddMatrix(p + "ffn_down.weight", s.n_ff, embd);
    }
  }
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
  const std::string arch = s.arch;
  const std::string p = arch + ".";
  writer.SetString("general.architecture", arch);
  writer.SetString("general.name", options_.name.empty() ? "synthetic " + arch : options_.name);
  writer.SetUint32("general.alignment", 32);
  writer.SetUint32("general.file_type", LlamaFileType(options_.type).value());
  if (TraitsOf(options_.type).block_elements > 1) {
    writer.SetUint32("general.quantization_version", kQuantizationVersion);
  }
  writer.SetUint32(p + "context_length", s.n_ctx);
  writer.SetUint32(p + "embedding_length", s.n_embd);
  writer.SetUint32(p + "feed_forward_length", s.n_ff);
  writer.SetUint32(p + "block_count", s.n_layers);
  writer.SetUint32(p + "attention.head_count", s.n_heads);
  if (s.arch == "gpt2") {
    writer.SetFloat32(p + "attention.layer_norm_epsilon", s.norm_eps);
  } else {
    writer.SetUint32(p + "attention.head_count_kv", s.n_kv_heads);
    writer.SetFloat32(p + "attention.layer_norm_rms_epsilon", s.norm_eps);
    writer.SetUint32(p + "rope.dimension_count", s.n_embd / s.n_heads);
    writer.SetFloat32(p + "rope.freq_base", s.rope_freq_base);
    writer.SetUint32(p + "vocab_size", n_vocab_);
  }
  if (s.arch == "qwen3moe") {
    writer.SetUint32(p + "expert_count", s.n_expert);
    writer.SetUint32(p + "expert_used_count", s.n_expert_used);
    writer.SetUint32(p + "expert_feed_forward_length", s.n_ff);
  }
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
  if (t.fill != TensorPlan::Fill::kRandom) {
    const std::vector<float> row(n_in, t.fill == TensorPlan::Fill::kOnes ? 1.0f : 0.0f);
    return sink(reinterpret_cast<const uint8_t*>(row.data()), row_bytes);
  }
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
        FillNormalRow(RowSeed(options_.seed, index, first + r), options_.stddev, row, n_in);
        QuantizeRow(t.type, row, n_in, out.data() + r * row_bytes);
      }
    });
    KVSERVE_RETURN_IF_ERROR(sink(out.data(), rows * row_bytes));
  }
  return Status::Ok();
}

}  // namespace kvserve
