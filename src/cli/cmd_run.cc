// `kvserve run`: generate from a prompt through the serving engine, one sequence (or, with
// --no-cache, recomputing the whole sequence every step). Text mode streams to stdout and prints
// timings to stderr; JSON mode prints one object.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/model_options.h"
#include "cli/run_batch.h"
#include "cli/sampling_flags.h"
#include "engine/completion.h"
#include "engine/engine.h"
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
                {.name = "--decoder-prompt",
                 .value_name = "TEXT",
                 .help = "an encoder-decoder model (T5): the answer's forced start (the prompt "
                         "is the encoder's input)"},
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
              SpecFlags(),
              std::move(engine),
              KvDiskFlags(),
              ContextOverflowFlags()}};
}

namespace {

struct RunOptions {
  std::string prompt;
  std::string decoder_prompt;
  std::vector<int32_t> prompt_tokens;
  bool has_prompt_tokens = false;
  std::string output_format = "text";
  Request request;  // max_tokens, sampling, ignore_eos; the prompt is filled in later
  bool no_cache = false;
};

Result<RunOptions> ReadRunOptions(const Args& args) {
  RunOptions o;
  o.prompt = args.GetOr("--prompt", "");
  o.decoder_prompt = args.GetOr("--decoder-prompt", "");
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
  o.request.max_tokens = static_cast<int>(*n);
  o.request.ignore_eos = args.Has("--ignore-eos");
  o.request.sampling = *sampling;
  o.no_cache = args.Has("--no-cache");
  return o;
}

// Text mode's closing lines: timings on stderr, and what shifting and speculation did.
void PrintTextSummary(const Completion& result, size_t n_prompt, const RunOptions& options,
                      const EngineOptions& engine_options, int n_ctx) {
  std::printf("\n");
  std::fprintf(stderr,
               "\nprompt: %zu tokens in %.1f ms (%.1f tokens/s)\n"
               "decode: %d tokens in %.1f ms (%.1f tokens/s)%s, finish: %s\n",
               n_prompt, result.prompt_ms, result.prompt_tokens_per_s(),
               static_cast<int>(result.tokens.size()), result.decode_ms,
               result.decode_tokens_per_s(), options.no_cache ? " [no cache]" : "",
               FinishReasonName(result.finish_reason));
  if (result.usage.dropped_tokens > 0) {
    std::fprintf(stderr, "context: %d shifts dropped %d tokens (context %d, sinks %d)\n",
                 result.usage.context_shifts, result.usage.dropped_tokens, n_ctx,
                 engine_options.sink_tokens);
  }
  if (engine_options.spec.enabled()) {
    const Usage& u = result.usage;
    std::fprintf(stderr, "speculative: %d of %d drafted tokens accepted (%.1f%%)\n",
                 u.accepted_tokens, u.drafted_tokens,
                 u.drafted_tokens > 0 ? 100.0 * u.accepted_tokens / u.drafted_tokens : 0.0);
  }
}

// JSON mode: one line with the tokens, the text, the timings and what shifting and speculation
// did.
void PrintJsonResult(const Completion& result, const std::vector<int32_t>& prompt,
                     const EngineOptions& engine_options) {
  nlohmann::json out = {
      {"prompt_tokens", prompt},
      {"tokens", result.tokens},
      {"text", result.text},
      {"finish_reason", FinishReasonName(result.finish_reason)},
      {"timings",
       {{"prompt_ms", result.prompt_ms},
        {"decode_ms", result.decode_ms},
        {"prompt_tokens_per_s", result.prompt_tokens_per_s()},
        {"decode_tokens_per_s", result.decode_tokens_per_s()}}},
  };
  if (result.usage.dropped_tokens > 0) {
    out["truncated"] = true;
    out["dropped_tokens"] = result.usage.dropped_tokens;
    out["context_shifts"] = result.usage.context_shifts;
  }
  if (engine_options.spec.enabled()) {
    out["drafted_tokens"] = result.usage.drafted_tokens;
    out["accepted_tokens"] = result.usage.accepted_tokens;
  }
  std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
}

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
  EngineOptions engine_options = SingleStreamEngineOptions(*model_options, 16, options->no_cache);
  Status overflow = ReadContextOverflowOptions(*args, engine_options);
  if (!overflow.ok()) return fail(overflow.message(), 2);
  const bool shift = engine_options.context_overflow == ContextOverflow::kShift;
  const int n_ctx = model_options->n_ctx;
  Request request = options->request;
  request.prompt = prompt;
  request.decoder_prompt =
      tok.Encode(options->decoder_prompt, /*add_special=*/false, /*parse_special=*/false);
  // An encoder-decoder's prompt is the encoder's input (Engine::Submit checks it against the
  // context): the text goes on from the decoder's start, which the context bounds with the answer.
  const bool encoder_decoder = (*model)->cross_group() >= 0;
  const std::vector<int32_t>& shown = encoder_decoder ? request.decoder_prompt : prompt;
  const size_t n_context_prompt = encoder_decoder ? 1 + shown.size() : prompt.size();
  if (!shift && FitContext(static_cast<int64_t>(n_context_prompt), 1, n_ctx) != ContextFit::kFits) {
    return fail(
        "prompt of " + std::to_string(n_context_prompt) + " tokens exceeds the context size " +
            std::to_string(n_ctx) +
            " less one token for the reply (--context-overflow shift keeps its head and end)",
        1);
  }
  // Generation ends where the context does (finish reason "length"), unless it shifts.
  if (!shift) {
    request.max_tokens = std::min(request.max_tokens, CompletionRoom(n_context_prompt, n_ctx));
  }
  Status spec = ReadSpecOptions(*args, engine_options.spec);
  if (!spec.ok()) return fail(spec.message(), 2);
  Status disk = ReadKvDiskOptions(*args, engine_options);
  if (!disk.ok()) return fail(disk.message(), 2);
  auto draft = OpenDraftModel(*args, engine_options.spec);
  if (!draft.ok()) return fail(draft.message(), 1);
  auto engine = Engine::Create(**model, tok, engine_options);
  if (!engine.ok()) return fail(engine.message(), 1);
  const bool text = options->output_format == "text";
  if (text) {
    std::fputs(tok.Decode(shown).c_str(), stdout);
    std::fflush(stdout);
  }
  const auto submitted = std::chrono::steady_clock::now();
  auto stream = (*engine)->Submit(std::move(request));
  if (!stream.ok()) return fail(stream.message(), 1);
  auto result = Complete(**stream, submitted, [&](const RequestEvent& event) {
    if (text) {
      std::fputs(event.text.c_str(), stdout);
      std::fflush(stdout);
    }
  });
  if (!result.ok()) return fail(result.message(), 1);
  if (text) {
    PrintTextSummary(*result, prompt.size(), *options, engine_options, n_ctx);
  } else {
    PrintJsonResult(*result, prompt, engine_options);
  }
  return 0;
}

}  // namespace kvserve
