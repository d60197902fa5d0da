#include "model/qwen35_layout.h"

#include <string>
#include <utility>

namespace kvserve {

namespace {

// Whether M-RoPE `sections` rotate every pair of the first rope_dims dimensions by one of the
// first three positions (which text tokens set alike); llama.cpp's interleaved layout (ggml's
// imrope) gives pair i sector i % Σ sections, by sector % 3 the t, h or w position while within
// 3 * that section, else the fourth position (0 for text: not rotated).
bool SectionsRotateAlike(const std::vector<int64_t>& sections, int rope_dims) {
  int64_t total = 0;
  for (int64_t s : sections) total += s;
  if (total <= 0) return false;
  for (int i = 0; i < rope_dims / 2; ++i) {
    const int64_t sector = i % total;
    const int64_t by = sector % 3;  // t, h or w
    if (sector >= 3 * sections[by]) return false;
  }
  return true;
}

// The main stack's recurrent flags; sets config.n_layers to its length and n_nextn.
Result<std::vector<bool>> ReadRecurrentLayers(const GgufFile& f, ModelConfig& config,
                                              int& n_nextn) {
  const std::string a = config.arch + ".";
  auto interval = f.GetUintOr(a + "full_attention_interval", 4);
  if (!interval.ok()) return interval.status();
  if (*interval == 0) {
    return Status::InvalidArgument(f.path() + ": " + a + "full_attention_interval is 0");
  }
  // block_count counts the MTP layers that follow the main stack.
  auto nextn = f.GetUintOr(a + "nextn_predict_layers", 0);
  if (!nextn.ok()) return nextn.status();
  const int n_all = config.n_layers;
  if (*nextn >= static_cast<uint64_t>(n_all)) {
    return Status::InvalidArgument(f.path() + ": " + a + "nextn_predict_layers " +
                                   std::to_string(*nextn) + " leaves none of the " +
                                   std::to_string(n_all) + " layers");
  }
  n_nextn = static_cast<int>(*nextn);
  const int n = n_all - n_nextn;
  config.n_layers = n;
  std::vector<bool> recurrent(n);
  for (int i = 0; i < n; ++i) recurrent[i] = (i + 1) % *interval != 0;
  if (f.Find(a + "attention.recurrent_layers") != nullptr) {
    auto flags = ReadLayerFlags(f, a + "attention.recurrent_layers", n_all);
    if (!flags.ok()) return flags.status();
    recurrent.assign(flags->begin(), flags->begin() + n);
  }
  return recurrent;
}

Result<RopeParams> ReadRope(const GgufFile& f, const ModelConfig& config) {
  const std::string a = config.arch + ".";
  std::vector<int64_t> sections = {0, 0, 0, 0};
  if (f.Find(a + "rope.dimension_sections") != nullptr) {
    auto v = f.GetIntArray(a + "rope.dimension_sections");
    if (!v.ok()) return v.status();
    sections = *v;
    sections.resize(4, 0);
  }
  const int rope_dims = config.rope_dims;
  if (rope_dims <= 0 || rope_dims > config.head_dim || rope_dims % 2 != 0 ||
      (f.Find(a + "rope.dimension_sections") != nullptr &&
       !SectionsRotateAlike(sections, rope_dims))) {
    return Status::InvalidArgument(
        f.path() + ": " + a + "rope.dimension_count " + std::to_string(rope_dims) +
        " with rope.dimension_sections [" + std::to_string(sections[0]) + ", " +
        std::to_string(sections[1]) + ", " + std::to_string(sections[2]) + ", " +
        std::to_string(sections[3]) + "] (head " + std::to_string(config.head_dim) +
        "): kvserve rotates text positions only, every pair by the same position");
  }
  return RopeParams{.rope_dims = rope_dims,
                    .freq_base = config.rope_freq_base,
                    .mode = RopeMode::kSplitHalves,
                    .position_scale = config.rope_position_scale};
}

}  // namespace

Result<Qwen35Layout> Qwen35Layout::Read(const GgufFile& f, ModelConfig& config) {
  KVSERVE_RETURN_IF_ERROR(config.ReadNormEps(f, "attention.layer_norm_rms_epsilon"));
  KVSERVE_RETURN_IF_ERROR(config.ReadRopeScaling(f));
  Qwen35Layout layout;
  auto delta = DeltaNetShape::Read(f, config.arch);
  if (!delta.ok()) return delta.status();
  layout.delta = *delta;
  auto recurrent = ReadRecurrentLayers(f, config, layout.n_nextn);
  if (!recurrent.ok()) return recurrent.status();
  layout.recurrent = std::move(recurrent).value();
  auto rope = ReadRope(f, config);
  if (!rope.ok()) return rope.status();
  layout.rope = *rope;
  return layout;
}

KvSpec Qwen35Layout::Spec(const ModelConfig& c, bool nextn) const {
  std::vector<int> attention, states;
  for (int i = 0; i < c.n_layers; ++i) (recurrent[i] ? states : attention).push_back(i);
  if (nextn) {
    for (int i = 0; i < n_nextn; ++i) attention.push_back(c.n_layers + i);
  }
  KvSpec spec;
  if (!attention.empty()) {
    spec.groups.push_back(
        KvGroupSpec{.layers = attention, .n_kv_heads = c.n_kv_heads, .head_dim = c.head_dim});
  }
  if (!states.empty()) {
    spec.groups.push_back(DeltaNetGroup(delta, std::move(states), nextn ? c.n_embd : 0));
  }
  return spec;
}

}  // namespace kvserve
