#include "cli/model_options.h"

#include "cli/cli_backend.h"

namespace kvserve {

FlagGroup ModelFlags() {
  return {"model",
          {{.name = "--model",
            .alias = "-m",
            .value_name = "PATH",
            .help = "GGUF file or Hugging Face folder (required)"},
           {.name = "--threads",
            .alias = "-t",
            .value_name = "N",
            .default_text = "0, one per core",
            .help = "worker threads"},
           {.name = "--ctx-size",
            .alias = "-c",
            .value_name = "TOKENS",
            .default_text = "0, the model's training context",
            .help = "tokens per sequence, prompt and generated"},
           {.name = "--kv-type",
            .value_name = "TYPE",
            .default_text = "f32",
            .help = "KV cache element type: f32, f16, bf16, q8_0 or q4_0 (q4_0 is lossy, see "
                    "docs/kv-cache.md); one for every layer group, or one per group in the order "
                    "`kvserve info` lists them (f16,q8_0)"},
           BackendFlag(),
           DeviceFlag()}};
}

Result<ModelOptions> ReadModelOptions(const Args& args) {
  ModelOptions options;
  options.model_path = args.GetOr("--model", "");
  if (options.model_path.empty()) return Result<ModelOptions>::InvalidArgument("missing -m MODEL");
  auto threads = args.GetInt("--threads", 0);
  if (!threads.ok()) return threads.status();
  if (*threads < 0 || *threads > 1024) {
    return Result<ModelOptions>::InvalidArgument("flag -t: " + std::to_string(*threads) +
                                                 " threads is out of range (1 to 1024)");
  }
  options.n_threads = static_cast<int>(*threads);
  auto ctx = args.GetInt("--ctx-size", 0);
  if (!ctx.ok()) return ctx.status();
  if (*ctx < 0 || *ctx > (1 << 24)) {
    return Result<ModelOptions>::InvalidArgument("flag -c: context size " + std::to_string(*ctx) +
                                                 " is out of range");
  }
  options.n_ctx = static_cast<int>(*ctx);
  auto kv_type = KvFormat::Parse(args.GetOr("--kv-type", "f32"));
  if (!kv_type.ok()) return Status::InvalidArgument("flag --kv-type: " + kv_type.message());
  options.kv_type = *kv_type;
  auto backend = CliBackend(args);
  if (!backend.ok()) return backend.status();
  options.backend = *backend;
  return options;
}

Result<std::unique_ptr<Model>> OpenModel(ModelOptions& options) {
  return OpenModel(options, options.backend != nullptr ? *options.backend : CliBackend());
}

Result<std::unique_ptr<Model>> OpenModel(ModelOptions& options, const Backend& backend) {
  auto model = LoadModel(options.model_path, backend);
  if (!model.ok()) return model.status();
  if ((*model)->hidden_state_drafter() != nullptr) {
    return Status::InvalidArgument(options.model_path + ": a " + (*model)->config().arch +
                                   " file drafts for a target and does not run alone: give it as "
                                   "--model-draft with --spec draft beside its target");
  }
  if (options.n_ctx == 0) options.n_ctx = (*model)->config().n_ctx_train;
  Status fits = (*model)->CheckContextSize(options.n_ctx);
  if (!fits.ok()) return Status::InvalidArgument("flag -c: " + fits.message());
  Status format = (*model)->kv_spec().CheckFormat(options.kv_type);
  if (!format.ok()) return Status::InvalidArgument("flag --kv-type: " + format.message());
  return model;
}

}  // namespace kvserve
