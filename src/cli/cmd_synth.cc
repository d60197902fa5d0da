// `kvserve synth -o OUT.gguf (--preset NAME | --arch A --embd ... ) --type T [--vocab V] [--seed
// S]`: writes a random-weight model (model/synthetic_model.h) for benchmarks, readable by
// llama.cpp.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "cli/args.h"
#include "cli/commands.h"
#include "model/architecture.h"
#include "model/gguf_converter.h"
#include "model/synthetic_model.h"

namespace kvserve {

namespace {

constexpr const char* kUsage =
    "usage: kvserve synth -o OUT.gguf (--preset NAME | --arch ARCH --embd N "
    "--layers N --heads N [--kv-heads N] --ff N --ctx N [--experts N --experts-used K] "
    "[--head-dim N] [--window N] [--target-embd N]) --type "
    "f32|f16|bf16|q8_0|q4_0|q4_1|q5_0|q5_1|iq4_nl|mxfp4|q2_k..q6_k [--expert-type TYPE] "
    "[--vocab VOCAB.gguf] "
    "[--vocab-size N] [--seed S] [--threads N] [--norm-eps E] [--rope-base B] [--tied-output] "
    "[--name NAME]";

int Fail(const std::string& message, int code) {
  std::fprintf(stderr, "kvserve synth: %s\n", message.c_str());
  return code;
}

// shared/models/NAME: from $KVSERVE_SHARED, else from the first folder above the binary that
// holds shared/models/NAME (the binary lives in a build folder of a checkout beside shared/).
Result<std::string> FindSharedModel(const std::string& name) {
  if (const char* env = std::getenv("KVSERVE_SHARED")) {
    return std::string(env) + "/models/" + name;
  }
  std::error_code error;
  std::filesystem::path dir = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) {
    for (dir = dir.parent_path(); !dir.empty(); dir = dir.parent_path()) {
      const std::filesystem::path candidate = dir / "shared" / "models" / name;
      if (std::filesystem::exists(candidate, error)) return candidate.string();
      if (dir == dir.root_path()) break;
    }
  }
  return Status::InvalidArgument(
      "cannot find the default vocabulary " + name +
      " (looked in $KVSERVE_SHARED/models and shared/models above the binary); "
      "pass --vocab VOCAB.gguf");
}

// Reads an int flag into `out` when present, checking it fits an int.
Status ReadIntFlag(const Args& args, const std::string& flag, int* out) {
  if (!args.Has(flag)) return Status::Ok();
  auto value = args.GetInt(flag, 0);
  if (!value.ok()) return value.status();
  if (*value < 1 || *value > (1 << 24)) {
    return Status::InvalidArgument("flag " + flag + ": " + std::to_string(*value) +
                                   " is out of range");
  }
  *out = static_cast<int>(*value);
  return Status::Ok();
}

Result<SyntheticShape> ReadShape(const Args& args) {
  SyntheticShape shape;
  const std::string arch = args.GetOr("--arch", "");
  if (args.Has("--preset")) {
    auto preset = SyntheticPreset(*args.Get("--preset"));
    if (!preset.ok()) return Status::InvalidArgument("flag --preset: " + preset.message());
    shape = *preset;
    if (!arch.empty() && arch != shape.arch) {
      return Status::InvalidArgument("flag --arch: '" + arch + "' contradicts --preset " +
                                     *args.Get("--preset") + " (" + shape.arch + ")");
    }
  } else {
    if (arch.empty()) {
      return Status::InvalidArgument("missing --preset NAME or --arch " +
                                     SyntheticArchitectureNames());
    }
    const Architecture* entry = FindArchitecture(arch);
    if (entry == nullptr || entry->synthetic == nullptr) {
      return Status::InvalidArgument("flag --arch: '" + arch + "' is not one of " +
                                     SyntheticArchitectureNames());
    }
    shape.arch = arch;
    if (entry->synthetic->experts) {
      for (const char* flag : {"--experts", "--experts-used"}) {
        if (!args.Has(flag)) return Status::InvalidArgument(std::string("missing ") + flag);
      }
    }
    for (const char* flag : {"--embd", "--layers", "--heads", "--ff", "--ctx"}) {
      if (!args.Has(flag))
        return Status::InvalidArgument(std::string("missing ") + flag + " (or --preset)");
    }
  }
  KVSERVE_RETURN_IF_ERROR(ReadIntFlag(args, "--embd", &shape.n_embd));
  KVSERVE_RETURN_IF_ERROR(ReadIntFlag(args, "--layers", &shape.n_layers));
  KVSERVE_RETURN_IF_ERROR(ReadIntFlag(args, "--heads", &shape.n_heads));
  if (!args.Has("--preset")) shape.n_kv_heads = shape.n_heads;
  KVSERVE_RETURN_IF_ERROR(ReadIntFlag(args, "--kv-heads", &shape.n_kv_heads));
  KVSERVE_RETURN_IF_ERROR(ReadIntFlag(args, "--ff", &shape.n_ff));
  KVSERVE_RETURN_IF_ERROR(ReadIntFlag(args, "--ctx", &shape.n_ctx));
  KVSERVE_RETURN_IF_ERROR(ReadIntFlag(args, "--experts", &shape.n_expert));
  KVSERVE_RETURN_IF_ERROR(ReadIntFlag(args, "--experts-used", &shape.n_expert_used));
  KVSERVE_RETURN_IF_ERROR(ReadIntFlag(args, "--head-dim", &shape.head_dim));
  KVSERVE_RETURN_IF_ERROR(ReadIntFlag(args, "--window", &shape.window));
  KVSERVE_RETURN_IF_ERROR(ReadIntFlag(args, "--target-embd", &shape.n_embd_target));
  auto eps = args.GetDouble("--norm-eps", shape.norm_eps);
  if (!eps.ok()) return eps.status();
  shape.norm_eps = static_cast<float>(*eps);
  auto base = args.GetDouble("--rope-base", shape.rope_freq_base);
  if (!base.ok()) return base.status();
  shape.rope_freq_base = static_cast<float>(*base);
  if (args.Has("--tied-output")) shape.tied_output = true;
  return shape;
}

}  // namespace

