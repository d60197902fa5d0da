// `kvserve info MODEL`: what a model file holds and what its KV cache costs.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/cli_backend.h"
#include "cli/commands.h"
#include "kv/kv_format.h"
#include "kv/kv_spec.h"
#include "model/hf_folder.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace kvserve {

FlagTable InfoFlagTable() {
  return {.usage = "info MODEL",
          .groups = {{"info",
                      {{.name = "--model",
                        .alias = "-m",
                        .value_name = "PATH",
                        .help = "GGUF file or Hugging Face folder, instead of MODEL"},
                       BackendFlag(),
                       DeviceFlag()}}}};
}

namespace {

std::string HumanBytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024.0 && unit < 4) {
    bytes /= 1024.0;
    ++unit;
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f %s", bytes, units[unit]);
  return buf;
}

// The file or folder, and the hyper-parameters.
void PrintShape(const std::string& path, const Model& model) {
  const GgufFile& file = model.file();
  const ModelConfig& c = model.config();
  if (HfFolder::IsFolder(path)) {
    std::printf("folder:        %s (Hugging Face: config.json + safetensors, %zu tensors)\n",
                path.c_str(), file.tensors().size());
  } else {
    std::printf("file:          %s (%s, GGUF v%u, %zu tensors)\n", path.c_str(),
                HumanBytes(static_cast<double>(file.file_size())).c_str(), file.version(),
                file.tensors().size());
  }
  std::printf("architecture:  %s%s%s\n", c.arch.c_str(),
              c.name.empty() ? "" : "  name: ", c.name.c_str());
  std::printf("vocab:         %d\n", c.n_vocab);
  std::printf("embedding:     %d\n", c.n_embd);
  std::printf("layers:        %d\n", c.n_layers);
  std::printf("heads:         %d (kv heads %d, head dim %d)\n", c.n_heads, c.n_kv_heads,
              c.head_dim);
  std::printf("feed-forward:  %d\n", c.n_ff);
  std::printf("context:       %d\n", c.n_ctx_train);
  std::printf("norm eps:      %g\n", c.norm_eps);
  if (c.arch == "llama") {
    std::printf("rope:          base %g, %d dims\n", c.rope_freq_base, c.rope_dims);
  }
  if (model.encoder_only()) {
    std::printf("output:        embeddings only (no decoder: kvserve embed, /v1/embeddings)\n");
  } else {
    std::printf("output:        %s\n",
                c.tied_output ? "tied to token embedding" : "separate matrix");
  }
}

// tokenizer.ggml.model and .pre as kvserve reads them, the vocabulary size and BOS/EOS.
void PrintTokenizer(const GgufFile& file) {
  if (file.Find("tokenizer.ggml.model") == nullptr) {
    std::printf("tokenizer:     none (no tokenizer.ggml.model)\n");
    return;
  }
  auto tokenizer = Tokenizer::FromGguf(file);
  if (!tokenizer.ok()) {
    std::printf("tokenizer:     not readable: %s\n", tokenizer.message().c_str());
    return;
  }
  const Tokenizer& t = **tokenizer;
  const auto name = [&](int32_t id) {
    return id < 0 ? std::string("none")
                  : t.vocab().token(id).text + " (" + std::to_string(id) + ")";
  };
  const std::string model(t.model_name());
  const std::string pre = model == "llama" ? "" : " (pre-tokenizer " + t.vocab().pre() + ")";
  std::printf("tokenizer:     %s%s, %d tokens, BOS %s%s, EOS %s%s\n", model.c_str(), pre.c_str(),
              t.n_vocab(), name(t.bos()).c_str(), t.add_bos() ? " added" : "",
              name(t.eos()).c_str(), t.add_eos() ? " added" : "");
}

// Every tensor, the parameter count, and per tensor type (in order of first appearance) its
// count, bytes and bits per weight.
void PrintTensors(const GgufFile& file) {
  uint64_t n_params = 0;
  std::printf("tensors:\n");
  for (const TensorInfo& t : file.tensors()) {
    n_params += t.n_elements;
    std::printf("  %-28s %-5s %-22s %s\n", t.name.c_str(), GgmlTypeName(t.type),
                t.ShapeString().c_str(), HumanBytes(static_cast<double>(t.n_bytes)).c_str());
  }
  std::printf("parameters:    %llu (%.2f M)\n", static_cast<unsigned long long>(n_params),
              n_params / 1e6);
  struct TypeTotal {
    GgmlType type;
    int count = 0;
    uint64_t bytes = 0, elements = 0;
  };
  std::vector<TypeTotal> totals;
  uint64_t all_bytes = 0;
  for (const TensorInfo& t : file.tensors()) {
    auto it = std::find_if(totals.begin(), totals.end(),
                           [&](const TypeTotal& total) { return total.type == t.type; });
    if (it == totals.end()) it = totals.insert(totals.end(), TypeTotal{.type = t.type});
    ++it->count;
    it->bytes += t.n_bytes;
    it->elements += t.n_elements;
    all_bytes += t.n_bytes;
  }
  std::printf("tensor types:\n");
  for (const TypeTotal& total : totals) {
    std::printf("  %-7s %4d tensors  %10s  %.2f bits/weight\n", GgmlTypeName(total.type),
                total.count, HumanBytes(static_cast<double>(total.bytes)).c_str(),
                8.0 * static_cast<double>(total.bytes) / static_cast<double>(total.elements));
  }
  std::printf(
      "bits/weight:   %.2f over all tensors\n",
      n_params == 0 ? 0.0 : 8.0 * static_cast<double>(all_bytes) / static_cast<double>(n_params));
}

