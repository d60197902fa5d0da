#include "support/hf_weights.h"

#include <cstring>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/safetensors_builder.h"
#include "support/spm_tokenizer_json.h"

namespace kvserve::testing {

using nlohmann::ordered_json;

std::vector<uint8_t> ToHf(const TensorInfo& t, Layout layout, int n_heads,
                          std::vector<int64_t>* shape) {
  EXPECT_EQ(t.type, GgmlType::kF32) << t.name;
  shape->assign(t.dims.rbegin(), t.dims.rend());
  std::vector<uint8_t> out(t.data, t.data + t.n_bytes);
  if (layout == Layout::kSame) return out;
  const int64_t n_in = t.dims[0], n_out = t.dims[1];
  const auto* in = reinterpret_cast<const float*>(t.data);
  auto* o = reinterpret_cast<float*>(out.data());
  if (layout == Layout::kConv1D) {
    *shape = {n_in, n_out};
    for (int64_t r = 0; r < n_out; ++r) {
      for (int64_t c = 0; c < n_in; ++c) o[c * n_out + r] = in[r * n_in + c];
    }
    return out;
  }
  // GGML row h*d + 2i + j came from HF row h*d + j*d/2 + i.
  const int64_t d = n_out / n_heads, half = d / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    for (int64_t i = 0; i < half; ++i) {
      for (int64_t j = 0; j < 2; ++j) {
        std::memcpy(o + (h * d + j * half + i) * n_in, in + (h * d + 2 * i + j) * n_in,
                    n_in * sizeof(float));
      }
    }
  }
  return out;
}

void WriteWeights(const GgufFile& gguf, const std::string& dir, const std::string& layer_prefix,
                  const std::vector<NameRule>& rules, int n_heads, int n_kv_heads, bool shards) {
  SafetensorsBuilder first, second;
  ordered_json weight_map = ordered_json::object();
  for (const TensorInfo& t : gguf.tensors()) {
    std::string hf_name;
    Layout layout = Layout::kSame;
    int heads = n_heads;
    for (const NameRule& rule : rules) {
      const std::string suffix = rule.gguf_suffix;
      if (t.name.rfind("blk.", 0) == 0) {
        const size_t dot = t.name.find('.', 4);
        if (t.name.substr(dot + 1) != suffix) continue;
        hf_name = layer_prefix + t.name.substr(4, dot - 4) + "." + rule.hf_suffix;
      } else if (t.name == suffix) {
        hf_name = rule.hf_suffix;
      } else {
        continue;
      }
      layout = rule.layout;
      if (suffix == "attn_k.weight") heads = n_kv_heads;
      break;
    }
    ASSERT_FALSE(hf_name.empty()) << "no HF name for " << t.name;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes = ToHf(t, layout, heads, &shape);
    const bool in_second = shards && t.name.rfind("blk.", 0) == 0;
    (in_second ? second : first).Add(hf_name, "F32", shape, std::move(bytes));
    weight_map[hf_name] =
        in_second ? "model-00002-of-00002.safetensors" : "model-00001-of-00002.safetensors";
  }
  if (!shards) {
    ASSERT_TRUE(first.WriteFile(dir + "/model.safetensors"));
    return;
  }
  ASSERT_TRUE(first.WriteFile(dir + "/model-00001-of-00002.safetensors"));
  ASSERT_TRUE(second.WriteFile(dir + "/model-00002-of-00002.safetensors"));
  ordered_json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}};
  ASSERT_TRUE(testing::WriteText(dir + "/model.safetensors.index.json", index.dump(2)));
}

void WriteSpmTokenizerFiles(const GgufFile& gguf, const std::string& dir) {
  EXPECT_TRUE(WriteText(dir + "/tokenizer.json", SpmTokenizerJson(gguf).dump()));
  const ordered_json tokenizer_config = {
      {"bos_token", "<s>"},    {"eos_token", "</s>"},    {"unk_token", "<unk>"},
      {"add_bos_token", true}, {"add_eos_token", false}, {"chat_template", "{{ messages }}"}};
  EXPECT_TRUE(WriteText(dir + "/tokenizer_config.json", tokenizer_config.dump(2)));
}

std::vector<NameRule> LlamaHfNameRules() {
  return {
      {"token_embd.weight", "model.embed_tokens.weight", Layout::kSame},
      {"output_norm.weight", "model.norm.weight", Layout::kSame},
      {"output.weight", "lm_head.weight", Layout::kSame},
      {"attn_norm.weight", "input_layernorm.weight", Layout::kSame},
      {"attn_q.weight", "self_attn.q_proj.weight", Layout::kRotateHalf},
      {"attn_k.weight", "self_attn.k_proj.weight", Layout::kRotateHalf},
      {"attn_v.weight", "self_attn.v_proj.weight", Layout::kSame},
      {"attn_output.weight", "self_attn.o_proj.weight", Layout::kSame},
      {"ffn_norm.weight", "post_attention_layernorm.weight", Layout::kSame},
      {"ffn_gate.weight", "mlp.gate_proj.weight", Layout::kSame},
      {"ffn_up.weight", "mlp.up_proj.weight", Layout::kSame},
      {"ffn_down.weight", "mlp.down_proj.weight", Layout::kSame},
  };
}

}  // namespace kvserve::testing
