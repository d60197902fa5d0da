#include "model/hf_folder.h"

#include <sys/stat.h>

#include <cstring>
#include <map>

#include "io/gguf_writer.h"
#include "io/hf_config.h"
#include "io/hf_tokenizer.h"
#include "io/safetensors.h"

namespace kvserve {

namespace {

enum class Transform { kNone, kTranspose, kPermuteHeads };

struct Mapping {
  std::string name;  // GGUF name; empty: the tensor is skipped
  Transform transform = Transform::kNone;
  int n_heads = 0;  // kPermuteHeads
};

// Splits "<prefix>N.<rest>" into N and rest; false when `name` does not have that form.
bool SplitLayer(std::string_view name, std::string_view prefix, int* layer, std::string* rest) {
  if (name.substr(0, prefix.size()) != prefix) return false;
  size_t i = prefix.size();
  int value = 0;
  const size_t digits_begin = i;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9' && i - digits_begin < 6) {
    value = value * 10 + (name[i++] - '0');
  }
  if (i == digits_begin || i >= name.size() || name[i] != '.') return false;
  *layer = value;
  *rest = std::string(name.substr(i + 1));
  return true;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The GGUF name and transform of a GPT2LMHeadModel tensor, or an error naming it.
Result<Mapping> MapGpt2(std::string_view hf_name, const HfConfig& c) {
  std::string_view name = hf_name;
  if (name.substr(0, 12) == "transformer.") name.remove_prefix(12);
  static const std::map<std::string_view, std::string_view> kGlobal = {
      {"wte.weight", "token_embd.weight"},   {"wpe.weight", "position_embd.weight"},
      {"ln_f.weight", "output_norm.weight"}, {"ln_f.bias", "output_norm.bias"},
      {"lm_head.weight", "output.weight"},
  };
  if (auto it = kGlobal.find(name); it != kGlobal.end()) {
    if (name == "lm_head.weight" && c.tie_word_embeddings) return Mapping{};
    return Mapping{.name = std::string(it->second)};
  }
  static const std::map<std::string_view, std::pair<std::string_view, Transform>> kLayer = {
      {"ln_1.weight", {"attn_norm.weight", Transform::kNone}},
      {"ln_1.bias", {"attn_norm.bias", Transform::kNone}},
      {"attn.c_attn.weight", {"attn_qkv.weight", Transform::kTranspose}},
      {"attn.c_attn.bias", {"attn_qkv.bias", Transform::kNone}},
      {"attn.c_proj.weight", {"attn_output.weight", Transform::kTranspose}},
      {"attn.c_proj.bias", {"attn_output.bias", Transform::kNone}},
      {"ln_2.weight", {"ffn_norm.weight", Transform::kNone}},
      {"ln_2.bias", {"ffn_norm.bias", Transform::kNone}},
      {"mlp.c_fc.weight", {"ffn_up.weight", Transform::kTranspose}},
      {"mlp.c_fc.bias", {"ffn_up.bias", Transform::kNone}},
      {"mlp.c_proj.weight", {"ffn_down.weight", Transform::kTranspose}},
      {"mlp.c_proj.bias", {"ffn_down.bias", Transform::kNone}},
  };
  int layer = 0;
  std::string rest;
  if (SplitLayer(name, "h.", &layer, &rest) && layer < c.n_layers) {
    if (rest == "attn.bias" || rest == "attn.masked_bias") return Mapping{};  // causal-mask buffers
    if (auto it = kLayer.find(rest); it != kLayer.end()) {
      return Mapping{.name = "blk." + std::to_string(layer) + "." + std::string(it->second.first),
                     .transform = it->second.second};
    }
  }
  return Status::InvalidArgument("tensor '" + std::string(hf_name) + "' is not part of a " +
                                 std::to_string(c.n_layers) + "-layer GPT2LMHeadModel");
}

Result<Mapping> MapLlama(std::string_view name, const HfConfig& c) {
  if (name == "model.embed_tokens.weight") return Mapping{.name = "token_embd.weight"};
  if (name == "model.norm.weight") return Mapping{.name = "output_norm.weight"};
  if (name == "lm_head.weight") {
    return c.tie_word_embeddings ? Mapping{} : Mapping{.name = "output.weight"};
  }
  static const std::map<std::string_view, std::string_view> kLayer = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
  };
  int layer = 0;
  std::string rest;
  if (SplitLayer(name, "model.layers.", &layer, &rest) && layer < c.n_layers) {
    if (EndsWith(rest, "rotary_emb.inv_freq")) return Mapping{};  // recomputed from rope_theta
    if (auto it = kLayer.find(rest); it != kLayer.end()) {
      Mapping m{.name = "blk." + std::to_string(layer) + "." + std::string(it->second)};
      if (rest == "self_attn.q_proj.weight" || rest == "self_attn.k_proj.weight") {
        m.transform = Transform::kPermuteHeads;
        m.n_heads = rest[10] == 'q' ? c.n_heads : c.n_kv_heads;
      }
      return m;
    }
  }
  return Status::InvalidArgument("tensor '" + std::string(name) + "' is not part of a " +
                                 std::to_string(c.n_layers) + "-layer LlamaForCausalLM");
}

uint64_t ElementBytes(GgmlType type) { return type == GgmlType::kF32 ? 4 : 2; }

// Owned tensor bytes plus the shard mappings the zero-copy tensors point into.
struct Storage {
  std::shared_ptr<const void> shards;
  std::vector<std::vector<uint8_t>> buffers;
};

// Fills `out` (rows x cols elements of `size` bytes, row-major) with the transpose of `in`
// (cols x rows).
void Transpose(const uint8_t* in, int64_t rows, int64_t cols, uint64_t size, uint8_t* out) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      std::memcpy(out + (r * cols + c) * size, in + (c * rows + r) * size, size);
    }
  }
}