FlagTable SynthFlagTable() {
  auto dimension = [](const char* name, const char* help) {
    return Flag{.name = name, .value_name = "N", .help = help};
  };
  return {.usage = "synth -o OUT.gguf (--preset NAME | --arch ARCH --embd N ...) [flags]",
          .groups = {{"synth",
                      {{.name = "--output",
                        .alias = "-o",
                        .value_name = "FILE",
                        .help = "the GGUF file to write (required)"},
                       {.name = "--preset",
                        .value_name = "NAME",
                        .help = "a real model's shape: " + SyntheticPresetNames()},
                       {.name = "--type",
                        .value_name = "TYPE",
                        .default_text = "f32",
                        .help = "weight type: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, "
                                "iq4_nl, mxfp4, q2_k, q3_k, q4_k, q5_k, q6_k"},
                       {.name = "--expert-type",
                        .value_name = "TYPE",
                        .default_text = "--type",
                        .help = "type of the experts' weights (gpt-oss's files: mxfp4)"},
                       {.name = "--seed",
                        .value_name = "N",
                        .default_text = "1",
                        .help = "seed of the weights"},
                       {.name = "--threads",
                        .alias = "-t",
                        .value_name = "N",
                        .default_text = "0, one per hardware thread",
                        .help = "threads; the file does not depend on them"},
                       {.name = "--vocab",
                        .value_name = "FILE",
                        .default_text = "the architecture's ggml-vocab file in shared/models",
                        .help = "GGUF file to copy the tokenizer from"},
                       {.name = "--vocab-size",
                        .value_name = "N",
                        .help = "fail unless the vocabulary has N tokens"},
                       {.name = "--name",
                        .value_name = "NAME",
                        .default_text = "the preset's",
                        .help = "general.name of the model"}}},
                     {"shape (instead of, or over, --preset)",
                      {{.name = "--arch",
                        .value_name = "ARCH",
                        .help = "one of " + SyntheticArchitectureNames()},
                       dimension("--embd", "embedding width"),
                       dimension("--layers", "layers"),
                       dimension("--heads", "attention heads"),
                       {.name = "--kv-heads",
                        .value_name = "N",
                        .default_text = "--heads",
                        .help = "key/value heads (llama)"},
                       dimension("--ff", "feed-forward width (qwen3moe, gpt-oss: of each expert)"),
                       dimension("--experts", "qwen3moe, gpt-oss: experts per layer"),
                       dimension("--experts-used", "qwen3moe, gpt-oss: experts per token"),
                       {.name = "--head-dim",
                        .value_name = "N",
                        .default_text = "--embd / --heads",
                        .help = "attention head size"},
                       dimension("--window", "gpt-oss: sliding window of the windowed layers"),
                       dimension("--target-embd",
                                 "gemma4-assistant: the hidden width of the target it drafts for"),
                       dimension("--ctx", "training context in tokens"),
                       {.name = "--norm-eps",
                        .value_name = "E",
                        .default_text = "the preset's, else 1e-05",
                        .help = "normalization epsilon"},
                       {.name = "--rope-base",
                        .value_name = "B",
                        .default_text = "the preset's, else 10000",
                        .help = "RoPE frequency base (llama)"},
                       {.name = "--tied-output",
                        .help = "llama: no output.weight, the token embedding is reused"}}}}};
}

