// An architecture is one file, src/model/arch/<name>.cc, that defines its entry with
// KVSERVE_ARCHITECTURE(<name>): the GGUF general.architecture it loads, its loader (which builds
// the forward from the shared self-loading blocks: attention_block.h, gated_feed_forward.h,
// feed_forward.h, rotary_embedding.h, decoder_blocks.h, gemma_decoder.h), and
// the Hugging Face classes it reads, each with its config.json keys, its tensor-name map and the
// GGUF metadata it writes (the shared parts in hf_families.h), and optionally its recipe for
// random-weight files and named shapes (synthetic_model.h). The build lists every file of
// src/model/arch/ (CMakeLists.txt writes generated/architecture_list.cc), so adding an
// architecture is adding its file and its test; nothing else names it.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "io/gguf_reader.h"
#include "io/gguf_writer.h"
#include "io/hf_config.h"
#include "kernels/backend.h"
#include "model/model.h"
#include "model/model_config.h"
#include "model/synthetic_model.h"
#include "util/status.h"

namespace kvserve {

enum class HfTransform {
  kNone,
  kTranspose,     // GPT-2 Conv1D [in, out] -> [out, in] rows
  kPermuteHeads,  // llama q/k rows: rotate-half -> interleaved pairs, per head
  kPlusOne,       // Gemma RMSNorm weight w -> 1 + w (in f16 for f16 data, else in f32)
  kSplitGateUp,   // fused experts [n_expert, 2 n_ff, n_embd] -> ffn_gate_exps and ffn_up_exps
  // gpt-oss's fused experts [n_expert, n_embd, 2 n_ff] with gate and up columns interleaved
  // (gate 2j, up 2j + 1), transposed into ffn_gate_exps and ffn_up_exps ([n_expert, n_ff,
  // n_embd]); its bias [n_expert, 2 n_ff] split the same way into the two .bias tensors.
  kSplitInterleavedGateUp,
  kTransposeExperts,  // [n_expert, a, b] -> [n_expert, b, a] (gpt-oss's down_proj)
  // gpt-oss's MXFP4 checkpoints: U8 blocks [n_expert, rows, n_in / 32, 16] (element 2i in byte
  // i's low nibble, 2i + 1 in its high one) and their E8M0 scales [n_expert, rows, n_in / 32],
  // joined into GGML's MXFP4 blocks of tensor `name`.
  kMxfp4Blocks,
  kMxfp4Scales,
  // Mamba / Gated DeltaNet A_log -> ssm_a = -exp(A_log), kept in F32 (computed in f16 for f16
  // data, else in f32, as torch does after the converter widens BF16).
  kNegExp,
  // Size-1 dimensions dropped, as torch's squeeze(): the [channels, 1, kernel] conv1d weight is
  // GGML [kernel, channels] (ssm_conv1d, kept in F32).
  kSqueeze,
};

// llama.cpp's _reorder_v_heads (linear attention with fewer key heads than value heads): the
// checkpoint groups value heads by key head (key head g's j-th value head at g * per_group + j);
// llama.cpp's graph repeats key heads by tiling (value head h reads key head h % n_groups), so
// the converter moves that head to j * n_groups + g. Applied after the mapping's transform to
// rows (or, with `columns`, columns) [first, first + n_groups * per_group * head_size); q and k
// before `first` stay. n_groups 0: none.
struct HfHeadTiling {
  int n_groups = 0;      // key heads
  int per_group = 0;     // value heads per key head
  int head_size = 0;     // rows (columns) of one value head: its head_dim, or 1 (A_log, beta)
  int64_t first = 0;     // rows (columns) before the value heads: 2 x key_dim in qkv and conv1d
  bool columns = false;  // out_proj: the value heads are its input columns
};

// Where one safetensors tensor goes in the GGUF view of a Hugging Face folder.
struct HfMapping {
  std::string name;  // GGUF name; empty: the tensor is skipped
  HfTransform transform = HfTransform::kNone;
  int n_heads = 0;  // kPermuteHeads
  int expert = -1;  // >= 0: this expert's slice of the stacked 3-D tensor `name`
  // MXFP4 parts of ffn_gate_exps: the rows alternate between gate (even) and up (odd).
  bool interleaved_rows = false;
  HfHeadTiling tiling;  // value heads reordered after `transform` (Qwen3.5's linear attention)
};

// One Hugging Face class an architecture reads (Mistral's is llama's second).
struct HfClass {
  const char* architecture;  // "MistralForCausalLM", as config.json's "architectures" has it
  const char* model_type;    // "mistral": the class when "architectures" is absent
  // config.json's keys into `c` (the common ones, vocabulary and special tokens, are read
  // before); what kvserve cannot compute exactly is refused naming the key.
  Status (*read_config)(const HfConfigReader& r, HfConfig& c);
  // The GGUF name and transform of tensor `hf_name`, or an error naming the tensor.
  Result<HfMapping> (*map_tensor)(std::string_view hf_name, const HfConfig& c);
  // The GGUF metadata llama.cpp's converter writes for the class (general.* is written before).
  void (*write_metadata)(const HfConfig& c, GgufWriter& w);
};

using ModelLoader = Result<std::unique_ptr<Model>> (*)(GgufFile file, ModelConfig config,
                                                       const Backend& backend);

// The loader of an architecture whose model class loads itself: M(file, config, backend,
// extra...), then M::Load(), which reads the rest of the keys and every tensor.
template <typename M>
Result<std::unique_ptr<Model>> LoadModelOf(GgufFile file, ModelConfig config,
                                           const Backend& backend, auto&&... extra) {
  auto model = std::make_unique<M>(std::move(file), std::move(config), backend,
                                   std::forward<decltype(extra)>(extra)...);
  KVSERVE_RETURN_IF_ERROR(model->Load());
  return std::unique_ptr<Model>(std::move(model));
}

struct Architecture {
  const char* gguf_name;  // general.architecture
  ModelLoader load;
  std::vector<HfClass> hf_classes;  // empty: GGUF files only
  // Random-weight files of this architecture (`kvserve synth`); null: none.
  const SyntheticRecipe* synthetic = nullptr;
};

// Defines the entry of the architecture in src/model/arch/<stem>.cc:
//   KVSERVE_ARCHITECTURE(llama) { static const Architecture entry{...}; return entry; }
#define KVSERVE_ARCHITECTURE(stem)                           \
  const ::kvserve::Architecture& ArchitectureEntry_##stem(); \
  const ::kvserve::Architecture& ArchitectureEntry_##stem()

// Every architecture of the build, in file-name order.
std::span<const Architecture* const> Architectures();

// The architecture loading GGUF general.architecture `gguf_name`; nullptr when none does.
const Architecture* FindArchitecture(std::string_view gguf_name);

// The Hugging Face class named `architecture` (or, when that is empty, of `model_type`), and the
// architecture it belongs to; nullptr when no architecture reads it.
struct HfClassEntry {
  const Architecture* architecture = nullptr;
  const HfClass* hf_class = nullptr;
};
HfClassEntry FindHfClass(std::string_view architecture, std::string_view model_type);

// "LlamaForCausalLM, MistralForCausalLM, ...": the classes kvserve reads, for errors.
std::string SupportedHfClasses();

}  // namespace kvserve
