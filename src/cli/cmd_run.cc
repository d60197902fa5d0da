// `kvserve run`: generate from a prompt with the KV cache (or, with --no-cache, by recomputing
// the whole sequence every step). Text mode streams to stdout and prints timings to stderr; JSON
// mode prints one object.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/model_options.h"
#include "cli/run_batch.h"
#include "cli/sampling_flags.h"
#include "engine/generation.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/tokenizer.h"

namespace kvserve {

FlagTable RunFlagTable() {
  FlagGroup engine = EngineFlags();
  engine.title = "engine (with --batch-file)";
  return {.usage = "run -m MODEL (-p TEXT | --prompt-tokens IDS | --batch-file FILE) [flags]",
          .groups = {
              {"run",
               {{.name = "--prompt", .alias = "-p", .value_name = "TEXT", .help = "the prompt"},
                {.name = "--prompt-tokens",
                 .value_name = "IDS",
                 .help = "the prompt as token ids, like 1,2,3"},
                {.name = "--n-predict",
                 .alias = "-n",
                 .value_name = "N",
                 .default_text = "64",
                 .help = "tokens to generate at most"},
                {.name = "--output-format",
                 .value_name = "FORMAT",
                 .default_text = "text",
                 .help = "text (streamed to stdout, timings on stderr) or json"},
                {.name = "--batch-file",
                 .value_name = "FILE",
                 .help = "JSON lines of requests, run together through the serving engine"},
                {.name = "--no-cache",
                 .help = "recompute the whole sequence at every step instead of caching"},
                {.name = "--ignore-eos", .help = "keep generating past end-of-generation tokens"}}},
              ModelFlags(),
              SamplingFlags(),
              std::move(engine)}};
}

namespace {

struct RunOptions {
  std::string prompt;
  std::vector<int32_t> prompt_tokens;
  bool has_prompt_tokens = false;
  std::string output_format = "text";
  GenerationOptions generation;
};

Result<RunOptions> ReadRunOptions(const Args& args) {
  RunOptions o;
  o.prompt = args.GetOr("--prompt", "");
  if (auto tokens = args.Get("--prompt-tokens")) {
    auto parsed = ParseIntList(*tokens, "--prompt-tokens");
    if (!parsed.ok()) return parsed.status();
    o.prompt_tokens = std::move(parsed).value();
    o.has_prompt_tokens = true;
  }
  if (o.prompt.empty() && !o.has_prompt_tokens) {
    return Result<RunOptions>::InvalidArgument("missing -p TEXT or --prompt-tokens 1,2,3");
  }
  o.output_format = args.GetOr("--output-format", "text");
  if (o.output_format != "text" && o.output_format != "json") {
    return Result<RunOptions>::InvalidArgument("flag --output-format: '" + o.output_format +
                                               "' is not one of text, json");
  }
  auto n = args.GetInt("--n-predict", 64);
  if (!n.ok()) return n.status();
  auto sampling = ReadSamplingParams(args);
  if (!sampling.ok()) return sampling.status();
  if (*n < 0 || *n > (1 << 24)) {
    return Result<RunOptions>::InvalidArgument("flag -n: " + std::to_string(*n) +
                                               " is out of range");
  }
  o.generation.max_tokens = static_cast<int>(*n);
  o.generation.use_cache = !args.Has("--no-cache");
  o.generation.ignore_eos = args.Has("--ignore-eos");
  o.generation.sampling = *sampling;
  return o;
}

double PerSecond(int n, double ms) { return ms > 0 ? n * 1000.0 / ms : 0.0; }

}  // namespace

int RunGenerate(const std::vector<std::string>& argv) {
  auto fail = [](const std::string& message, int code) {
    std::fprintf(stderr, "kvserve run: %s\n", message.c_str());
    return code;
  };
  auto args = Args::Parse(argv, RunFlagTable());
  if (!args.ok()) return fail(args.message(), 2);
  auto model_options = ReadModelOptions(*args);
  if (!model_options.ok()) return fail(model_options.message(), 2);
  if (args->Has("--batch-file")) {
    auto model = OpenModel(*model_options);
    if (!model.ok()) return fail(model.message(), 1);
    return RunBatchFile(*args, *model_options, **model);
  }
  auto options = ReadRunOptions(*args);
  if (!options.ok()) return fail(options.message(), 2);
  auto model = OpenModel(*model_options);
  if (!model.ok()) return fail(model.message(), 1);
  auto tokenizer = Tokenizer::FromGguf((*model)->file());
  if (!tokenizer.ok()) return fail(tokenizer.message(), 1);
  const Tokenizer& tok = **tokenizer;

  std::vector<int32_t> prompt = options->prompt_tokens;
  if (!options->has_prompt_tokens) {
    prompt = tok.Encode(options->prompt, /*add_special=*/true, /*parse_special=*/false);
  }
  SequenceRunner runner(**model, model_options->kv_type, model_options->n_ctx,
                        model_options->n_threads);
  const bool text = options->output_format == "text";
  StreamingDecoder stream(tok);
  std::string generated_text;
  if (text) {
    std::fputs(tok.Decode(prompt).c_str(), stdout);
    std::fflush(stdout);
  }
  auto result = Generate(runner, tok, prompt, options->generation, [&](int32_t token) {
    const std::string piece = stream.Push(token);
    generated_text += piece;
    if (text) {
      std::fputs(piece.c_str(), stdout);
      std::fflush(stdout);
    }
    return true;
  });
  if (!result.ok()) return fail(result.message(), 1);
  const std::string rest = stream.Flush();
  generated_text += rest;
  const int n_generated = static_cast<int>(result->tokens.size());
  const double prompt_rate = PerSecond(result->n_prompt - result->n_reused, result->prompt_ms);
  const double decode_rate = PerSecond(n_generated, result->decode_ms);
  if (text) {
    std::printf("%s\n", rest.c_str());
    std::fprintf(stderr,
                 "\nprompt: %d tokens in %.1f ms (%.1f tokens/s)\n"
                 "decode: %d tokens in %.1f ms (%.1f tokens/s)%s, finish: %s\n",
                 result->n_prompt, result->prompt_ms, prompt_rate, n_generated, result->decode_ms,
                 decode_rate, options->generation.use_cache ? "" : " [no cache]",
                 result->finish_reason.c_str());
    return 0;
  }
  nlohmann::json out = {
      {"prompt_tokens", prompt},
      {"tokens", result->tokens},
      {"text", generated_text},
      {"finish_reason", result->finish_reason},
      {"timings",
       {{"prompt_ms", result->prompt_ms},
        {"decode_ms", result->decode_ms},
        {"prompt_tokens_per_s", prompt_rate},
        {"decode_tokens_per_s", decode_rate}}},
  };
  std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  return 0;
}

}  // namespace kvserve