// Rotate-half rows to interleaved pairs, per head: out row h*d + 2i + j = in row h*d + j*d/2 + i.
void PermuteHeads(const uint8_t* in, int64_t rows, uint64_t row_bytes, int n_heads, uint8_t* out) {
  const int64_t d = rows / n_heads, half = d / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    for (int64_t i = 0; i < half; ++i) {
      for (int64_t j = 0; j < 2; ++j) {
        std::memcpy(out + (h * d + 2 * i + j) * row_bytes, in + (h * d + j * half + i) * row_bytes,
                    row_bytes);
      }
    }
  }
}

Result<TensorInfo> MakeTensor(const SafetensorsTensor& t, const Mapping& m, Storage& storage,
                              const std::string& source) {
  const std::string what = source + ": tensor '" + t.name + "' (" + m.name + ")";
  if (t.shape.empty() || t.shape.size() > 4 || t.n_elements == 0) {
    return Status::InvalidArgument(what + " has unusable shape of " +
                                   std::to_string(t.shape.size()) + " dimensions and " +
                                   std::to_string(t.n_elements) + " elements");
  }
  TensorInfo info{.name = m.name, .type = t.type, .data = t.data};
  info.dims.assign(t.shape.rbegin(), t.shape.rend());  // row-major [.., a, b] is GGML [b, a, ..]
  const uint64_t size = ElementBytes(t.type);
  const bool misaligned = reinterpret_cast<uintptr_t>(t.data) % size != 0;
  if (m.transform == Transform::kNone && !misaligned) return info;
  std::vector<uint8_t> buffer(t.n_bytes);
  if (m.transform == Transform::kNone) {
    std::memcpy(buffer.data(), t.data, t.n_bytes);
  } else if (t.shape.size() != 2) {
    return Status::InvalidArgument(what + " must be a matrix, has " +
                                   std::to_string(t.shape.size()) + " dimensions");
  } else if (m.transform == Transform::kTranspose) {
    // Conv1D [in, out] -> GGML [in, out] (n_out rows of n_in): the stored shape, not reversed.
    Transpose(t.data, t.shape[1], t.shape[0], size, buffer.data());
    info.dims = {t.shape[0], t.shape[1]};
  } else {
    if (t.shape[0] % (2 * static_cast<int64_t>(m.n_heads)) != 0) {
      return Status::InvalidArgument(what + " has " + std::to_string(t.shape[0]) +
                                     " rows, not a multiple " + "of 2 x " +
                                     std::to_string(m.n_heads) + " heads");
    }
    PermuteHeads(t.data, t.shape[0], t.shape[1] * size, m.n_heads, buffer.data());
  }
  info.data = buffer.data();
  storage.buffers.push_back(std::move(buffer));  // the heap block (and info.data) stays put
  return info;
}

