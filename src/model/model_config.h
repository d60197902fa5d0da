// Hyper-parameters of a decoder-only transformer, read from GGUF metadata ("<arch>.*" keys).
#pragma once

#include <cstdint>
#include <string>

#include "io/gguf_reader.h"
#include "util/status.h"

namespace kvserve {

enum class Architecture { kLlama, kGpt2 };
const char* ArchitectureName(Architecture arch);
// The architectures kvserve can run, for error messages: "llama, gpt2".
const char* SupportedArchitectures();

struct ModelConfig {
  Architecture arch = Architecture::kLlama;
  std::string name;  // general.name, if present
  int n_vocab = 0;
  int n_embd = 0;
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int n_ff = 0;
  int n_ctx_train = 0;
  float norm_eps = 1e-5f;
  float rope_freq_base = 10000.0f;  // llama only
  int rope_dims = 0;                // llama only
  bool tied_output = false;         // output matrix shares the token embedding

  static Result<ModelConfig> FromGguf(const GgufFile& file);
  // Bytes of K and V per token of context: 2 × layers × kv_heads × head_dim × bytes per element.
  uint64_t KvBytesPerToken(uint64_t bytes_per_element) const;
};

}  // namespace kvserve
