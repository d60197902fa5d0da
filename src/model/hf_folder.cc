#include "model/hf_folder.h"

#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>

#include "io/gguf_writer.h"
#include "io/hf_config.h"
#include "io/hf_tokenizer.h"
#include "io/safetensors.h"
#include "model/hf_families.h"
#include "util/half.h"

namespace kvserve {

namespace {

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

// `v` with the element-wise transform `op` applied: Gemma's 1 + w, or -exp(w) (ssm_a).
float ApplyElementwise(HfTransform op, float v) {
  if (op == HfTransform::kPlusOne) return v + 1.0f;
  if (op == HfTransform::kNegExp) return -std::exp(v);
  return v;
}

// The tensor's elements as f32, with the element-wise transform `op` (kNone, kPlusOne, kNegExp)
// applied in f16 for f16 data (as torch computes), else in f32 (the converter widens BF16 first).
std::vector<uint8_t> ToF32(const SafetensorsTensor& t, HfTransform op) {
  std::vector<uint8_t> out(t.n_elements * sizeof(float));
  auto* o = reinterpret_cast<float*>(out.data());
  for (uint64_t i = 0; i < t.n_elements; ++i) {
    float v;
    if (t.type == GgmlType::kF32) {
      std::memcpy(&v, t.data + i * 4, 4);
      v = ApplyElementwise(op, v);
    } else {
      uint16_t h;
      std::memcpy(&h, t.data + i * 2, 2);
      if (t.type == GgmlType::kF16) {
        v = Fp16ToFloat(h);
        if (op != HfTransform::kNone) v = Fp16ToFloat(FloatToFp16(ApplyElementwise(op, v)));
      } else {
        v = ApplyElementwise(op, Bf16ToFloat(h));
      }
    }
    o[i] = v;
  }
  return out;
}

// HfHeadTiling over `n_outer` slices of `axis` units of `unit` bytes (the units being rows, or
// the elements of one row): each slice's value heads from grouped to tiled order, in place.
Status TileHeads(const HfHeadTiling& h, int64_t n_outer, int64_t axis, uint64_t unit, uint8_t* data,
                 const std::string& what) {
  const int64_t n_heads = static_cast<int64_t>(h.n_groups) * h.per_group;
  if (h.per_group <= 0 || h.head_size <= 0 || h.first < 0 ||
      h.first + n_heads * h.head_size != axis) {
    return Status::InvalidArgument(what + " has " + std::to_string(axis) + " " +
                                   (h.columns ? "columns" : "rows") + ", not " +
                                   std::to_string(h.first) + " + " + std::to_string(n_heads) +
                                   " value heads of " + std::to_string(h.head_size));
  }
  const uint64_t head_bytes = static_cast<uint64_t>(h.head_size) * unit;
  std::vector<uint8_t> heads(static_cast<uint64_t>(n_heads) * head_bytes);
  for (int64_t o = 0; o < n_outer; ++o) {
    uint8_t* base = data + static_cast<uint64_t>(o * axis + h.first) * unit;
    for (int64_t g = 0; g < h.n_groups; ++g) {
      for (int64_t j = 0; j < h.per_group; ++j) {  // grouped g * per_group + j -> j * n_groups + g
        std::memcpy(heads.data() + (j * h.n_groups + g) * head_bytes,
                    base + (g * h.per_group + j) * head_bytes, head_bytes);
      }
    }
    std::memcpy(base, heads.data(), heads.size());
  }
  return Status::Ok();
}

// llama.cpp's converter stores vectors, norms, the MoE router and shared-expert gate, learned
// positions and the recurrent layers' conv1d in F32.
bool KeptInF32(const std::string& gguf_name, size_t n_dims) {
  const std::string_view n = gguf_name;
  return n_dims <= 1 || n.ends_with("_norm.weight") || n.ends_with("ffn_gate_inp.weight") ||
         n.ends_with("ffn_gate_inp_shexp.weight") || n.ends_with("_exps.bias") ||
         n == "position_embd.weight" || n.ends_with("ssm_conv1d.weight");
}

// Value heads of `info` (after its transform, in its final type) reordered as `h` says: rows of
// the row-major [rows, ...] tensor, or the columns of each row of a matrix.
Status TileTensor(const HfHeadTiling& h, TensorInfo& info, uint8_t* data, const std::string& what) {
  const uint64_t size = ElementBytes(info.type);
  const int64_t rows = info.dims.back();
  if (h.columns) {
    if (info.dims.size() != 2) return Status::InvalidArgument(what + " must be a matrix");
    return TileHeads(h, rows, info.dims[0], size, data, what);
  }
  int64_t row_elements = 1;
  for (size_t i = 0; i + 1 < info.dims.size(); ++i) row_elements *= info.dims[i];
  return TileHeads(h, 1, rows, static_cast<uint64_t>(row_elements) * size, data, what);
}

Result<TensorInfo> MakeTensor(const SafetensorsTensor& t, const HfMapping& m, Storage& storage,
                              const std::string& source) {
  const std::string what = source + ": tensor '" + t.name + "' (" + m.name + ")";
  if (t.shape.empty() || t.shape.size() > 4 || t.n_elements == 0) {
    return Status::InvalidArgument(what + " has unusable shape of " +
                                   std::to_string(t.shape.size()) + " dimensions and " +
                                   std::to_string(t.n_elements) + " elements");
  }
  TensorInfo info{.name = m.name, .type = t.type, .data = t.data};
  info.dims.assign(t.shape.rbegin(), t.shape.rend());  // row-major [.., a, b] is GGML [b, a, ..]
  if (m.transform == HfTransform::kSqueeze) {
    std::erase(info.dims, 1);
    if (info.dims.empty()) info.dims = {1};
  }
  const uint64_t size = ElementBytes(t.type);
  const bool misaligned = reinterpret_cast<uintptr_t>(t.data) % size != 0;
  const bool elementwise =
      m.transform == HfTransform::kPlusOne || m.transform == HfTransform::kNegExp;
  const bool as_stored = m.transform == HfTransform::kNone || m.transform == HfTransform::kSqueeze;
  const bool widen = KeptInF32(m.name, info.dims.size()) && t.type != GgmlType::kF32;
  const bool tiled = m.tiling.n_groups > 0;
  if (as_stored && !misaligned && !widen && !tiled) return info;
  std::vector<uint8_t> buffer;
  if (elementwise || widen) {
    buffer = ToF32(t, elementwise ? m.transform : HfTransform::kNone);
    info.type = GgmlType::kF32;
  } else if (as_stored) {
    buffer.assign(t.data, t.data + t.n_bytes);
  } else if (t.shape.size() != 2) {
    return Status::InvalidArgument(what + " must be a matrix, has " +
                                   std::to_string(t.shape.size()) + " dimensions");
  } else if (m.transform == HfTransform::kTranspose) {
    buffer.resize(t.n_bytes);
    // Conv1D [in, out] -> GGML [in, out] (n_out rows of n_in): the stored shape, not reversed.
    Transpose(t.data, t.shape[1], t.shape[0], size, buffer.data());
    info.dims = {t.shape[0], t.shape[1]};
  } else {
    if (t.shape[0] % (2 * static_cast<int64_t>(m.n_heads)) != 0) {
      return Status::InvalidArgument(what + " has " + std::to_string(t.shape[0]) +
                                     " rows, not a multiple " + "of 2 x " +
                                     std::to_string(m.n_heads) + " heads");
    }
    buffer.resize(t.n_bytes);
    PermuteHeads(t.data, t.shape[0], t.shape[1] * size, m.n_heads, buffer.data());
  }
  if (tiled) KVSERVE_RETURN_IF_ERROR(TileTensor(m.tiling, info, buffer.data(), what));
  info.data = buffer.data();
  storage.buffers.push_back(std::move(buffer));  // the heap block (and info.data) stays put
  return info;
}

// transformers 5's fused gate_up experts [n_expert, 2 n_ff, n_embd] as the converter splits
// them: ffn_gate_exps (each expert's first n_ff rows) and ffn_up_exps (its last n_ff rows).
Status SplitGateUp(const SafetensorsTensor& t, const HfMapping& m, Storage& storage,
                   const std::string& source, std::vector<TensorInfo>& out) {
  if (t.shape.size() != 3 || t.shape[1] % 2 != 0) {
    return Status::InvalidArgument(source + ": tensor '" + t.name +
                                   "' is not [n_expert, 2 x n_ff, n_embd]");
  }
  const int64_t n_expert = t.shape[0], n_ff = t.shape[1] / 2, n_embd = t.shape[2];
  const uint64_t half = static_cast<uint64_t>(n_ff * n_embd) * ElementBytes(t.type);
  std::string up_name = m.name;
  up_name.replace(up_name.find("ffn_gate_exps"), 13, "ffn_up_exps");
  for (int part = 0; part < 2; ++part) {
    std::vector<uint8_t> buffer(half * static_cast<uint64_t>(n_expert));
    for (int64_t e = 0; e < n_expert; ++e) {
      std::memcpy(buffer.data() + e * half, t.data + (2 * e + part) * half, half);
    }
    out.push_back(TensorInfo{.name = part == 0 ? m.name : up_name,
                             .type = t.type,
                             .dims = {n_embd, n_ff, n_expert},
                             .data = buffer.data()});
    storage.buffers.push_back(std::move(buffer));
  }
  return Status::Ok();
}

// gpt-oss's fused experts as llama.cpp's converter splits them: gate_up_proj [n_expert, n_embd,
// 2 n_ff] (gate in the even columns, up in the odd ones) transposed into ffn_gate_exps and
// ffn_up_exps [n_expert, n_ff, n_embd]; gate_up_proj_bias [n_expert, 2 n_ff] into the two .bias
// tensors [n_expert, n_ff] (widened to F32, as the converter keeps biases).
Status SplitInterleavedGateUp(const SafetensorsTensor& t, const HfMapping& m, Storage& storage,
                              const std::string& source, std::vector<TensorInfo>& out) {
  const bool bias = t.shape.size() == 2;
  if ((t.shape.size() != 3 && !bias) || t.shape.back() % 2 != 0) {
    return Status::InvalidArgument(source + ": tensor '" + t.name +
                                   "' is not [n_expert, n_embd, 2 x n_ff] or [n_expert, 2 x n_ff]");
  }
  const int64_t n_expert = t.shape[0], n_ff = t.shape.back() / 2;
  const int64_t n_embd = bias ? 1 : t.shape[1];
  const std::vector<uint8_t> wide = ToF32(t, HfTransform::kNone);  // f32 bytes
  const float* values = reinterpret_cast<const float*>(wide.data());
  std::string up_name = m.name;
  up_name.replace(up_name.find("ffn_gate_exps"), 13, "ffn_up_exps");
  for (int part = 0; part < 2; ++part) {
    std::vector<uint8_t> buffer(static_cast<size_t>(n_expert * n_ff * n_embd) * sizeof(float));
    float* o = reinterpret_cast<float*>(buffer.data());
    for (int64_t e = 0; e < n_expert; ++e) {
      for (int64_t j = 0; j < n_ff; ++j) {
        for (int64_t i = 0; i < n_embd; ++i) {  // out [e][j][i] = in [e][i][2j + part]
          o[(e * n_ff + j) * n_embd + i] = values[(e * n_embd + i) * 2 * n_ff + 2 * j + part];
        }
      }
    }
    TensorInfo info{.name = part == 0 ? m.name : up_name, .type = GgmlType::kF32};
    info.dims =
        bias ? std::vector<int64_t>{n_ff, n_expert} : std::vector<int64_t>{n_embd, n_ff, n_expert};
    info.data = buffer.data();
    out.push_back(std::move(info));
    storage.buffers.push_back(std::move(buffer));
  }
  return Status::Ok();
}

// [n_expert, a, b] -> GGML [a, b, n_expert] (each expert's matrix transposed), in its own type.
Result<TensorInfo> TransposeExperts(const SafetensorsTensor& t, const HfMapping& m,
                                    Storage& storage, const std::string& source) {
  if (t.shape.size() != 3) {
    return Status::InvalidArgument(source + ": tensor '" + t.name + "' is not [n_expert, a, b]");
  }
  const int64_t n_expert = t.shape[0], a = t.shape[1], b = t.shape[2];
  const uint64_t size = ElementBytes(t.type);
  const uint64_t one = static_cast<uint64_t>(a * b) * size;
  std::vector<uint8_t> buffer(t.n_bytes);
  for (int64_t e = 0; e < n_expert; ++e) {
    Transpose(t.data + e * one, b, a, size, buffer.data() + e * one);
  }
  TensorInfo info{.name = m.name, .type = t.type, .dims = {a, b, n_expert}, .data = buffer.data()};
  storage.buffers.push_back(std::move(buffer));
  return info;
}

// An MXFP4 tensor's two parts being gathered (HfTransform::kMxfp4Blocks, kMxfp4Scales).
struct Mxfp4Parts {
  const SafetensorsTensor* blocks = nullptr;
  const SafetensorsTensor* scales = nullptr;
  bool interleaved_rows = false;
};

// GGML's MXFP4 block from an OpenAI one: the scale byte, then element j in byte j's low nibble
// and element j + 16 in its high nibble, where OpenAI keeps element 2i and 2i + 1 in byte i's
// low and high nibbles.
void Mxfp4Block(uint8_t scale, const uint8_t* in, uint8_t* out) {
  auto element = [&](int k) { return k % 2 == 0 ? in[k / 2] & 0x0F : in[k / 2] >> 4; };
  out[0] = scale;
  for (int j = 0; j < 16; ++j) {
    out[1 + j] = static_cast<uint8_t>(element(j) | (element(j + 16) << 4));
  }
}

// The GGML MXFP4 tensor(s) of a checkpoint's blocks and scales: [n_expert, rows, n_in] as GGML
// [n_in, rows, n_expert]; with interleaved rows two tensors, `name` (even rows) and its
// ffn_up_exps (odd rows), each of rows / 2.
Status JoinMxfp4(const std::string& name, const Mxfp4Parts& p, Storage& storage,
                 const std::string& source, std::vector<TensorInfo>& out) {
  const SafetensorsTensor* b = p.blocks;
  const SafetensorsTensor* s = p.scales;
  if (b == nullptr || s == nullptr) {
    return Status::InvalidArgument(source + ": MXFP4 tensor '" + name + "' has " +
                                   (b == nullptr ? "no _blocks" : "no _scales") + " part");
  }
  const std::vector<int64_t> scales_shape(b->shape.begin(), b->shape.end() - 1);
  if (b->type != GgmlType::kI8 || s->type != GgmlType::kI8 || b->shape.size() != 4 ||
      b->shape[3] != 16 || s->shape != scales_shape ||
      (p.interleaved_rows && b->shape[1] % 2 != 0)) {
    return Status::InvalidArgument(source + ": '" + b->name + "' and '" + s->name +
                                   "' are not U8 [n_expert, rows, n_in / 32, 16] and "
                                   "[n_expert, rows, n_in / 32]");
  }
  const int64_t n_expert = b->shape[0], rows = b->shape[1], n_blocks = b->shape[2];
  const int parts = p.interleaved_rows ? 2 : 1;
  const int64_t part_rows = rows / parts;
  std::string up_name = name;
  if (parts == 2) up_name.replace(up_name.find("ffn_gate_exps"), 13, "ffn_up_exps");
  for (int part = 0; part < parts; ++part) {
    std::vector<uint8_t> buffer(static_cast<size_t>(n_expert * part_rows * n_blocks) * 17);
    uint8_t* o = buffer.data();
    for (int64_t e = 0; e < n_expert; ++e) {
      for (int64_t r = 0; r < part_rows; ++r) {
        const int64_t row = e * rows + r * parts + part;  // the checkpoint's row
        for (int64_t k = 0; k < n_blocks; ++k, o += 17) {
          Mxfp4Block(s->data[row * n_blocks + k], b->data + (row * n_blocks + k) * 16, o);
        }
      }
    }
    out.push_back(TensorInfo{.name = part == 0 ? name : up_name,
                             .type = GgmlType::kMXFP4,
                             .dims = {n_blocks * 32, part_rows, n_expert},
                             .data = buffer.data()});
    storage.buffers.push_back(std::move(buffer));
  }
  return Status::Ok();
}

// One expert-stacked tensor being gathered: expert e's [rows, cols] matrix at slot e.
struct ExpertStack {
  std::vector<const SafetensorsTensor*> experts;
};

// The [n_expert, rows, cols] tensor (GGML [cols, rows, n_expert]) of the gathered experts.
Result<TensorInfo> StackExperts(const std::string& name, const ExpertStack& stack, Storage& storage,
                                const std::string& source) {
  const SafetensorsTensor* first = stack.experts[0];
  for (size_t e = 0; e < stack.experts.size(); ++e) {
    const SafetensorsTensor* t = stack.experts[e];
    if (t == nullptr) {
      return Status::InvalidArgument(source + ": expert " + std::to_string(e) + " of '" + name +
                                     "' is missing");
    }
    if (t->shape.size() != 2 || t->shape != first->shape || t->type != first->type) {
      return Status::InvalidArgument(source + ": tensor '" + t->name +
                                     "' differs in shape or type from '" + first->name + "'");
    }
  }
  std::vector<uint8_t> buffer(first->n_bytes * stack.experts.size());
  for (size_t e = 0; e < stack.experts.size(); ++e) {
    std::memcpy(buffer.data() + e * first->n_bytes, stack.experts[e]->data, first->n_bytes);
  }
  TensorInfo info{.name = name, .type = first->type, .data = buffer.data()};
  info.dims = {first->shape[1], first->shape[0], static_cast<int64_t>(stack.experts.size())};
  storage.buffers.push_back(std::move(buffer));
  return info;
}

}  // namespace

bool HfFolder::IsFolder(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

Result<GgufFile> HfFolder::Open(const std::string& folder) {
  auto config = LoadHfConfig(folder + "/config.json");
  if (!config.ok()) return config.status();
  auto tokenizer = HfTokenizer::LoadFolder(folder, {.n_vocab = config->n_vocab,
                                                    .bos_token_id = config->bos_token_id,
                                                    .eos_token_id = config->eos_token_id});
  if (!tokenizer.ok()) return tokenizer.status();
  auto shards = SafetensorsSet::OpenFolder(folder);
  if (!shards.ok()) return shards.status();

  GgufWriter writer;
  const size_t slash = folder.find_last_not_of('/');
  const std::string trimmed = folder.substr(0, slash == std::string::npos ? 0 : slash + 1);
  AddHfHyperParameters(*config, trimmed.substr(trimmed.find_last_of('/') + 1), writer);
  tokenizer->AddTo(writer);

  auto storage = std::make_shared<Storage>();
  storage->shards = shards->keep_alive();
  std::vector<TensorInfo> tensors;
  // The generated rope_freqs.weight: llama3's scaling, or the family's own (gemma4's).
  const std::vector<float> freqs = config->rope_scaling == HfRopeScaling::kLlama3
                                       ? Llama3RopeFreqs(*config)
                                       : config->rope_freqs;
  if (!freqs.empty()) {
    std::vector<uint8_t> bytes(freqs.size() * sizeof(float));
    std::memcpy(bytes.data(), freqs.data(), bytes.size());
    tensors.push_back(TensorInfo{.name = "rope_freqs.weight",
                                 .type = GgmlType::kF32,
                                 .dims = {static_cast<int64_t>(freqs.size())},
                                 .data = bytes.data()});
    storage->buffers.push_back(std::move(bytes));
  }
  std::map<std::string, ExpertStack> stacks;  // by GGUF name, in name order
  std::map<std::string, Mxfp4Parts> mxfp4;    // by GGUF name
  for (const SafetensorsTensor* t : shards->tensors()) {
    auto mapping = MapHfTensor(t->name, *config);
    if (!mapping.ok()) return Status::InvalidArgument(folder + ": " + mapping.message());
    if (mapping->name.empty()) continue;
    if (t->type == GgmlType::kI32 || t->type == GgmlType::kI64) {
      return Status::InvalidArgument(folder + ": tensor '" + t->name + "' is " +
                                     (t->type == GgmlType::kI32 ? "I32" : "I64") +
                                     ", which only tensors the converter skips may be");
    }
    if (mapping->expert >= 0) {
      ExpertStack& stack = stacks[mapping->name];
      stack.experts.resize(static_cast<size_t>(config->n_experts), nullptr);
      stack.experts[static_cast<size_t>(mapping->expert)] = t;
      continue;
    }
    if (mapping->transform == HfTransform::kMxfp4Blocks ||
        mapping->transform == HfTransform::kMxfp4Scales) {
      Mxfp4Parts& parts = mxfp4[mapping->name];
      (mapping->transform == HfTransform::kMxfp4Blocks ? parts.blocks : parts.scales) = t;
      parts.interleaved_rows = mapping->interleaved_rows;
      continue;
    }
    if (t->type == GgmlType::kI8) {
      return Status::InvalidArgument(folder + ": tensor '" + t->name +
                                     "' is U8, which only MXFP4 blocks and scales may be");
    }
    if (mapping->transform == HfTransform::kSplitGateUp) {
      KVSERVE_RETURN_IF_ERROR(SplitGateUp(*t, *mapping, *storage, folder, tensors));
      continue;
    }
    if (mapping->transform == HfTransform::kSplitInterleavedGateUp) {
      KVSERVE_RETURN_IF_ERROR(SplitInterleavedGateUp(*t, *mapping, *storage, folder, tensors));
      continue;
    }
    if (mapping->transform == HfTransform::kTransposeExperts) {
      auto tensor = TransposeExperts(*t, *mapping, *storage, folder);
      if (!tensor.ok()) return tensor.status();
      tensors.push_back(std::move(tensor).value());
      continue;
    }
    auto tensor = MakeTensor(*t, *mapping, *storage, folder);
    if (!tensor.ok()) return tensor.status();
    tensors.push_back(std::move(tensor).value());
  }
  for (const auto& [name, parts] : mxfp4) {
    KVSERVE_RETURN_IF_ERROR(JoinMxfp4(name, parts, *storage, folder, tensors));
  }
  for (const auto& [name, stack] : stacks) {
    auto tensor = StackExperts(name, stack, *storage, folder);
    if (!tensor.ok()) return tensor.status();
    tensors.push_back(std::move(tensor).value());
  }
  return GgufFile::FromParts(writer.Serialize(), std::move(tensors), std::move(storage), folder);
}

}  // namespace kvserve
