// Hugging Face Qwen3.5 folders (model/qwen35_hf.h), written here from a `kvserve synth` file by
// undoing what llama.cpp's converter does (GGUF names back to the HF ones, written apart from the
// loader's table; norms but ssm_norm minus 1; ssm_a back to A_log; value heads from tiled back to
// grouped by key head; conv1d [C, 1, K]; shapes reversed): from the qwen35-tiny-mtp file as a
// multimodal Qwen3_5ForConditionalGeneration folder (text_config, "model.language_model." names,
// a vision tower, the MTP layer blk.8 as mtp.layers.0.* and its nextn.* as mtp.fc,
// mtp.pre_fc_norm_embedding / pre_fc_norm_hidden and mtp.norm, mtp_num_hidden_layers 1:
// _QwenMtpMixin's renaming undone), and from the qwen35-tiny file as a Qwen3_5ForCausalLM folder
// (rope_scaling of type mrope, top-level rope_theta and partial_rotary_factor). The expected file
// is the synthesized one with ssm_a = -exp(A_log) of the folder's A_log (log(-a) does not come
// back to a bit for bit); with MTP it is the -mtp file's block_count 9, nextn_predict_layers 1
// and blk.8.* tensors as synthesized. The folder's view holds that file's tensors byte for byte
// and its qwen35.* keys; the model from the folder, and `kvserve convert` of it, give its logits
// bit for bit. Plus the value heads' order written out by hand, a real-size config's keys, and the
// refusals by key.
//
// Qwen3.5 MoE (the same reading with the mixture in place of the MLP): the same cases over the
// qwen35moe-tiny-mtp file, as a Qwen3_5MoeForConditionalGeneration folder with one tensor per
// expert (mlp.experts.E.*_proj.weight, the MTP layer's too) and a Qwen3_5MoeForCausalLM folder
// with MTP and transformers 5's fused mlp.experts.gate_up_proj and down_proj (the MTP layer's
// too); the shared expert's gate is the checkpoint's [1, n_embd], so the expected file holds it as
// the converter writes it, GGML [n_embd, 1]. Plus a 35B-A3B-size config's keys and names, and its
// refusals by key.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "io/gguf_reader.h"
#include "io/gguf_writer.h"
#include "model/hf_families.h"
#include "model/hf_folder.h"
#include "model/model.h"
#include "support/cli.h"
#include "support/forward.h"
#include "support/gguf_compare.h"
#include "support/paths.h"
#include "support/reference_runs.h"
#include "support/safetensors_builder.h"
#include "support/spm_tokenizer_json.h"
#include "support/synthetic_files.h"
#include "support/test_backend.h"

