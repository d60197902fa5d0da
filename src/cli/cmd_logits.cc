// `kvserve logits -m MODEL --tokens 1,2,3 --out FILE [--mode batch|incremental|no-cache]`:
// writes little-endian float32 logits [n_tokens, n_vocab], row i after token i.
#include <cstdio>
#include <cstring>
#include <memory>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "engine/sequence_runner.h"

namespace kvserve {

FlagTable LogitsFlagTable() {
  return {.usage = "logits -m MODEL --tokens IDS --out FILE [flags]",
          .groups = {{"logits",
                      {{.name = "--tokens",
                        .value_name = "IDS",
                        .help = "the token ids, like 1,2,3 (required)"},
                       {.name = "--out",
                        .value_name = "FILE",
                        .help = "where the float32 logits [n_tokens, n_vocab] go (required)"},
                       {.name = "--mode",
                        .value_name = "MODE",
                        .default_text = "batch",
                        .help = "batch (one step), incremental (a token a step) or no-cache"}}},
                     ModelFlags()}};
}

namespace {

Status WriteLogits(const std::string& path, const std::vector<float>& logits) {
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!file) return Status::InvalidArgument("cannot create '" + path + "'");
  if (std::fwrite(logits.data(), sizeof(float), logits.size(), file.get()) != logits.size()) {
    return Status::InvalidArgument("cannot write '" + path + "'");
  }
  return Status::Ok();
}

Result<std::vector<float>> ComputeLogits(SequenceRunner& runner, const std::vector<int32_t>& tokens,
                                         const std::string& mode) {
  std::vector<float> out;
  if (mode == "batch") {
    auto logits = runner.Append(tokens, /*all_logits=*/true);
    if (!logits.ok()) return logits.status();
    out.assign(logits->begin(), logits->end());
    return out;
  }
  for (int32_t token : tokens) {
    auto logits = mode == "incremental" ? runner.Append(std::span(&token, 1))
                                        : runner.AppendRecompute(std::span(&token, 1));
    if (!logits.ok()) return logits.status();
    out.insert(out.end(), logits->begin(), logits->end());
  }
  return out;
}

}  // namespace

int RunLogits(const std::vector<std::string>& argv) {
  auto fail = [](const std::string& message, int code) {
    std::fprintf(stderr, "kvserve logits: %s\n", message.c_str());
    return code;
  };
  auto args = Args::Parse(argv, LogitsFlagTable());
  if (!args.ok()) return fail(args.message(), 2);
  auto options = ReadModelOptions(*args);
  if (!options.ok()) return fail(options.message(), 2);
  if (!args->Has("--tokens") || !args->Has("--out")) {
    return fail(
        "usage: kvserve logits -m MODEL --tokens 1,2,3 --out FILE "
        "[--mode batch|incremental|no-cache]",
        2);
  }
  const std::string mode = args->GetOr("--mode", "batch");
  if (mode != "batch" && mode != "incremental" && mode != "no-cache") {
    return fail("flag --mode: '" + mode + "' is not one of batch, incremental, no-cache", 2);
  }
  auto tokens = ParseIntList(*args->Get("--tokens"), "--tokens");
  if (!tokens.ok()) return fail(tokens.message(), 2);
  auto model = OpenModel(*options);
  if (!model.ok()) return fail(model.message(), 1);
  SequenceRunner runner(**model, options->kv_type, options->n_ctx, options->n_threads);
  auto logits = ComputeLogits(runner, *tokens, mode);
  if (!logits.ok()) return fail(logits.message(), 1);
  Status written = WriteLogits(*args->Get("--out"), *logits);
  if (!written.ok()) return fail(written.message(), 1);
  return 0;
}

}  // namespace kvserve