int RunSynth(const std::vector<std::string>& argv) {
  auto args = Args::Parse(argv, SynthFlagTable());
  if (!args.ok()) return Fail(args.message() + "\n" + kUsage, 2);
  if (!args->positional().empty()) {
    return Fail("unexpected argument '" + args->positional()[0] + "'\n" + kUsage, 2);
  }
  const std::string out_path = args->GetOr("--output", "");
  if (out_path.empty()) return Fail(std::string("missing -o OUT.gguf\n") + kUsage, 2);
  auto shape = ReadShape(*args);
  if (!shape.ok()) return Fail(shape.message() + "\n" + kUsage, 2);

  SyntheticOptions options{.shape = *shape};
  const std::string type_name = args->GetOr("--type", "f32");
  const auto type = ParseGgmlType(type_name);
  if (!type || !LlamaFileType(*type).ok()) {
    return Fail("flag --type: '" + type_name +
                    "' is not one of f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, mxfp4, "
                    "q2_k, q3_k, q4_k, q5_k, q6_k",
                2);
  }
  options.type = *type;
  if (args->Has("--expert-type")) {
    const std::string expert_name = *args->Get("--expert-type");
    const auto expert_type = ParseGgmlType(expert_name);
    if (!expert_type || !LlamaFileType(*expert_type).ok()) {
      return Fail("flag --expert-type: '" + expert_name + "' is not a weight type (see --type)", 2);
    }
    options.expert_type = *expert_type;
  }
  auto seed = args->GetInt("--seed", 1);
  if (!seed.ok()) return Fail(seed.message(), 2);
  options.seed = static_cast<uint64_t>(*seed);
  auto threads = args->GetInt("--threads", 0);
  if (!threads.ok()) return Fail(threads.message(), 2);
  if (*threads < 0 || *threads > 1024) {
    return Fail("flag -t: " + std::to_string(*threads) + " threads is out of range (0 to 1024)", 2);
  }
  options.n_threads = static_cast<int>(*threads);
  options.name = args->GetOr("--name", args->GetOr("--preset", ""));

  std::string vocab_path = args->GetOr("--vocab", "");
  if (vocab_path.empty()) {
    auto found = FindSharedModel(DefaultVocabFile(shape->arch));
    if (!found.ok()) return Fail(found.message(), 2);
    vocab_path = *found;
  }
  auto vocab = GgufFile::Open(vocab_path);
  if (!vocab.ok()) return Fail("flag --vocab: " + vocab.message(), 1);
  auto model = SyntheticModel::Create(options, *vocab);
  if (!model.ok()) return Fail(model.message(), 2);
  auto vocab_size = args->GetInt("--vocab-size", model->n_vocab());
  if (!vocab_size.ok()) return Fail(vocab_size.message(), 2);
  if (*vocab_size != model->n_vocab()) {
    return Fail("flag --vocab-size: " + std::to_string(*vocab_size) + " differs from the " +
                    std::to_string(model->n_vocab()) + " tokens of " + vocab_path,
                2);
  }
  for (const std::string& note : model->notes()) Fail(note, 0);

  const auto start = std::chrono::steady_clock::now();
  const Status written = model->WriteFile(out_path);
  if (!written.ok()) return Fail(written.message(), 1);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s: %s, %.2f M parameters, %s, vocab %d from %s, seed %llu: %.1f MiB in %.1f s\n",
              out_path.c_str(), shape->arch.c_str(), model->ParameterCount() / 1e6,
              GgmlTypeName(options.type), model->n_vocab(), vocab_path.c_str(),
              static_cast<unsigned long long>(options.seed), model->TensorBytes() / 1048576.0,
              seconds);
  return 0;
}

}  // namespace kvserve