namespace kvserve {
namespace {

using nlohmann::ordered_json;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

struct Qwen35Case {
  const char* name;
  bool multimodal;             // Qwen3_5ForConditionalGeneration: text_config, vision tower
  bool mtp;                    // the -mtp preset: its MTP layer as "mtp.*", mtp_num_hidden_layers 1
  bool moe = false;            // Qwen3_5Moe*: qwen35moe-tiny(-mtp), the mixture in place of the MLP
  bool fused_experts = false;  // transformers 5's mlp.experts.gate_up_proj and down_proj
  const char* arch() const { return moe ? "qwen35moe" : "qwen35"; }
  std::string preset() const { return std::string(arch()) + (mtp ? "-tiny-mtp" : "-tiny"); }
};

const Qwen35Case kCases[] = {
    {"ConditionalGeneration", true, true},
    {"CausalLm", false, false},
    {"MoeConditionalGeneration", true, true, true, false},
    {"MoeCausalLmFusedExperts", false, true, true, true},
};

void PrintTo(const Qwen35Case& c, std::ostream* os) { *os << c.name; }

std::string SynthPath(const Qwen35Case& c) {
  return testing::SynthesizedModel(c.preset(), c.preset() + "-f32", GgmlType::kF32);
}

// The delta nets' heads, from the file's ssm.* keys.
struct Heads {
  int64_t n_k = 0, n_v = 0, size = 0;  // key heads, value heads, state_size
  int64_t key_dim() const { return n_k * size; }
};

// How a GGUF tensor goes back to its HF form.
enum class Back {
  kSame,
  kMinusOne,         // Qwen3.5's (1 + w) RMSNorm weights
  kHeadRows,         // value heads of head_dim rows (z)
  kHeadRowsAfterQk,  // value heads of head_dim rows after q and k (qkv)
  kOneRows,          // one row per value head (b, a, dt_bias)
  kALog,             // ssm_a -> A_log, one per value head
  kConv,             // ssm_conv1d [K, C] -> [C, 1, K], value channels after q and k
  kHeadColumns,      // value heads of head_dim columns (out_proj)
  kRow,              // [n] -> HF [1, n] (the shared expert's gate), GGUF [n, 1] as converted
};

struct LayerRule {
  const char* gguf;  // after "blk.N."
  const char* hf;    // after "layers.N."
  Back back;
};

const LayerRule kLayerRules[] = {
    {"attn_norm.weight", "input_layernorm.weight", Back::kMinusOne},
    {"post_attention_norm.weight", "post_attention_layernorm.weight", Back::kMinusOne},
    {"attn_q.weight", "self_attn.q_proj.weight", Back::kSame},
    {"attn_k.weight", "self_attn.k_proj.weight", Back::kSame},
    {"attn_v.weight", "self_attn.v_proj.weight", Back::kSame},
    {"attn_output.weight", "self_attn.o_proj.weight", Back::kSame},
    {"attn_q_norm.weight", "self_attn.q_norm.weight", Back::kMinusOne},
    {"attn_k_norm.weight", "self_attn.k_norm.weight", Back::kMinusOne},
    {"ffn_gate.weight", "mlp.gate_proj.weight", Back::kSame},
    {"ffn_up.weight", "mlp.up_proj.weight", Back::kSame},
    {"ffn_down.weight", "mlp.down_proj.weight", Back::kSame},
    {"attn_qkv.weight", "linear_attn.in_proj_qkv.weight", Back::kHeadRowsAfterQk},
    {"attn_gate.weight", "linear_attn.in_proj_z.weight", Back::kHeadRows},
    {"ssm_beta.weight", "linear_attn.in_proj_b.weight", Back::kOneRows},
    {"ssm_alpha.weight", "linear_attn.in_proj_a.weight", Back::kOneRows},
    {"ssm_a", "linear_attn.A_log", Back::kALog},
    {"ssm_dt.bias", "linear_attn.dt_bias", Back::kOneRows},
    {"ssm_conv1d.weight", "linear_attn.conv1d.weight", Back::kConv},
    {"ssm_norm.weight", "linear_attn.norm.weight", Back::kSame},  // the gated norm: as stored
    {"ssm_out.weight", "linear_attn.out_proj.weight", Back::kHeadColumns},
    {"ffn_gate_inp.weight", "mlp.gate.weight", Back::kSame},
    {"ffn_gate_shexp.weight", "mlp.shared_expert.gate_proj.weight", Back::kSame},
    {"ffn_up_shexp.weight", "mlp.shared_expert.up_proj.weight", Back::kSame},
    {"ffn_down_shexp.weight", "mlp.shared_expert.down_proj.weight", Back::kSame},
    {"ffn_gate_inp_shexp.weight", "mlp.shared_expert_gate.weight", Back::kRow},
};

// Value heads of a row-major [rows, cols] tensor back from llama.cpp's tiled order (key head g's
// j-th value head at j * n_k + g) to the checkpoint's grouped one (at g * r + j): heads of
// `head_size` rows from row `first` on, or with `columns` the columns of each row.
std::vector<float> Untile(const std::vector<float>& in, int64_t rows, int64_t cols, const Heads& h,
                          int64_t head_size, int64_t first, bool columns) {
  std::vector<float> out = in;
  const int64_t r = h.n_v / h.n_k;
  for (int64_t g = 0; g < h.n_k; ++g) {
    for (int64_t j = 0; j < r; ++j) {
      const int64_t from = first + (j * h.n_k + g) * head_size;
      const int64_t to = first + (g * r + j) * head_size;
      for (int64_t k = 0; k < head_size; ++k) {
        for (int64_t i = 0; i < (columns ? rows : cols); ++i) {
          if (columns) {
            out[i * cols + to + k] = in[i * cols + from + k];
          } else {
            out[(to + k) * cols + i] = in[(from + k) * cols + i];
          }
        }
      }
    }
  }
  return out;
}

struct HfTensor {
  std::vector<int64_t> shape;
  std::vector<float> values;
};

// The HF form of a layer tensor whose GGUF values are `gguf`; for ssm_a, `gguf` becomes
// -exp(A_log) of the A_log written (what the converter makes of it).
HfTensor BackToHf(Back back, const std::vector<int64_t>& dims, const Heads& h,
                  std::vector<float>& gguf) {
  HfTensor t{.shape = {dims.rbegin(), dims.rend()}, .values = gguf};
  const int64_t rows = t.shape[0];
  const int64_t cols = static_cast<int64_t>(gguf.size()) / rows;
  switch (back) {
    case Back::kSame:
      break;
    case Back::kMinusOne:
      for (float& v : t.values) v -= 1.0f;
      break;
    case Back::kHeadRows:
      t.values = Untile(gguf, rows, cols, h, h.size, 0, false);
      break;
    case Back::kHeadRowsAfterQk:
      t.values = Untile(gguf, rows, cols, h, h.size, 2 * h.key_dim(), false);
      break;
    case Back::kOneRows:
      t.values = Untile(gguf, rows, cols, h, 1, 0, false);
      break;
    case Back::kALog: {
      std::vector<float> a_log(gguf.size());
      for (size_t i = 0; i < gguf.size(); ++i) {
        a_log[i] = static_cast<float>(std::log(-static_cast<double>(gguf[i])));
        gguf[i] = -std::exp(a_log[i]);
      }
      t.values = Untile(a_log, rows, cols, h, 1, 0, false);
      break;
    }
    case Back::kConv:
      t.values = Untile(gguf, rows, cols, h, h.size, 2 * h.key_dim(), false);
      t.shape = {rows, 1, cols};
      break;
    case Back::kHeadColumns:
      t.values = Untile(gguf, rows, cols, h, h.size, 0, true);
      break;
    case Back::kRow:
      t.shape = {1, rows};
      break;
  }
  return t;
}

std::vector<float> FloatsOf(const TensorInfo& t) {
  std::vector<float> v(t.n_bytes / sizeof(float));
  std::memcpy(v.data(), t.data, t.n_bytes);
  return v;
}

std::vector<uint8_t> BytesOf(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(float));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// A built case: the folder, the GGUF file it must convert to, and the HF values written.
struct Built {
  std::string folder, gguf;
  std::map<std::string, std::vector<float>> hf;  // by HF name
};

// The text config of the synthesized file in Qwen3.5's keys (the multimodal case's text_config).
ordered_json TextConfigOf(const GgufFile& f, const Qwen35Case& c) {
  const std::string a = std::string(c.arch()) + ".";
  auto u = [&](const std::string& key) { return f.GetUint(a + key).value(); };
  const int n_layers =
      static_cast<int>(u("block_count") - f.GetUintOr(a + "nextn_predict_layers", 0).value());
  const uint64_t interval = u("full_attention_interval");
  ordered_json types = ordered_json::array();
  for (int i = 0; i < n_layers; ++i) {
    types.push_back((i + 1) % interval == 0 ? "full_attention" : "linear_attention");
  }
  const double theta = f.GetFloat(a + "rope.freq_base").value();
  const std::vector<int64_t> sections = f.GetIntArray(a + "rope.dimension_sections").value();
  const double partial = static_cast<double>(u("rope.dimension_count")) /
                         static_cast<double>(u("attention.key_length"));
  ordered_json j = {
      {"model_type", c.moe ? "qwen3_5_moe_text" : "qwen3_5_text"},
      {"hidden_size", u("embedding_length")},
      {"num_hidden_layers", n_layers},
      {"num_attention_heads", u("attention.head_count")},
      {"num_key_value_heads", u("attention.head_count_kv")},
      {"head_dim", u("attention.key_length")},
      {"intermediate_size", u("feed_forward_length")},
      {"max_position_embeddings", u("context_length")},
      {"rms_norm_eps", f.GetFloat(a + "attention.layer_norm_rms_epsilon").value()},
      {"hidden_act", "silu"},
      {"attention_bias", false},
      {"attn_output_gate", true},
      {"full_attention_interval", interval},
      {"layer_types", types},
      {"linear_conv_kernel_dim", u("ssm.conv_kernel")},
      {"linear_key_head_dim", u("ssm.state_size")},
      {"linear_value_head_dim", u("ssm.state_size")},
      {"linear_num_key_heads", u("ssm.group_count")},
      {"linear_num_value_heads", u("ssm.time_step_rank")},
      {"tie_word_embeddings", false},
      {"vocab_size", f.GetStringArray("tokenizer.ggml.tokens")->size()},
      {"bos_token_id", 1},
      {"eos_token_id", 2},
  };
  if (c.moe) {
    j["num_experts"] = u("expert_count");
    j["num_experts_per_tok"] = u("expert_used_count");
    j["moe_intermediate_size"] = u("expert_feed_forward_length");
    j["shared_expert_intermediate_size"] = u("expert_shared_feed_forward_length");
    j["norm_topk_prob"] = true;  // not read
    j["router_aux_loss_coef"] = 0.001;
  }
  const ordered_json mrope = {sections[0], sections[1], sections[2]};
  if (c.mtp) j["mtp_num_hidden_layers"] = 1;
  if (c.multimodal) {  // transformers 5: everything in rope_parameters
    j["rope_parameters"] = {{"mrope_interleaved", true},
                            {"mrope_section", mrope},
                            {"rope_type", "default"},
                            {"rope_theta", theta},
                            {"partial_rotary_factor", partial}};
  } else {  // transformers 4: rope_scaling of type mrope, theta and factor at the top
    j["rope_theta"] = theta;
    j["partial_rotary_factor"] = partial;
    j["rope_scaling"] = {{"type", "mrope"}, {"mrope_section", mrope}};
  }
  return j;
}

// Where one layer's tensors go: the expected file's block prefix ("blk.N.") and the folder's
// layer prefix ("model.layers.N.", "mtp.layers.0.").
struct LayerOut {
  std::string gguf, hf;
};

// What a built case writes into.
struct Writers {
  const Qwen35Case& c;
  const GgufFile& f;
  const Heads& h;
  GgufWriter& expected;
  testing::SafetensorsBuilder& weights;
  Built& built;
};

// The experts' tensor `t` (ffn_{gate,up,down}_exps, GGML [cols, rows, n_expert]) in the HF
// layout: one [rows, cols] tensor per expert, or fused: each expert's gate rows then up rows in
// mlp.experts.gate_up_proj [n_expert, 2 n_ff, n_embd], mlp.experts.down_proj [n_expert, n_embd,
// n_ff] as stored (transformers 5's parameters, without ".weight").
void AddExperts(const Writers& w, const TensorInfo& t, const std::string& suffix,
                const std::string& layer) {
  const std::string kind = suffix.substr(4, suffix.find("_exps") - 4);  // gate, up or down
  const int64_t cols = t.dims[0], rows = t.dims[1], n_expert = t.dims[2];
  const std::vector<float> values = FloatsOf(t);
  const auto matrix = values.begin();
  const int64_t size = rows * cols;
  if (!w.c.fused_experts) {
    for (int64_t e = 0; e < n_expert; ++e) {
      w.weights.AddF32(layer + "mlp.experts." + std::to_string(e) + "." + kind + "_proj.weight",
                       {rows, cols},
                       std::vector<float>(matrix + e * size, matrix + (e + 1) * size));
    }
  } else if (kind == "down") {
    w.weights.AddF32(layer + "mlp.experts.down_proj", {n_expert, rows, cols}, values);
  } else if (kind == "gate") {
    std::string up_name = t.name;
    up_name.replace(up_name.find("ffn_gate_exps"), 13, "ffn_up_exps");
    const std::vector<float> up = FloatsOf(*w.f.FindTensor(up_name));
    std::vector<float> fused;
    for (int64_t e = 0; e < n_expert; ++e) {
      fused.insert(fused.end(), matrix + e * size, matrix + (e + 1) * size);
      fused.insert(fused.end(), up.begin() + e * size, up.begin() + (e + 1) * size);
    }
    w.weights.AddF32(layer + "mlp.experts.gate_up_proj", {n_expert, 2 * rows, cols}, fused);
  }  // up: with gate
}

// Layer tensor `t` (`suffix` after "blk.N.") into the expected file and the folder.
void AddLayerTensor(const Writers& w, const TensorInfo& t, const std::string& suffix,
                    const LayerOut& out) {
  std::vector<float> values = FloatsOf(t);
  if (suffix.ends_with("_exps.weight")) {
    w.expected.AddTensor(out.gguf + suffix, GgmlType::kF32, t.dims, BytesOf(values));
    AddExperts(w, t, suffix, out.hf);
    return;
  }
  const LayerRule* rule = nullptr;
  for (const LayerRule& r : kLayerRules) {
    if (suffix == r.gguf) rule = &r;
  }
  ASSERT_NE(rule, nullptr) << "no HF name for " << t.name;
  HfTensor hf = BackToHf(rule->back, t.dims, w.h, values);
  // The converter keeps the shared expert gate's [1, n_embd] as GGML [n_embd, 1].
  const std::vector<int64_t> dims =
      rule->back == Back::kRow ? std::vector<int64_t>{t.dims[0], 1} : t.dims;
  w.expected.AddTensor(out.gguf + suffix, GgmlType::kF32, dims, BytesOf(values));
  w.built.hf[out.hf + rule->hf] = hf.values;
  w.weights.AddF32(out.hf + rule->hf, hf.shape, hf.values);
}

// _QwenMtpMixin's renaming undone: the MTP layer's nextn.* tensor `suffix` (after "blk.N.") as
// the top-level mtp.* tensor it came from (norms minus 1: the converter adds 1 to every name
// ending in "norm.weight" after renaming), or false for the layer's decoder tensors.
bool AddNextn(const Writers& w, const TensorInfo& t, const std::string& suffix) {
  static const std::map<std::string, std::pair<std::string, Back>> kNextn = {
      {"nextn.eh_proj.weight", {"mtp.fc.weight", Back::kSame}},
      {"nextn.enorm.weight", {"mtp.pre_fc_norm_embedding.weight", Back::kMinusOne}},
      {"nextn.hnorm.weight", {"mtp.pre_fc_norm_hidden.weight", Back::kMinusOne}},
      {"nextn.shared_head_norm.weight", {"mtp.norm.weight", Back::kMinusOne}}};
  auto it = kNextn.find(suffix);
  if (it == kNextn.end()) return false;
  std::vector<float> values = FloatsOf(t);
  HfTensor hf = BackToHf(it->second.second, t.dims, w.h, values);
  w.expected.AddTensor(t.name, GgmlType::kF32, t.dims, BytesOf(values));
  w.built.hf[it->second.first] = hf.values;
  w.weights.AddF32(it->second.first, hf.shape, hf.values);
  return true;
}

// The tensors of the synthesized file under HF names and layouts, and the expected file.
void WriteWeights(const Qwen35Case& c, const GgufFile& f, Built& built) {
  const std::string a = std::string(c.arch()) + ".";
  const Heads h{.n_k = static_cast<int64_t>(f.GetUint(a + "ssm.group_count").value()),
                .n_v = static_cast<int64_t>(f.GetUint(a + "ssm.time_step_rank").value()),
                .size = static_cast<int64_t>(f.GetUint(a + "ssm.state_size").value())};
  ASSERT_LT(h.n_k, h.n_v) << "the preset must have value heads to reorder";
  const std::string prefix = c.multimodal ? "model.language_model." : "model.";
  const uint64_t n_nextn = f.GetUintOr(a + "nextn_predict_layers", 0).value();
  ASSERT_EQ(n_nextn, c.mtp ? 1u : 0u) << c.preset();
  const int n_main = static_cast<int>(f.GetUint(a + "block_count").value() - n_nextn);
  const std::map<std::string, std::pair<std::string, Back>> globals = {
      {"token_embd.weight", {prefix + "embed_tokens.weight", Back::kSame}},
      {"output_norm.weight", {prefix + "norm.weight", Back::kMinusOne}},
      {"output.weight", {"lm_head.weight", Back::kSame}}};
  GgufWriter expected(f.alignment());
  for (const auto& [key, value] : f.metadata()) expected.CopyValue(key, value);
  testing::SafetensorsBuilder weights;
  const Writers w{.c = c, .f = f, .h = h, .expected = expected, .weights = weights, .built = built};
  if (c.multimodal) {  // the tower the text model leaves out
    for (const char* name :
         {"model.visual.blocks.0.attn.qkv.weight", "model.visual.merger.linear_fc1.weight"}) {
      weights.AddF32(name, {2, 4}, std::vector<float>(8, 0.5f));
    }
  }
  for (const TensorInfo& t : f.tensors()) {
    ASSERT_EQ(t.type, GgmlType::kF32) << t.name;
    auto it = globals.find(t.name);
    if (it == globals.end()) {
      const size_t dot = t.name.find('.', 4);
      const std::string layer = t.name.substr(4, dot - 4);
      const std::string suffix = t.name.substr(dot + 1);
      if (std::stoi(layer) < n_main) {
        AddLayerTensor(w, t, suffix,
                       {.gguf = "blk." + layer + ".", .hf = prefix + "layers." + layer + "."});
      } else if (!AddNextn(w, t, suffix)) {  // MTP layer I is mtp.layers.I (I = 0 here)
        AddLayerTensor(w, t, suffix, {.gguf = "blk." + layer + ".", .hf = "mtp.layers.0."});
      }
      continue;
    }
    std::vector<float> values = FloatsOf(t);
    HfTensor hf = BackToHf(it->second.second, t.dims, h, values);
    expected.AddTensor(t.name, GgmlType::kF32, t.dims, BytesOf(values));
    built.hf[it->second.first] = hf.values;
    weights.AddF32(it->second.first, hf.shape, hf.values);
  }
  ASSERT_TRUE(weights.WriteFile(built.folder + "/model.safetensors"));
  ASSERT_TRUE(expected.WriteFile(built.gguf).ok());
}

// The folder of `c` and its expected file (built once per test process and case).
const Built& BuiltOf(const Qwen35Case& c) {
  static std::map<std::string, Built> cases;
  auto [it, added] = cases.try_emplace(c.name);
  if (!added) return it->second;
  Built& b = it->second;
  b.folder = testing::TempDir() + "/hf-qwen35-" + c.name;
  b.gguf = testing::TempDir() + "/hf-qwen35-" + c.name + "-expected.gguf";
  fs::remove_all(b.folder);
  fs::create_directories(b.folder);
  auto f = GgufFile::Open(SynthPath(c));
  EXPECT_TRUE(f.ok()) << f.message();
  if (!f.ok()) return b;
  ordered_json config = TextConfigOf(*f, c);
  if (c.multimodal) {
    const char* type = c.moe ? "qwen3_5_moe" : "qwen3_5";
    config = {{"architectures",
               {c.moe ? "Qwen3_5MoeForConditionalGeneration" : "Qwen3_5ForConditionalGeneration"}},
              {"model_type", type},
              {"text_config", config},
              {"vision_config", {{"model_type", type}, {"depth", 1}, {"hidden_size", 4}}},
              {"tie_word_embeddings", false}};
  } else {
    config["architectures"] = {c.moe ? "Qwen3_5MoeForCausalLM" : "Qwen3_5ForCausalLM"};
  }
  EXPECT_TRUE(testing::WriteText(b.folder + "/config.json", config.dump(2)));
  WriteWeights(c, *f, b);
  EXPECT_TRUE(
      testing::WriteText(b.folder + "/tokenizer.json", testing::SpmTokenizerJson(*f).dump()));
  return b;
}

// 20 tokens: five attention periods of the delta nets' state.
const std::vector<int32_t> kTokens = {1,   72, 301, 15,  499, 260, 33,  87, 144, 410,
                                      222, 9,  356, 480, 61,  190, 305, 17, 444, 128};

class HfQwen35Test : public ::testing::TestWithParam<Qwen35Case> {};

TEST_P(HfQwen35Test, FolderHoldsTheGgufTensorsAndKeys) {
  const Built& b = BuiltOf(GetParam());
  auto view = HfFolder::Open(b.folder);
  ASSERT_TRUE(view.ok()) << view.message();
  auto file = GgufFile::Open(b.gguf);
  ASSERT_TRUE(file.ok()) << file.message();
  testing::ExpectSameTensors(*view, *file);
  testing::ExpectSameArchKeys(*view, *file, GetParam().arch());
}

// llama.cpp's _reorder_v_heads written out for 2 key heads of 2 value heads each: the grouped
// [k0v0, k0v1, k1v0, k1v1] become [k0v0, k1v0, k0v1, k1v1]; A_log's after -exp; conv1d's q and
// k channels in place.
TEST_P(HfQwen35Test, ValueHeadsGoFromGroupedToTiled) {
  const Built& b = BuiltOf(GetParam());
  auto view = HfFolder::Open(b.folder);
  ASSERT_TRUE(view.ok()) << view.message();
  const std::string p = GetParam().multimodal ? "model.language_model.layers.0.linear_attn."
                                              : "model.layers.0.linear_attn.";
  const std::vector<float> dt = b.hf.at(p + "dt_bias"), a_log = b.hf.at(p + "A_log");
  ASSERT_EQ(dt.size(), 4u);
  const std::vector<float> tiled_dt = FloatsOf(*view->FindTensor("blk.0.ssm_dt.bias"));
  EXPECT_EQ(tiled_dt, (std::vector<float>{dt[0], dt[2], dt[1], dt[3]}));
  const std::vector<float> ssm_a = FloatsOf(*view->FindTensor("blk.0.ssm_a"));
  const int order[4] = {0, 2, 1, 3};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(ssm_a[i], -std::exp(a_log[order[i]])) << i;
  const TensorInfo* conv = view->FindTensor("blk.0.ssm_conv1d.weight");
  ASSERT_NE(conv, nullptr);
  ASSERT_EQ(conv->dims, (std::vector<int64_t>{4, 2 * 32 + 64}));  // [K, C], q k v channels
  const std::vector<float> c = FloatsOf(*conv), hf = b.hf.at(p + "conv1d.weight");
  EXPECT_EQ(std::vector<float>(c.begin(), c.begin() + 64 * 4),
            std::vector<float>(hf.begin(), hf.begin() + 64 * 4));
  // v channel 64 + 16 + i (tiled head 1 = key head 1's value head 0) is grouped head 2's.
  EXPECT_EQ(c[(64 + 16) * 4], hf[(64 + 32) * 4]);
}

TEST_P(HfQwen35Test, FolderGivesTheGgufLogitsBitForBit) {
  const Built& b = BuiltOf(GetParam());
  auto gguf = testing::LoadPathOrDie(b.gguf);
  auto folder = testing::LoadPathOrDie(b.folder);
  ASSERT_TRUE(gguf && folder);
  EXPECT_EQ(folder->config().arch, GetParam().arch());
  EXPECT_EQ(folder->config().n_layers, 8);
  testing::ExpectSameBits(testing::AllPositionLogits(*folder, kTokens),
                          testing::AllPositionLogits(*gguf, kTokens));
}

TEST_P(HfQwen35Test, ConvertedFolderIsTheGguf) {
  const Built& b = BuiltOf(GetParam());
  const std::string out = testing::TempDir() + "/hf-qwen35-" + GetParam().name + ".gguf";
  const std::string args = "convert -m '" + b.folder + "' -o '" + out + "' --type f32";
  std::string printed, errors;
  ASSERT_EQ(testing::RunKvserve(args, &printed, &errors), 0) << args << ": " << errors;
  auto converted = GgufFile::Open(out);
  auto file = GgufFile::Open(b.gguf);
  ASSERT_TRUE(converted.ok() && file.ok()) << converted.message();
  testing::ExpectSameTensors(*converted, *file);
  testing::ExpectSameArchKeys(*converted, *file, GetParam().arch());
  fs::remove(out);
}

INSTANTIATE_TEST_SUITE_P(Layouts, HfQwen35Test, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

// Qwen3.5-0.8B's text config as remembered (not checked against the file here): 24 layers, one
// MTP layer, heads of 256 a quarter turned, default M-RoPE sections.
ordered_json SmallConfig() {
  ordered_json types = ordered_json::array();
  for (int i = 0; i < 24; ++i) types.push_back(i % 4 == 3 ? "full_attention" : "linear_attention");
  return {{"architectures", {"Qwen3_5ForCausalLM"}},
          {"hidden_size", 1024},
          {"num_hidden_layers", 24},
          {"num_attention_heads", 8},
          {"num_key_value_heads", 2},
          {"head_dim", 256},
          {"intermediate_size", 3584},
          {"max_position_embeddings", 262144},
          {"rms_norm_eps", 1e-6},
          {"hidden_act", "silu"},
          {"attn_output_gate", true},
          {"full_attention_interval", 4},
          {"layer_types", types},
          {"linear_conv_kernel_dim", 4},
          {"linear_key_head_dim", 128},
          {"linear_value_head_dim", 128},
          {"linear_num_key_heads", 16},
          {"linear_num_value_heads", 16},
          {"mtp_num_hidden_layers", 1},
          {"tie_word_embeddings", true},
          {"vocab_size", 248320},
          {"rope_parameters",
           {{"mrope_interleaved", true},
            {"rope_type", "default"},
            {"rope_theta", 1e7},
            {"partial_rotary_factor", 0.25}}}};
}

TEST(HfQwen35Keys, RealSizeKeysAsTheConverterWritesThem) {
  auto c = ParseHfConfig(SmallConfig().dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.message();
  GgufWriter w;
  AddHfHyperParameters(*c, "qwen3.5-0.8b", w);
  const std::vector<uint8_t> image = w.Serialize();
  auto file = GgufFile::Parse(image.data(), image.size(), "qwen35");
  ASSERT_TRUE(file.ok()) << file.message();
  auto u = [&](const char* key) { return file->GetUint(std::string("qwen35.") + key).value(); };
  EXPECT_EQ(u("block_count"), 25u);  // the MTP layer after the 24
  EXPECT_EQ(u("nextn_predict_layers"), 1u);
  EXPECT_EQ(u("rope.dimension_count"), 64u);
  EXPECT_EQ(u("attention.key_length"), 256u);
  EXPECT_EQ(u("ssm.state_size"), 128u);
  EXPECT_EQ(u("ssm.inner_size"), 2048u);
  EXPECT_EQ(u("ssm.group_count"), 16u);
  EXPECT_EQ(u("ssm.time_step_rank"), 16u);
  EXPECT_EQ(u("ssm.conv_kernel"), 4u);
  EXPECT_EQ(u("full_attention_interval"), 4u);
  EXPECT_EQ(u("context_length"), 262144u);
  EXPECT_EQ(file->GetFloat("qwen35.rope.freq_base").value(), 1e7);
  EXPECT_EQ(file->GetIntArray("qwen35.rope.dimension_sections").value(),
            (std::vector<int64_t>{11, 11, 10, 0}));  // the mixin's default
  // Tied: lm_head is skipped; MTP tensors go after the stack; the gated norm is not + 1.
  EXPECT_EQ(MapHfTensor("lm_head.weight", *c)->name, "");
  EXPECT_EQ(MapHfTensor("mtp.layers.0.self_attn.q_norm.weight", *c)->name,
            "blk.24.attn_q_norm.weight");
  EXPECT_EQ(MapHfTensor("mtp.fc.weight", *c)->name, "blk.24.nextn.eh_proj.weight");
  EXPECT_EQ(MapHfTensor("model.mtp.norm.weight", *c)->transform, HfTransform::kPlusOne);
  EXPECT_EQ(MapHfTensor("mtp.pre_fc_norm_hidden.weight", *c)->transform, HfTransform::kPlusOne);
  EXPECT_EQ(MapHfTensor("mtp.fc.weight", *c)->transform, HfTransform::kNone);
  EXPECT_EQ(MapHfTensor("model.layers.0.linear_attn.norm.weight", *c)->transform,
            HfTransform::kNone);
  EXPECT_EQ(MapHfTensor("model.layers.0.linear_attn.A_log", *c)->tiling.n_groups, 0);  // 16 = 16
  EXPECT_EQ(MapHfTensor("model.visual.blocks.0.norm1.weight", *c)->name, "");
  auto extra = MapHfTensor("mtp.layers.1.mlp.up_proj.weight", *c);
  EXPECT_THAT(extra.message(), HasSubstr("'mtp.layers.1.mlp.up_proj.weight'"));
  auto fused = MapHfTensor("model.layers.0.linear_attn.in_proj_qkvz.weight", *c);
  EXPECT_THAT(fused.message(), HasSubstr("'model.layers.0.linear_attn.in_proj_qkvz.weight'"));
  ordered_json j = SmallConfig();
  j.erase("mtp_num_hidden_layers");
  auto no_mtp = ParseHfConfig(j.dump(), "config.json");
  ASSERT_TRUE(no_mtp.ok());
  EXPECT_FALSE(MapHfTensor("mtp.fc.weight", *no_mtp).ok());
}

// What kvserve's qwen35 does not compute, and what the converter requires, refused by key.
TEST(HfQwen35Keys, ConfigsKvserveCannotComputeAreRefusedByKey) {
  auto error = [](const ordered_json& j) {
    auto c = ParseHfConfig(j.dump(), "config.json");
    EXPECT_FALSE(c.ok()) << j.dump();
    return c.ok() ? std::string() : c.message();
  };
  const ordered_json base = SmallConfig();
  ordered_json j = base;
  j["rope_parameters"]["rope_type"] = "yarn";
  EXPECT_THAT(error(j), HasSubstr("'rope_parameters.rope_type' = \"yarn\" is not supported"));
  j = base;
  j["attn_output_gate"] = false;
  EXPECT_THAT(error(j), HasSubstr("'attn_output_gate' = false is not supported"));
  j = base;
  j["linear_value_head_dim"] = 64;
  EXPECT_THAT(error(j), HasSubstr("'linear_value_head_dim' = 64 is not supported"));
  j = base;
  j["linear_num_value_heads"] = 24;
  EXPECT_THAT(error(j), HasSubstr("'linear_num_value_heads' = 24 is not supported"));
  j = base;
  j["layer_types"][3] = "linear_attention";
  EXPECT_THAT(error(j), HasSubstr("'layer_types'"));
  EXPECT_THAT(error(j), HasSubstr("layer 3 is 'linear_attention'"));
  j = base;
  j["full_attention_interval"] = 3;
  EXPECT_THAT(error(j), HasSubstr("layer 2 is 'linear_attention'"));
  j = base;
  j["rope_parameters"]["partial_rotary_factor"] = 0.002;  // int(0.512) = 0 dims
  EXPECT_THAT(error(j), HasSubstr("'rope_parameters.partial_rotary_factor' = 0.002"));
  j = base;
  j["rope_parameters"]["mrope_section"] = {0, 0, 4};
  EXPECT_THAT(error(j), HasSubstr("'rope_parameters.mrope_section' = [0,0,4] is not supported"));
  j = base;
  j["hidden_act"] = "gelu";
  EXPECT_THAT(error(j), HasSubstr("'hidden_act' = \"gelu\""));
  j = base;
  j["attention_bias"] = true;
  EXPECT_THAT(error(j), HasSubstr("'attention_bias' = true"));
  j = base;
  j.erase("linear_num_key_heads");
  EXPECT_THAT(error(j), HasSubstr("'linear_num_key_heads'"));
  j = base;
  j.erase("rms_norm_eps");
  EXPECT_THAT(error(j), HasSubstr("'rms_norm_eps'"));
}

// Qwen3.5-35B-A3B's text config as transformers' Qwen3_5MoeTextConfig defaults it (40 layers,
// 16 heads of 256 over 2 KV heads, delta nets of 16 key and 32 value heads of 128, 256 experts of
// 512, 8 used, a shared expert of 512), not checked against the released file; no
// intermediate_size (that class has none), mtp_num_hidden_layers 1 as in the dense one.
ordered_json MoeConfig() {
  ordered_json j = SmallConfig();
  ordered_json types = ordered_json::array();
  for (int i = 0; i < 40; ++i) types.push_back(i % 4 == 3 ? "full_attention" : "linear_attention");
  j["architectures"] = {"Qwen3_5MoeForCausalLM"};
  j["hidden_size"] = 2048;
  j["num_hidden_layers"] = 40;
  j["layer_types"] = types;
  j["num_attention_heads"] = 16;
  j["linear_num_value_heads"] = 32;
  j.erase("intermediate_size");
  j["num_experts"] = 256;
  j["num_experts_per_tok"] = 8;
  j["moe_intermediate_size"] = 512;
  j["shared_expert_intermediate_size"] = 512;
  j["router_aux_loss_coef"] = 0.001;
  j["tie_word_embeddings"] = false;
  return j;
}

TEST(HfQwen35MoeKeys, RealSizeKeysAndNamesAsTheConverterWritesThem) {
  auto c = ParseHfConfig(MoeConfig().dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.message();
  GgufWriter w;
  AddHfHyperParameters(*c, "qwen3.5-35b-a3b", w);
  const std::vector<uint8_t> image = w.Serialize();
  auto file = GgufFile::Parse(image.data(), image.size(), "qwen35moe");
  ASSERT_TRUE(file.ok()) << file.message();
  EXPECT_EQ(file->GetString("general.architecture").value(), "qwen35moe");
  auto u = [&](const char* key) { return file->GetUint(std::string("qwen35moe.") + key).value(); };
  EXPECT_EQ(u("block_count"), 41u);
  EXPECT_EQ(u("expert_count"), 256u);
  EXPECT_EQ(u("expert_used_count"), 8u);
  EXPECT_EQ(u("expert_feed_forward_length"), 512u);
  EXPECT_EQ(u("expert_shared_feed_forward_length"), 512u);
  // No dense width: the converter writes feed_forward_length only from intermediate_size (and
  // kvserve's loader takes a mixture without it, Qwen35Moe.LoadsWithoutTheDenseFeedForwardWidth).
  EXPECT_EQ(file->Find("qwen35moe.feed_forward_length"), nullptr);
  EXPECT_EQ(u("ssm.time_step_rank"), 32u);
  EXPECT_EQ(u("ssm.inner_size"), 4096u);
  auto expert = MapHfTensor("model.language_model.layers.2.mlp.experts.255.down_proj.weight", *c);
  ASSERT_TRUE(expert.ok()) << expert.message();
  EXPECT_EQ(expert->name, "blk.2.ffn_down_exps.weight");
  EXPECT_EQ(expert->expert, 255);
  auto mtp = MapHfTensor("mtp.layers.0.mlp.experts.7.up_proj.weight", *c);
  ASSERT_TRUE(mtp.ok()) << mtp.message();
  EXPECT_EQ(mtp->name, "blk.40.ffn_up_exps.weight");
  EXPECT_EQ(mtp->expert, 7);
  auto fused = MapHfTensor("model.layers.3.mlp.experts.gate_up_proj", *c);
  ASSERT_TRUE(fused.ok()) << fused.message();
  EXPECT_EQ(fused->name, "blk.3.ffn_gate_exps.weight");
  EXPECT_EQ(fused->transform, HfTransform::kSplitGateUp);
  EXPECT_EQ(MapHfTensor("model.layers.3.mlp.experts.down_proj", *c)->name,
            "blk.3.ffn_down_exps.weight");
  EXPECT_EQ(MapHfTensor("model.layers.0.mlp.gate.weight", *c)->name, "blk.0.ffn_gate_inp.weight");
  EXPECT_EQ(MapHfTensor("model.layers.0.mlp.shared_expert.down_proj.weight", *c)->name,
            "blk.0.ffn_down_shexp.weight");
  auto gate = MapHfTensor("model.layers.0.mlp.shared_expert_gate.weight", *c);
  EXPECT_EQ(gate->name, "blk.0.ffn_gate_inp_shexp.weight");
  EXPECT_EQ(gate->transform, HfTransform::kNone);  // [1, n_embd] kept: GGML [n_embd, 1]
  EXPECT_EQ(MapHfTensor("model.layers.0.linear_attn.A_log", *c)->tiling.per_group, 2);
  auto beyond = MapHfTensor("model.layers.0.mlp.experts.256.gate_proj.weight", *c);
  EXPECT_THAT(beyond.message(), HasSubstr("'model.layers.0.mlp.experts.256.gate_proj.weight'"));
  auto dense = MapHfTensor("model.layers.0.mlp.up_proj.weight", *c);
  EXPECT_THAT(dense.message(), HasSubstr("'model.layers.0.mlp.up_proj.weight'"));
  auto small = ParseHfConfig(SmallConfig().dump(), "config.json");  // the dense has no router
  ASSERT_TRUE(small.ok());
  EXPECT_FALSE(MapHfTensor("model.layers.0.mlp.gate.weight", *small).ok());
}

TEST(HfQwen35MoeKeys, ConfigsKvserveCannotComputeAreRefusedByKey) {
  auto error = [](const ordered_json& j) {
    auto c = ParseHfConfig(j.dump(), "config.json");
    EXPECT_FALSE(c.ok()) << j.dump();
    return c.ok() ? std::string() : c.message();
  };
  const ordered_json base = MoeConfig();
  for (const char* key : {"num_experts", "num_experts_per_tok", "moe_intermediate_size",
                          "shared_expert_intermediate_size"}) {
    ordered_json j = base;
    j.erase(key);
    EXPECT_THAT(error(j), HasSubstr(std::string("missing required key '") + key + "'"));
  }
  ordered_json j = base;
  j["num_experts_per_tok"] = 300;
  EXPECT_THAT(error(j), HasSubstr("'num_experts_per_tok' = 300"));
  j = base;
  j["num_experts"] = 2048;
  EXPECT_THAT(error(j), HasSubstr("'num_experts' = 2048"));
  j = base;
  j["scoring_func"] = "sigmoid";
  EXPECT_THAT(error(j), HasSubstr("'scoring_func' = \"sigmoid\" is not supported"));
  j = base;
  j["n_group"] = 8;
  EXPECT_THAT(error(j), HasSubstr("'n_group' = 8 is not supported"));
  j = base;
  j["linear_num_value_heads"] = 24;  // the dense model's rules hold
  EXPECT_THAT(error(j), HasSubstr("'linear_num_value_heads' = 24 is not supported"));
}

class RemoveFolders : public ::testing::Environment {
 public:
  void TearDown() override {
    for (const Qwen35Case& c : kCases) {
      fs::remove_all(testing::TempDir() + "/hf-qwen35-" + c.name);
      fs::remove(testing::TempDir() + "/hf-qwen35-" + c.name + "-expected.gguf");
    }
  }
};
const auto* const kRemoveFolders = ::testing::AddGlobalTestEnvironment(new RemoveFolders);

}  // namespace
}  // namespace kvserve