// "0-3,5,7-9": runs of consecutive layers.
std::string LayerRuns(const std::vector<int>& layers) {
  std::string runs;
  for (size_t i = 0; i < layers.size(); ++i) {
    size_t last = i;
    while (last + 1 < layers.size() && layers[last + 1] == layers[last] + 1) ++last;
    runs += (runs.empty() ? "" : ",") + std::to_string(layers[i]);
    if (last > i) runs += "-" + std::to_string(layers[last]);
    i = last;
  }
  return runs;
}

// The KV layer groups (the order of a per-group --kv-type) and each type's cost per token.
void PrintKvCache(const KvSpec& spec, int n_ctx_train) {
  if (spec.groups.empty()) {
    std::printf(
        "KV cache:      none of its own (a drafter reads its target's; an encoder-only "
        "model keeps none)\n");
    return;
  }
  for (size_t g = 0; g < spec.groups.size(); ++g) {
    const KvGroupSpec& group = spec.groups[g];
    const std::string kind = group.kind->Describe();
    if (!group.kind->per_position()) {
      // One state per layer and sequence; each full block keeps one as a prefix checkpoint.
      const uint64_t bytes = group.BlockBytes(KvType::kF32, 1);
      std::printf(
          "KV group %zu:    %s, layers %s, %s per sequence (f32; one more per cached "
          "block checkpoint)\n",
          g, kind.c_str(), LayerRuns(group.layers).c_str(),
          HumanBytes(static_cast<double>(bytes)).c_str());
      continue;
    }
    std::printf("KV group %zu:    %s, layers %s, %d kv heads x %d, %llu bytes/%s in f16\n", g,
                kind.c_str(), LayerRuns(group.layers).c_str(), group.n_kv_heads, group.head_dim,
                static_cast<unsigned long long>(group.BlockBytes(KvType::kF16, 1)),
                group.kind->PositionNoun().c_str());
  }
  // Layers without a cache of their own (Gemma 4's shared KV), by the layer whose cache they read.
  std::map<int, std::vector<int>> readers;
  for (const auto& [layer, source] : spec.readers) readers[source].push_back(layer);
  for (const auto& [source, layers] : readers) {
    std::printf("KV shared:     layers %s read layer %d's cache (no blocks of their own)\n",
                LayerRuns(layers).c_str(), source);
  }
  const uint64_t f16_per_token = spec.BytesPerToken(KvType::kF16);
  for (KvType type : kAllKvTypes) {
    const uint64_t per_token = spec.BytesPerToken(type);
    const int pad = 5 - static_cast<int>(std::strlen(KvTypeName(type)));
    std::printf("KV cache %s:%*s%llu bytes/token, %s at context %d, %.3f x f16%s\n",
                KvTypeName(type), pad, "", static_cast<unsigned long long>(per_token),
                HumanBytes(static_cast<double>(per_token) * n_ctx_train).c_str(), n_ctx_train,
                static_cast<double>(per_token) / static_cast<double>(f16_per_token),
                type == KvType::kQ4_0 ? " (lossy)" : "");
  }
  // Window groups give back the blocks that slid out of the window (docs/kv-cache.md).
  const bool windowed = std::any_of(spec.groups.begin(), spec.groups.end(),
                                    [](const auto& g) { return !g.kind->keeps_every_block(); });
  if (windowed) {
    constexpr int kBlockSize = 16;  // the engine's default
    const uint64_t held = spec.BytesHeld(KvType::kF16, n_ctx_train, kBlockSize);
    std::printf(
        "KV held f16:   %s by one sequence at context %d, %.1f bytes/token (window "
        "groups keep their window, recurrent groups their state, blocks of %d)\n",
        HumanBytes(static_cast<double>(held)).c_str(), n_ctx_train,
        static_cast<double>(held) / n_ctx_train, kBlockSize);
  }
}

}  // namespace

int RunInfo(const std::vector<std::string>& argv) {
  auto args = Args::Parse(argv, InfoFlagTable());
  if (!args.ok()) {
    std::fprintf(stderr, "kvserve info: %s\n", args.message().c_str());
    return 2;
  }
  std::string path = args->GetOr("--model", "");
  if (path.empty() && !args->positional().empty()) path = args->positional()[0];
  if (path.empty()) {
    std::fprintf(stderr, "kvserve info: usage: kvserve info MODEL\n");
    return 2;
  }
  auto backend = CliBackend(*args);
  if (!backend.ok()) {
    std::fprintf(stderr, "kvserve info: %s\n", backend.message().c_str());
    return 2;
  }
  auto model = LoadModel(path, **backend);
  if (!model.ok()) {
    std::fprintf(stderr, "kvserve info: %s\n", model.message().c_str());
    return 1;
  }
  PrintShape(path, **model);
  PrintTokenizer((*model)->file());
  PrintTensors((*model)->file());
  PrintKvCache((*model)->kv_spec(), (*model)->config().n_ctx_train);
  if ((*model)->nextn_drafter() != nullptr) {
    std::printf(
        "MTP:           layer %d drafts with --spec mtp (its cache is the attention group's "
        "last layer)\n",
        (*model)->config().n_layers);
  }
  return 0;
}
}  // namespace kvserve
