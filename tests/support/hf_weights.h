// Writes a GGUF model's f32 tensors as a Hugging Face folder's safetensors, for tests that build
// folders of each family from the GGUF fixtures.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/gguf_reader.h"

namespace kvserve::testing {

// Row-major bytes of a GGUF tensor in HF layout: [n_out, n_in] as stored, or transposed to the
// Conv1D [n_in, n_out], or with its head rows moved back to rotate-half order.
enum class Layout { kSame, kConv1D, kRotateHalf };

std::vector<uint8_t> ToHf(const TensorInfo& t, Layout layout, int n_heads,
                          std::vector<int64_t>* shape);

struct NameRule {
  const char* gguf_suffix;
  const char* hf_suffix;
  Layout layout;
};

// Llama's names (LlamaForCausalLM and the families that kept them: Granite, ...): embeddings,
// norms, q/k/v/o (q and k rows in rotate-half order), gate/up/down, lm_head.
std::vector<NameRule> LlamaHfNameRules();

// Writes the tensors of `gguf` under HF names; `rules` map "blk.N.<suffix>" and global names.
// With two shards, layers go to the second file and the index names each tensor's file.
void WriteWeights(const GgufFile& gguf, const std::string& dir, const std::string& layer_prefix,
                  const std::vector<NameRule>& rules, int n_heads, int n_kv_heads, bool shards);

// tokenizer.json (from the GGUF's SentencePiece vocabulary) and a tokenizer_config.json with
// <s>, </s>, <unk>, add_bos_token and a trivial chat template, as a SentencePiece folder has.
void WriteSpmTokenizerFiles(const GgufFile& gguf, const std::string& dir);

}  // namespace kvserve::testing