void AddHyperParameters(const HfConfig& c, const std::string& folder, GgufWriter& w) {
  const bool gpt2 = c.arch == HfArchitecture::kGpt2;
  const std::string arch = gpt2 ? "gpt2" : "llama";
  w.SetString("general.architecture", arch);
  const size_t slash = folder.find_last_not_of('/');
  const std::string trimmed = folder.substr(0, slash == std::string::npos ? 0 : slash + 1);
  w.SetString("general.name", trimmed.substr(trimmed.find_last_of('/') + 1));
  w.SetUint32(arch + ".context_length", static_cast<uint32_t>(c.n_ctx));
  w.SetUint32(arch + ".embedding_length", static_cast<uint32_t>(c.n_embd));
  w.SetUint32(arch + ".block_count", static_cast<uint32_t>(c.n_layers));
  w.SetUint32(arch + ".feed_forward_length", static_cast<uint32_t>(c.n_ff));
  w.SetUint32(arch + ".attention.head_count", static_cast<uint32_t>(c.n_heads));
  if (gpt2) {
    w.SetFloat32(arch + ".attention.layer_norm_epsilon", static_cast<float>(c.norm_eps));
    return;
  }
  w.SetUint32(arch + ".attention.head_count_kv", static_cast<uint32_t>(c.n_kv_heads));
  w.SetFloat32(arch + ".attention.layer_norm_rms_epsilon", static_cast<float>(c.norm_eps));
  w.SetFloat32(arch + ".rope.freq_base", static_cast<float>(c.rope_theta));
  w.SetUint32(arch + ".rope.dimension_count", static_cast<uint32_t>(c.n_embd / c.n_heads));
  w.SetUint32(arch + ".vocab_size", static_cast<uint32_t>(c.n_vocab));
}

}  // namespace

bool HfFolder::IsFolder(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

Result<GgufFile> HfFolder::Open(const std::string& folder) {
  auto config = HfConfig::Load(folder + "/config.json");
  if (!config.ok()) return config.status();
  auto tokenizer = HfTokenizer::LoadFolder(folder, {.n_vocab = config->n_vocab,
                                                    .bos_token_id = config->bos_token_id,
                                                    .eos_token_id = config->eos_token_id});
  if (!tokenizer.ok()) return tokenizer.status();
  auto shards = SafetensorsSet::OpenFolder(folder);
  if (!shards.ok()) return shards.status();

  GgufWriter writer;
  AddHyperParameters(*config, folder, writer);
  tokenizer->AddTo(writer);

  auto storage = std::make_shared<Storage>();
  storage->shards = shards->keep_alive();
  std::vector<TensorInfo> tensors;
  for (const SafetensorsTensor* t : shards->tensors()) {
    auto mapping = config->arch == HfArchitecture::kGpt2 ? MapGpt2(t->name, *config)
                                                         : MapLlama(t->name, *config);
    if (!mapping.ok()) return Status::InvalidArgument(folder + ": " + mapping.message());
    if (mapping->name.empty()) continue;
    auto tensor = MakeTensor(*t, *mapping, *storage, folder);
    if (!tensor.ok()) return tensor.status();
    tensors.push_back(std::move(tensor).value());
  }
  return GgufFile::FromParts(writer.Serialize(), std::move(tensors), std::move(storage), folder);
}

}  // namespace kvserve
