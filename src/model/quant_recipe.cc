#include "model/quant_recipe.h"

#include <algorithm>
#include <charconv>

namespace kvserve {

namespace {

struct Entry {
  const char* name;
  GgmlType main;
  uint32_t file_type;
  int mix;  // QuantRecipe::Mix, as an int to keep the table plain
};

// LLAMA_FTYPE values: F32 0, F16 1, Q4_0 2, Q4_1 3, Q8_0 7, Q5_0 8, Q5_1 9, Q2_K 10, Q3_K_S 11,
// Q3_K_M 12, Q3_K_L 13, Q4_K_S 14, Q4_K_M 15, Q5_K_S 16, Q5_K_M 17, Q6_K 18, IQ4_NL 25, BF16 32,
// MXFP4_MOE 38.
// (Q2_K_S needs an importance matrix in llama.cpp, which kvserve does not compute: not offered.)
constexpr int kUniform = 0, kOutputQ6K = 1, kIQ4NL = 2, kQ2K = 3, kQ3KS = 4, kQ3KM = 5, kQ3KL = 6,
              kQ4KS = 7, kQ4KM = 8, kQ5KS = 9, kQ5KM = 10, kQ6K = 11, kMxfp4Moe = 12;
constexpr Entry kRecipes[] = {
    {"f32", GgmlType::kF32, 0, kUniform},
    {"f16", GgmlType::kF16, 1, kUniform},
    {"bf16", GgmlType::kBF16, 32, kUniform},
    {"q8_0", GgmlType::kQ8_0, 7, kUniform},
    {"q4_0", GgmlType::kQ4_0, 2, kUniform},
    {"q4_1", GgmlType::kQ4_1, 3, kOutputQ6K},
    {"q5_0", GgmlType::kQ5_0, 8, kOutputQ6K},
    {"q5_1", GgmlType::kQ5_1, 9, kOutputQ6K},
    {"iq4_nl", GgmlType::kIQ4_NL, 25, kIQ4NL},
    {"q2_k", GgmlType::kQ2_K, 10, kQ2K},
    {"q3_k_s", GgmlType::kQ3_K, 11, kQ3KS},
    {"q3_k_m", GgmlType::kQ3_K, 12, kQ3KM},
    {"q3_k_l", GgmlType::kQ3_K, 13, kQ3KL},
    {"q4_k_s", GgmlType::kQ4_K, 14, kQ4KS},
    {"q4_k_m", GgmlType::kQ4_K, 15, kQ4KM},
    {"q5_k_s", GgmlType::kQ5_K, 16, kQ5KS},
    {"q5_k_m", GgmlType::kQ5_K, 17, kQ5KM},
    {"q6_k", GgmlType::kQ6_K, 18, kQ6K},
    // Every matrix in one K type: no llama.cpp recipe, labelled as the nearest _S file type.
    {"q3_k", GgmlType::kQ3_K, 11, kUniform},
    {"q4_k", GgmlType::kQ4_K, 14, kUniform},
    {"q5_k", GgmlType::kQ5_K, 16, kUniform},
    // Every matrix in MXFP4 (labelled MXFP4_MOE, the one file type with MXFP4), then llama.cpp's
    // MXFP4_MOE; "mxfp4" comes first so that Uniform(kMXFP4) takes its name.
    {"mxfp4", GgmlType::kMXFP4, 38, kUniform},
    {"mxfp4_moe", GgmlType::kMXFP4, 38, kMxfp4Moe},
};

// What llama-quantize never quantizes, whatever the recipe (llama-quant.cpp's
// tensor_allows_quantization, read as the spec): a tensor whose name contains one of these.
// clang-format off
constexpr std::string_view kNeverQuantized[] = {
    // Norms (2-D ones too), mixture-of-experts routers and token -> expert tables.
    "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight",
    // Gemma 3n's and Gemma 4's small matrices.
    "altup", "laurel", "per_layer_model_proj",
    // Recurrent layers' convolutions (Mamba, Qwen3.5's delta net, LFM2), indexer projections.
    "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight", "indexer.q_proj.weight",
    // RWKV's small 2-D weights.
    "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight", "time_mix_w2.weight",
    "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight", "time_mix_a0.weight",
    "time_mix_a1.weight", "time_mix_a2.weight", "time_mix_g1.weight", "time_mix_g2.weight",
    "time_mix_decay_w1.weight", "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight",
    // T5's relative position bias; multimodal encoders' positions, patches and codebooks.
    "attn_rel_b.weight", ".position_embd", "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos",
    ".patch_embd", ".patch_merger", "a.rvq.codebook", "mm.a.code_embd"};
// clang-format on

bool NeverQuantized(std::string_view tensor) {
  // Learned positions and BERT's token types, by their whole names.
  if (tensor == "position_embd.weight" || tensor == "token_types.weight") return true;
  return std::ranges::any_of(kNeverQuantized, [&](std::string_view part) {
    return tensor.find(part) != std::string_view::npos;
  });
}

// The layer index of "blk.N.…", or -1.
int LayerOf(std::string_view tensor) {
  if (!tensor.starts_with("blk.")) return -1;
  int layer = -1;
  const char* begin = tensor.data() + 4;
  auto [end, error] = std::from_chars(begin, tensor.data() + tensor.size(), layer);
  return error == std::errc() && end != begin ? layer : -1;
}

// llama.cpp's choice of the layers that get more bits: the first and last eighth, and every
// third one between.
bool UseMoreBits(int layer, int n_layers) {
  return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

}  // namespace

Result<QuantRecipe> QuantRecipe::Find(const std::string& name) {
  for (const Entry& e : kRecipes) {
    if (name == e.name) return QuantRecipe(e.name, e.main, e.file_type, static_cast<Mix>(e.mix));
  }
  return Status::InvalidArgument("unknown --type '" + name + "' (supported: " + QuantRecipeNames() +
                                 ")");
}

QuantRecipe QuantRecipe::Uniform(GgmlType type) {
  for (const Entry& e : kRecipes) {
    if (e.main == type) return QuantRecipe(e.name, type, e.file_type, Mix::kUniform);
  }
  return QuantRecipe(GgmlTypeName(type), type, 0, Mix::kUniform);
}

std::string QuantRecipeNames() {
  std::string names;
  for (const Entry& e : kRecipes) names += (names.empty() ? "" : ", ") + std::string(e.name);
  return names;
}

GgmlType QuantRecipe::TypeOf(std::string_view tensor, const QuantModelShape& shape, bool is_output,
                             int64_t experts) const {
  // Routers, norms, recurrent convolutions and the rest llama.cpp keeps: never quantized.
  if (NeverQuantized(tensor)) return GgmlType::kF32;
  if (mix_ == Mix::kUniform) return main_;
  // llama.cpp's MXFP4_MOE: tensors with more than one matrix (ne[2] > 1) in MXFP4, the rest
  // (output and embedding included) in Q8_0.
  if (mix_ == Mix::kMxfp4Moe) return experts > 1 && !is_output ? main_ : GgmlType::kQ8_0;
  if (is_output) return GgmlType::kQ6_K;
  const int layer = LayerOf(tensor);
  if (tensor.ends_with(".attn_v.weight") || tensor.ends_with(".attn_qkv.weight")) {
    return ValueType(layer, shape);
  }
  if (tensor.ends_with(".attn_k.weight")) {
    return shape.n_expert == 8 ? GgmlType::kQ8_0 : main_;
  }
  // Any down projection: dense, the experts' and the shared expert's (ffn_down_shexp).
  if (tensor.find("ffn_down") != std::string_view::npos) return DownType(layer, shape);
  if (tensor.ends_with(".attn_output.weight")) return AttentionOutputType(shape);
  return main_;
}

GgmlType QuantRecipe::ValueType(int layer, const QuantModelShape& shape) const {
  // An 8-expert model's value projections are small next to its experts: Q8_0 in every recipe.
  if (shape.n_expert == 8) return GgmlType::kQ8_0;
  switch (mix_) {
    case Mix::kQ2K:
      return shape.n_gqa >= 4 ? GgmlType::kQ4_K : GgmlType::kQ3_K;
    case Mix::kQ3KM:
      return layer < 2 ? GgmlType::kQ5_K : GgmlType::kQ4_K;
    case Mix::kQ3KL:
      return GgmlType::kQ5_K;
    case Mix::kIQ4NL:
      return shape.n_gqa >= 4 ? GgmlType::kQ5_K : main_;
    case Mix::kQ4KM:
    case Mix::kQ5KM:
      return UseMoreBits(layer, shape.n_layers) ? GgmlType::kQ6_K : main_;
    case Mix::kQ4KS:
      return layer < 4 ? GgmlType::kQ5_K : main_;
    default:
      return main_;
  }
}

GgmlType QuantRecipe::DownType(int layer, const QuantModelShape& shape) const {
  const int n = shape.n_layers;
  switch (mix_) {
    case Mix::kQ2K:
      return GgmlType::kQ3_K;
    case Mix::kQ3KM:
      return layer < n / 16 ? GgmlType::kQ5_K : GgmlType::kQ4_K;
    case Mix::kQ3KL:
      return GgmlType::kQ5_K;
    case Mix::kQ4KM:
    case Mix::kQ5KM:
      return UseMoreBits(layer, n) ? GgmlType::kQ6_K : main_;
    case Mix::kIQ4NL:
    case Mix::kQ4KS:
      return layer < n / 8 ? GgmlType::kQ5_K : main_;
    default:
      return main_;
  }
}

GgmlType QuantRecipe::AttentionOutputType(const QuantModelShape& shape) const {
  if (shape.n_expert == 8) {
    switch (mix_) {
      case Mix::kQ2K:
      case Mix::kQ3KS:
      case Mix::kQ3KM:
      case Mix::kIQ4NL:
      case Mix::kQ4KS:
      case Mix::kQ4KM:
        return GgmlType::kQ5_K;
      default:
        return main_;
    }
  }
  switch (mix_) {
    case Mix::kQ2K:
      return GgmlType::kQ3_K;
    case Mix::kQ3KM:
      return GgmlType::kQ4_K;
    case Mix::kQ3KL:
      return GgmlType::kQ5_K;
    default:
      return main_;
  }
}

GgmlType SuperBlockFallback(GgmlType type) {
  switch (type) {
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K:
      return GgmlType::kQ4_0;
    case GgmlType::kQ4_K:
      return GgmlType::kQ5_0;
    case GgmlType::kQ5_K:
      return GgmlType::kQ5_1;
    case GgmlType::kQ6_K:
      return GgmlType::kQ8_0;
    default:
      return type;
  }
}

}  // namespace kvserve
