// `kvserve bench`: single-stream speed in the manner of llama-bench, with the ceilings of
// design.md's performance model beside each result, and (--cache-compare) the time the KV cache
// saves against recomputing the sequence at every step (on an encoder-decoder model: both caches,
// the self-attention cache only, and none; encdec_cache_compare.h).
//
//   kvserve bench -m MODEL [-p 512] [-n 128] [-r 5] [-t N] [--depth D] [--output-format
//   md|csv|json] kvserve bench --cache-compare -m MODEL --lengths 64,128,256 [--plot FILE.svg]
//   [--output-format]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>

#include "cli/args.h"
#include "cli/bench_profile.h"
#include "cli/bench_runner.h"
#include "cli/commands.h"
#include "cli/encdec_cache_compare.h"
#include "cli/engine_flags.h"
#include "cli/grammar_bench.h"
#include "cli/model_options.h"
#include "cli/spec_bench.h"
#include "cli/spec_tasks.h"
#include "cli/svg_plot.h"
#include "kernels/backend.h"
#include "util/resident_memory.h"

namespace kvserve {

FlagTable BenchFlagTable() {
  FlagGroup engine = EngineFlags();
  engine.title = "engine (with --concurrency)";
  return {
      .usage = "bench -m MODEL [--cache-compare --lengths N,N,...] [flags]",
      .groups = {
          {"bench",
           {{.name = "--n-prompt",
             .alias = "-p",
             .value_name = "N[,N...]",
             .default_text = "512",
             .help = "prompt lengths to time prefill at (pp), one test each; 0: none"},
            {.name = "--n-gen",
             .alias = "-n",
             .value_name = "N[,N...]",
             .default_text = "128",
             .help = "tokens to time decoding of (tg), one test each; 0: none"},
            {.name = "--repetitions",
             .alias = "-r",
             .value_name = "N",
             .default_text = "5",
             .help = "runs of each test"},
            {.name = "--depth",
             .value_name = "TOKENS",
             .default_text = "0",
             .help = "tokens already in the context when a test starts"},
            {.name = "--concurrency",
             .value_name = "N[,N...]",
             .help = "also decode N streams at once through the serving engine, per N"},
            {.name = "--output-format",
             .alias = "-o",
             .value_name = "FORMAT",
             .default_text = "md",
             .help = "md, csv or json (csv not with --cache-compare)"},
            {.name = "--bandwidth-mib",
             .value_name = "MIB",
             .default_text = "1024",
             .help = "buffer of the read-bandwidth probe, at least 64"},
            {.name = "--seed",
             .value_name = "N",
             .default_text = "1",
             .help = "seed of the random prompt token ids"},
            {.name = "--profile",
             .help = "time every operation of the pp and tg tests and print where a token's "
                     "time goes (adds about 0.1 µs per operation)"}}},
          {"cache compare",
           {{.name = "--cache-compare",
             .help = "time generation with the KV cache against recomputing every step (an "
                     "encoder-decoder model: both caches, the self-attention one only, none; "
                     "the median of -r alternating runs, default 1)"},
            {.name = "--lengths",
             .value_name = "N[,N...]",
             .help = "tokens to generate, one row each (required with --cache-compare)"},
            {.name = "--prompt",
             .value_name = "TEXT",
             .default_text = "Once",
             .help = "the prompt generation starts from"},
            {.name = "--plot", .value_name = "FILE", .help = "write an SVG plot of the times"},
            {.name = "--shared-input",
             .value_name = "N",
             .help = "encoder-decoder models: also time N requests sharing one input against N "
                     "with their own, through the engine (the median of -r runs each)"}}},
          {"speculative bench (with --spec ngram|draft, or --spec-replay)",
           {{.name = "--spec-streams",
             .value_name = "N[,N...]",
             .default_text = "1,16",
             .help = "concurrent requests per row, plain and speculative"},
            {.name = "--spec-task",
             .value_name = "TASK",
             .default_text = "both",
             .help = "TASK[,TASK...] of grounded (raw text repeating the prompt), extract, code, "
                     "multiturn (chat tasks quoting the prompt), free (raw text, the control), "
                     "story (chat, the control); both = grounded,free; all"},
            {.name = "--spec-sampling",
             .value_name = "MODE",
             .default_text = "greedy",
             .help = "greedy, seeded (temperature 0.8, top-p 0.95, a seed per request) or both"},
            {.name = "--spec-print-tasks",
             .help = "print the chat tasks' conversations as JSON (for other servers) and exit"},
            {.name = "--spec-replay",
             .value_name = "P[,P...]",
             .help = "draft the plain output, each token right with probability P, per P; "
                     "`repeats`: only its tokens that repeat earlier text, always right (the "
                     "ceiling of prompt lookup)"}}},
          {"structured output bench",
           {{.name = "--structured",
             .value_name = "SCHEMA",
             .help = "time constrained decoding against plain decoding for a JSON Schema: tool "
                     "(a tool call's arguments), person (a nested record) or a file"}}},
          ModelFlags(),
          SpecFlags(),
          std::move(engine)}};
}

namespace {

constexpr const char* kUsage =
    "usage: kvserve bench -m MODEL [-p 512[,N...]] [-n 128[,N...]] [-r 5] [-t N] [--depth D] "
    "[--kv-type f32|f16|bf16|q8_0|q4_0] [--concurrency N[,N...]] [--bandwidth-mib 1024] "
    "[--output-format md|csv|json]\n"
    "       kvserve bench --cache-compare -m MODEL --lengths 64,128,... [--prompt TEXT] "
    "[--plot FILE.svg] [--shared-input N] [--output-format md|json]";

int Fail(const std::string& message, int code) {
  std::fprintf(stderr, "kvserve bench: %s\n", message.c_str());
  return code;
}

struct BenchFlags {
  std::vector<int32_t> n_prompt, n_gen;
  int repeats = 5;
  int depth = 0;
  int bandwidth_mib = 1024;
  uint64_t seed = 1;
  std::string format = "md";
  bool cache_compare = false;
  std::vector<int32_t> lengths;
  std::string prompt = "Once";
  std::string plot_path;
  int shared_input = 0;              // requests of the shared-input test; 0: none
  std::vector<int32_t> concurrency;  // aggregate decode through the serving engine, per count
  bool profile = false;
};

// A list of counts, each in [min, max].
Result<std::vector<int32_t>> ReadCounts(const Args& args, const std::string& flag,
                                        const std::string& fallback, int min, int max) {
  auto list = ParseIntList(args.GetOr(flag, fallback), flag);
  if (!list.ok()) return list.status();
  for (int32_t v : *list) {
    if (v < min || v > max) {
      return Status::InvalidArgument("flag " + flag + ": " + std::to_string(v) +
                                     " is out of range (" + std::to_string(min) + " to " +
                                     std::to_string(max) + ")");
    }
  }
  return list;
}

Result<int> ReadCount(const Args& args, const std::string& flag, int fallback, int min, int max) {
  auto value = args.GetInt(flag, fallback);
  if (!value.ok()) return value.status();
  if (*value < min || *value > max) {
    return Status::InvalidArgument("flag " + flag + ": " + std::to_string(*value) +
                                   " is out of range (" + std::to_string(min) + " to " +
                                   std::to_string(max) + ")");
  }
  return static_cast<int>(*value);
}

Result<BenchFlags> ReadBenchFlags(const Args& args) {
  BenchFlags f;
  f.cache_compare = args.Has("--cache-compare");
  f.profile = args.Has("--profile");
  if (f.profile && f.cache_compare) {
    return Status::InvalidArgument("flag --profile does not go with --cache-compare");
  }
  f.format = args.GetOr("--output-format", "md");
  const bool csv_ok = !f.cache_compare;
  if (f.format != "md" && f.format != "json" && !(csv_ok && f.format == "csv")) {
    return Status::InvalidArgument("flag --output-format: '" + f.format + "' is not one of md, " +
                                   (csv_ok ? "csv, " : "") + "json");
  }
  if (f.profile && f.format == "csv") {
    return Status::InvalidArgument("flag --profile: its tables come as md or json, not csv");
  }
  if (args.Has("--concurrency")) {
    if (f.cache_compare)
      return Status::InvalidArgument("flag --concurrency does not go with --cache-compare");
    auto concurrency = ReadCounts(args, "--concurrency", "", 1, 4096);
    if (!concurrency.ok()) return concurrency.status();
    f.concurrency = *concurrency;
  }
  auto n_prompt = ReadCounts(args, "--n-prompt", "512", 0, 1 << 20);
  auto n_gen = ReadCounts(args, "--n-gen", "128", 0, 1 << 20);
  auto repeats = ReadCount(args, "--repetitions", 5, 1, 1000);
  auto depth = ReadCount(args, "--depth", 0, 0, 1 << 20);
  auto mib = ReadCount(args, "--bandwidth-mib", 1024, 64, 1 << 20);
  auto seed = args.GetInt("--seed", 1);
  for (const Status& s : {n_prompt.status(), n_gen.status(), repeats.status(), depth.status(),
                          mib.status(), seed.status()}) {
    if (!s.ok()) return s;
  }
  f.n_prompt = *n_prompt;
  f.n_gen = *n_gen;
  f.repeats = *repeats;
  f.depth = *depth;
  f.bandwidth_mib = *mib;
  f.seed = static_cast<uint64_t>(*seed);
  f.plot_path = args.GetOr("--plot", "");
  f.prompt = args.GetOr("--prompt", f.prompt);
  if (f.cache_compare) {
    if (!args.Has("--lengths"))
      return Status::InvalidArgument("--cache-compare needs --lengths 64,128,...");
    auto lengths = ReadCounts(args, "--lengths", "", 1, 1 << 20);
    if (!lengths.ok()) return lengths.status();
    f.lengths = *lengths;
    if (f.prompt.empty()) return Status::InvalidArgument("flag --prompt: empty");
    auto shared_input = ReadCount(args, "--shared-input", 0, 0, 4096);
    if (!shared_input.ok()) return shared_input.status();
    f.shared_input = *shared_input;
    // -r: an encoder-decoder model's modes and shared-input runs, once each unless given.
    if (!args.Has("--repetitions")) f.repeats = 1;
  } else {
    for (const char* flag : {"--lengths", "--plot", "--prompt", "--shared-input"}) {
      if (args.Has(flag))
        return Status::InvalidArgument(std::string("flag ") + flag + " needs --cache-compare");
    }
  }
  return f;
}

// The timed runs' seconds per token (every run has the same tokens: the mean of 1 / rate).
double MeanSecondsPerToken(const BenchResult& result) {
  double sum = 0;
  for (double rate : result.tokens_per_s) sum += rate > 0 ? 1.0 / rate : 0.0;
  return result.tokens_per_s.empty() ? 0.0 : sum / static_cast<double>(result.tokens_per_s.size());
}

std::string Percent(double fraction) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.1f%%", 100 * fraction);
  return buffer;
}

Status WritePlot(const std::string& path, const std::string& svg) {
  std::ofstream out(path, std::ios::binary);
  out << svg;
  if (!out.good()) return Status::InvalidArgument("flag --plot: cannot write '" + path + "'");
  return Status::Ok();
}

void PrintEncDecRows(const std::vector<EncDecCompareRow>& rows, const std::string& format,
                     const std::optional<SharedInputRow>& shared) {
  if (format == "json") {
    nlohmann::json j = {{"rows", nlohmann::json::array()}};
    for (const EncDecCompareRow& r : rows) {
      j["rows"].push_back({{"length", r.length},
                           {"both_caches_s", r.both_s},
                           {"self_cache_only_s", r.self_only_s},
                           {"no_cache_s", r.none_s},
                           {"self_cache_only_ratio", r.SelfOnlyRatio()},
                           {"no_cache_ratio", r.NoneRatio()},
                           {"same_tokens", r.same_tokens}});
    }
    if (shared) {
      j["shared_input"] = {
          {"requests", shared->test.n_requests},       {"input_tokens", shared->test.n_input},
          {"generated_tokens", shared->test.n_gen},    {"same_input_s", shared->same_s},
          {"different_inputs_s", shared->different_s}, {"ratio", shared->Ratio()}};
    }
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf(
      "| length | both caches s | self cache only s | no cache s | self only / both | "
      "none / both | same tokens |\n"
      "|---:|---:|---:|---:|---:|---:|:---:|\n");
  for (const EncDecCompareRow& r : rows) {
    std::printf("| %d | %.3f | %.3f | %.3f | %.2fx | %.2fx | %s |\n", r.length, r.both_s,
                r.self_only_s, r.none_s, r.SelfOnlyRatio(), r.NoneRatio(),
                r.same_tokens ? "yes" : "NO");
  }
  if (shared) {
    std::printf(
        "\n| requests | input tokens | generated each | same input s | different inputs s | "
        "ratio |\n|---:|---:|---:|---:|---:|---:|\n| %d | %d | %d | %.3f | %.3f | %.2fx |\n",
        shared->test.n_requests, shared->test.n_input, shared->test.n_gen, shared->same_s,
        shared->different_s, shared->Ratio());
  }
}

// --cache-compare on an encoder-decoder model: both caches, the self-attention cache only, none.
int RunEncDecCacheCompare(const Model& model, const Tokenizer& tokenizer,
                          const ModelOptions& model_options, const BenchFlags& flags,
                          std::span<const int32_t> input, int n_threads) {
  const KvFormat& kv_type = model_options.kv_type;
  auto warmup = CompareEncDecCache(model, input, 2, kv_type, n_threads);
  if (!warmup.ok()) return Fail(warmup.message(), 1);
  std::vector<EncDecCompareRow> rows;
  bool all_same = true;
  for (int length : flags.lengths) {
    auto row = CompareEncDecCache(model, input, length, kv_type, n_threads, flags.repeats);
    if (!row.ok()) return Fail(row.message(), 1);
    all_same = all_same && row->same_tokens;
    rows.push_back(*row);
    std::fprintf(stderr, "kvserve bench: length %d: both %.3f s, self only %.3f s, none %.3f s\n",
                 length, row->both_s, row->self_only_s, row->none_s);
  }
  std::optional<SharedInputRow> shared;
  if (flags.shared_input > 0) {
    auto result = CompareSharedInput(model, tokenizer,
                                     {.n_requests = flags.shared_input,
                                      .n_input = static_cast<int>(input.size()),
                                      .n_gen = flags.lengths.front(),
                                      .repeats = flags.repeats,
                                      .kv_type = kv_type,
                                      .n_threads = n_threads,
                                      .seed = flags.seed});
    if (!result.ok()) return Fail(result.message(), 1);
    shared = *result;
  }
  if (!flags.plot_path.empty()) {
    PlotSeries series[3] = {{.name = "both caches (cross + self)", .color = "#1f77b4"},
                            {.name = "self-attention cache only", .color = "#ff7f0e"},
                            {.name = "no cache (recompute every step)", .color = "#d62728"}};
    for (const EncDecCompareRow& r : rows) {
      series[0].points.emplace_back(r.length, r.both_s);
      series[1].points.emplace_back(r.length, r.self_only_s);
      series[2].points.emplace_back(r.length, r.none_s);
    }
    const std::string name =
        model.config().name.empty() ? model_options.model_path : model.config().name;
    const std::string svg =
        RenderLinePlot({.title = "Generation time, " + name + ", " + std::to_string(input.size()) +
                                 "-token input (threads: " + std::to_string(n_threads) + ")",
                        .x_label = "generated tokens",
                        .y_label = "seconds"},
                       {series[2], series[1], series[0]});
    if (Status written = WritePlot(flags.plot_path, svg); !written.ok())
      return Fail(written.message(), 1);
  }
  PrintEncDecRows(rows, flags.format, shared);
  if (!all_same) return Fail("the three modes gave different tokens", 1);
  return 0;
}

int RunCacheCompare(const Model& model, const ModelOptions& model_options, const BenchFlags& flags,
                    int n_threads) {
  auto tokenizer = Tokenizer::FromGguf(model.file());
  if (!tokenizer.ok()) return Fail(tokenizer.message(), 1);
  const std::vector<int32_t> prompt =
      (*tokenizer)->Encode(flags.prompt, /*add_special=*/true, /*parse_special=*/false);
  if (prompt.empty()) return Fail("flag --prompt: '" + flags.prompt + "' gives no tokens", 2);
  if (model.cross_group() >= 0) {
    return RunEncDecCacheCompare(model, **tokenizer, model_options, flags, prompt, n_threads);
  }
  if (flags.shared_input > 0) {
    return Fail("flag --shared-input: the model has no encoder (an encoder-decoder model's flag)",
                2);
  }
  // Warm-up: faults the mapped weights in and grows the allocator's pools before any timing.
  auto warmup = CompareCache(model, **tokenizer, prompt, 2, model_options.kv_type, n_threads);
  if (!warmup.ok()) return Fail(warmup.message(), 1);
  std::vector<CacheCompareRow> rows;
  bool all_same = true;
  for (int length : flags.lengths) {
    auto row = CompareCache(model, **tokenizer, prompt, length, model_options.kv_type, n_threads);
    if (!row.ok()) return Fail(row.message(), 1);
    all_same = all_same && row->same_tokens;
    rows.push_back(*row);
    std::fprintf(stderr, "kvserve bench: length %d: cached %.3f s, uncached %.3f s\n", length,
                 row->cached_s, row->uncached_s);
  }
  if (!flags.plot_path.empty()) {
    PlotSeries cached{.name = "with KV cache", .color = "#1f77b4"};
    PlotSeries uncached{.name = "without cache (recompute every step)", .color = "#d62728"};
    for (const CacheCompareRow& r : rows) {
      cached.points.emplace_back(r.length, r.cached_s);
      uncached.points.emplace_back(r.length, r.uncached_s);
    }
    const std::string name =
        model.config().name.empty() ? model_options.model_path : model.config().name;
    const std::string svg = RenderLinePlot(
        {.title = "Generation time, " + name + " (threads: " + std::to_string(n_threads) + ")",
         .x_label = "generated tokens",
         .y_label = "seconds"},
        {uncached, cached});
    if (Status written = WritePlot(flags.plot_path, svg); !written.ok())
      return Fail(written.message(), 1);
  }
  if (flags.format == "json") {
    nlohmann::json list = nlohmann::json::array();
    for (const CacheCompareRow& r : rows) {
      list.push_back({{"length", r.length},
                      {"cached_s", r.cached_s},
                      {"uncached_s", r.uncached_s},
                      {"ratio", r.Ratio()},
                      {"saved_fraction", r.SavedFraction()},
                      {"same_tokens", r.same_tokens}});
    }
    std::printf("%s\n", list.dump(2).c_str());
  } else {
    std::printf(
        "| length | cached s | uncached s | ratio | time saved | same tokens |\n"
        "|---:|---:|---:|---:|---:|:---:|\n");
    for (const CacheCompareRow& r : rows) {
      std::printf("| %d | %.3f | %.3f | %.2fx | %s | %s |\n", r.length, r.cached_s, r.uncached_s,
                  r.Ratio(), Percent(r.SavedFraction()).c_str(), r.same_tokens ? "yes" : "NO");
    }
  }
  if (!all_same) return Fail("cached and uncached generation gave different tokens", 1);
  return 0;
}

// Issue "Speed": peak resident memory at most the model's tensors plus the KV budget plus 10%.
struct MemoryCheck {
  uint64_t peak_bytes = 0;  // max of the load's and the tests' peaks; 0: unknown (no /proc)
  uint64_t file_bytes = 0;  // the model's tensors
  uint64_t kv_bytes = 0;    // the largest test's KV storage
  double fraction = 0;      // peak / (file + KV)
};

// load_peak: the peak when the model had been loaded (packing included), before the probes.
MemoryCheck CheckMemory(const Model& model, const std::vector<BenchResult>& results,
                        std::optional<uint64_t> load_peak, bool peak_reset) {
  MemoryCheck check;
  check.file_bytes = CostOf(model).file_tensor_bytes;
  for (const BenchResult& r : results) check.kv_bytes = std::max(check.kv_bytes, r.kv_bytes);
  const std::optional<uint64_t> peak = PeakResidentBytes();
  if (!peak_reset || !peak || !load_peak) return check;
  check.peak_bytes = std::max(*peak, *load_peak);
  check.fraction = static_cast<double>(check.peak_bytes) /
                   static_cast<double>(check.file_bytes + check.kv_bytes);
  return check;
}

}  // namespace

// --spec / --spec-replay: plain against speculative decoding, same output checked per row.
int RunSpecBenchCommand(const Args& args, const Model& model, const ModelOptions& model_options,
                        const BenchFlags& flags) {
  auto engine = ReadEngineOptions(args, model_options);
  if (!engine.ok()) return Fail(engine.message(), 2);
  SpecBenchOptions o{.engine = *engine};
  o.engine.n_threads = model_options.n_threads;
  if (args.Has("--spec-replay")) {
    if (o.engine.spec.method != SpecMethod::kNone)
      return Fail("flag --spec-replay does not go with --spec", 2);
    const std::string text = *args.Get("--spec-replay");
    size_t start = 0;
    while (start <= text.size()) {
      const size_t comma = std::min(text.find(',', start), text.size());
      const std::string item = text.substr(start, comma - start);
      start = comma + 1;
      if (item == "repeats") {
        o.replay_repeats = true;
        continue;
      }
      char* end = nullptr;
      const double p = std::strtod(item.c_str(), &end);
      if (item.empty() || *end != '\0' || !(p >= 0 && p <= 1))
        return Fail("flag --spec-replay: '" + item + "' is not a probability in [0, 1] or repeats",
                    2);
      o.accept.push_back(p);
    }
  }
  auto streams = ReadCounts(args, "--spec-streams", "1,16", 1, 4096);
  if (!streams.ok()) return Fail(streams.message(), 2);
  o.streams.assign(streams->begin(), streams->end());
  auto tasks = ParseSpecTasks(args.GetOr("--spec-task", "both"));
  if (!tasks.ok()) return Fail("flag --spec-task: " + tasks.message(), 2);
  o.tasks = std::move(tasks).value();
  const std::string sampling = args.GetOr("--spec-sampling", "greedy");
  if (sampling == "both") {
    o.samplings = {"greedy", "seeded"};
  } else if (sampling == "greedy" || sampling == "seeded") {
    o.samplings = {sampling};
  } else {
    return Fail("flag --spec-sampling: '" + sampling + "' is not one of greedy, seeded, both", 2);
  }
  o.n_gen = flags.n_gen.empty() || flags.n_gen[0] == 0 ? 128 : flags.n_gen[0];
  o.repeats = flags.repeats;
  if (flags.format == "csv") return Fail("flag --output-format: csv does not go with --spec", 2);
  auto draft = OpenDraftModel(args, o.engine.spec);
  if (!draft.ok()) return Fail(draft.message(), 1);
  auto tokenizer = Tokenizer::FromGguf(model.file());
  if (!tokenizer.ok()) return Fail(tokenizer.message(), 1);
  auto rows = RunSpecBench(model, **tokenizer, o);
  if (!rows.ok()) return Fail(rows.message(), 1);
  std::fputs(FormatSpecBench(*rows, flags.format).c_str(), stdout);
  return 0;
}

// --structured: constrained against plain decoding, compile times and the mask's cost.
int RunGrammarBenchCommand(const Args& args, const Model& model, const ModelOptions& model_options,
                           const BenchFlags& flags) {
  auto engine = ReadEngineOptions(args, model_options);
  if (!engine.ok()) return Fail(engine.message(), 2);
  GrammarBenchOptions o{.engine = *engine, .schema = *args.Get("--structured")};
  o.engine.n_threads = model_options.n_threads;
  o.engine.spec = SpecOptions{};
  o.n_gen = flags.n_gen.empty() || flags.n_gen[0] == 0 ? 128 : flags.n_gen[0];
  o.repeats = flags.repeats;
  o.format = flags.format;
  if (flags.format == "csv")
    return Fail("flag --output-format: csv does not go with --structured", 2);
  auto tokenizer = Tokenizer::FromGguf(model.file());
  if (!tokenizer.ok()) return Fail(tokenizer.message(), 1);
  auto rows = RunGrammarBench(model, **tokenizer, o);
  if (!rows.ok()) return Fail(rows.message(), 1);
  std::fputs(FormatGrammarBench(*rows, flags.format).c_str(), stdout);
  return 0;
}

namespace {

// One `kvserve bench` run: what was measured, for the printers.
struct BenchReport {
  const Model* model = nullptr;
  const Backend* backend = nullptr;
  int n_threads = 0;
  KvFormat kv_format;
  ModelCost cost;
  Measurement bandwidth, flops;  // the probes behind the ceilings
  double decode_ceiling = 0, prefill_ceiling = 0;
  std::vector<BenchTest> tests;  // [results.size()]
  std::vector<BenchResult> results;
  std::vector<BenchProfile> profiles;  // --profile
  MemoryCheck memory;
  bool profiled = false;

  std::string name() const {
    const ModelConfig& config = model->config();
    return config.name.empty() ? config.arch : config.name;
  }
  std::string type() const { return GgmlTypeName(cost.main_type); }
};

// The ceilings: decode reads every multiplied weight once per token; prefill does 2 FLOP per
// multiplied weight per token at the measured matmul rate of the model's type.
void MeasureCeilings(const BenchFlags& flags, Workspace& probe, BenchReport& r) {
  r.cost = CostOf(*r.model);
  r.bandwidth =
      r.backend->MeasureReadBandwidth(static_cast<uint64_t>(flags.bandwidth_mib) << 20, 3, probe);
  r.flops = r.backend->MeasureMatmulFlops(r.cost.main_type, 64, 2048, 2048, 3, probe);
  r.decode_ceiling = r.bandwidth.best / static_cast<double>(r.cost.weight_bytes);
  r.prefill_ceiling = r.flops.best / (2.0 * static_cast<double>(r.cost.matmul_params));
}

// -p and -n: one sequence each, as llama-bench.
Status RunSingleTests(const BenchFlags& flags, ProfilingBackend* profiler, BenchReport& r) {
  for (BenchTest& test : r.tests) {
    test.repeats = flags.repeats;
    test.kv_type = r.kv_format;
    test.seed = flags.seed;
    if (profiler) test.before_timed_runs = [profiler] { profiler->Reset(); };
    auto result = RunBenchTest(*r.model, test, r.n_threads);
    if (!result.ok()) return result.status();
    if (profiler) {
      r.profiles.push_back({.test = result->test,
                            .ops = profiler->totals(),
                            .tokens = static_cast<double>(test.repeats) *
                                      (test.n_prompt > 0 ? test.n_prompt : test.n_gen),
                            .token_seconds = MeanSecondsPerToken(*result)});
    }
    result->ceiling_tokens_per_s = test.n_prompt > 0 ? r.prefill_ceiling : r.decode_ceiling;
    result->ceiling_fraction = result->mean / result->ceiling_tokens_per_s;
    r.results.push_back(*result);
  }
  return Status::Ok();
}

// --concurrency: N streams decoding at once through the serving engine. Weights are read once
// per step for all of them, so the ceiling is N decode ceilings, capped by the compute one.
// Errors from the engine flags are InvalidArgument (exit 2), the rest failures of the run.
Status RunConcurrentTests(const Args& args, const ModelOptions& model_options,
                          const BenchFlags& flags, BenchReport& r) {
  auto tokenizer = Tokenizer::FromGguf(r.model->file());
  if (!tokenizer.ok()) return Status::Internal(tokenizer.message());
  auto engine_options = ReadEngineOptions(args, model_options);
  if (!engine_options.ok()) return engine_options.status();
  const int n_gen = flags.n_gen.empty() || flags.n_gen[0] == 0 ? 128 : flags.n_gen[0];
  for (int32_t n : flags.concurrency) {
    ConcurrentTest test{.concurrency = n,
                        .n_gen = n_gen,
                        .repeats = flags.repeats,
                        .engine = *engine_options,
                        .seed = flags.seed};
    test.engine.n_threads = r.n_threads;
    auto result = RunConcurrentDecode(*r.model, **tokenizer, test);
    if (!result.ok()) return Status::Internal(result.message());
    result->ceiling_tokens_per_s = std::min(n * r.decode_ceiling, r.prefill_ceiling);
    result->ceiling_fraction = result->mean / result->ceiling_tokens_per_s;
    r.results.push_back(*result);
    r.tests.push_back({.n_gen = n_gen});
  }
  return Status::Ok();
}

void PrintBenchJson(const BenchReport& r) {
  const uint64_t kv_per_token = r.model->kv_spec().BytesPerToken(r.kv_format);
  nlohmann::json list = nlohmann::json::array();
  for (size_t i = 0; i < r.results.size(); ++i) {
    const BenchResult& result = r.results[i];
    list.push_back({{"test", result.test},
                    {"tokens_per_s", result.mean},
                    {"stddev", result.stddev},
                    {"runs", result.tokens_per_s},
                    {"ceiling_tokens_per_s", result.ceiling_tokens_per_s},
                    {"ceiling_fraction", result.ceiling_fraction},
                    {"model", r.name()},
                    {"type", r.type()},
                    {"threads", r.n_threads},
                    {"backend", r.backend->name()},
                    {"isa", r.backend->kernel_set()},
                    {"depth", r.tests[i].depth},
                    {"bandwidth_gb_s", r.bandwidth.best / 1e9},
                    {"matmul_gflop_s", r.flops.best / 1e9},
                    {"weight_bytes_per_token", r.cost.weight_bytes},
                    {"kv_bytes", result.kv_bytes},
                    {"kv_type", r.kv_format.Name()},
                    {"kv_bytes_per_token", kv_per_token},
                    {"model_file_bytes", r.memory.file_bytes},
                    {"peak_resident_bytes", r.memory.peak_bytes},
                    {"peak_over_file_plus_kv", r.memory.fraction},
                    {"decode_tiles", r.backend->TuningReport()}});
  }
  if (r.profiled) {
    nlohmann::json with_profiles = {{"results", list}, {"profiles", nlohmann::json::array()}};
    for (const BenchProfile& p : r.profiles) with_profiles["profiles"].push_back(ProfileJson(p));
    list = with_profiles;
  }
  std::printf("%s\n", list.dump(2).c_str());
}

void PrintBenchCsv(const BenchReport& r) {
  std::printf(
      "model,type,threads,test,tokens_per_s,stddev,runs,ceiling_tokens_per_s,"
      "ceiling_fraction\n");
  for (const BenchResult& result : r.results) {
    std::printf("%s,%s,%d,%s,%.3f,%.3f,%zu,%.3f,%.4f\n", r.name().c_str(), r.type().c_str(),
                r.n_threads, result.test.c_str(), result.mean, result.stddev,
                result.tokens_per_s.size(), result.ceiling_tokens_per_s, result.ceiling_fraction);
  }
}

void PrintBenchTable(const BenchReport& r) {
  std::printf(
      "| model | type | size | params | isa | threads | test | t/s | ceiling t/s | "
      "of ceiling |\n|---|---|---:|---:|---|---:|---|---:|---:|---:|\n");
  for (const BenchResult& result : r.results) {
    std::printf("| %s | %s | %.2f MiB | %.2f M | %s | %d | %s | %.2f ± %.2f | %.1f | %s |\n",
                r.name().c_str(), r.type().c_str(), r.cost.file_tensor_bytes / 1048576.0,
                r.cost.total_params / 1e6, r.backend->kernel_set().c_str(), r.n_threads,
                result.test.c_str(), result.mean, result.stddev, result.ceiling_tokens_per_s,
                Percent(result.ceiling_fraction).c_str());
  }
  std::printf(
      "\nceilings: tg = %.1f GB/s read / %.1f MiB of weights per token; "
      "pp = %.1f GFLOP/s (%s matmul, m=64) / (2 x %.2f M multiplied weights)\n",
      r.bandwidth.best / 1e9, r.cost.weight_bytes / 1048576.0, r.flops.best / 1e9, r.type().c_str(),
      r.cost.matmul_params / 1e6);
  const uint64_t kv_per_token = r.model->kv_spec().BytesPerToken(r.kv_format);
  const uint64_t kv_f16_per_token = r.model->kv_spec().BytesPerToken(KvType::kF16);
  std::printf("kv cache: %s, %llu bytes/token (%.3f x f16)\n", r.kv_format.Name().c_str(),
              static_cast<unsigned long long>(kv_per_token),
              static_cast<double>(kv_per_token) / static_cast<double>(kv_f16_per_token));
  if (const std::string tiles = r.backend->TuningReport(); !tiles.empty()) {
    std::printf("decode tiles (KVSERVE_DECODE_TILE=auto|first|alt): %s\n", tiles.c_str());
  }
  const MemoryCheck& memory = r.memory;
  if (memory.peak_bytes > 0) {
    std::printf(
        "memory: peak resident %.1f MiB (loading and the tests); "
        "model file %.1f MiB + KV %.1f MiB (the largest test's) = %.1f MiB; peak / that = %.3f\n",
        memory.peak_bytes / 1048576.0, memory.file_bytes / 1048576.0, memory.kv_bytes / 1048576.0,
        (memory.file_bytes + memory.kv_bytes) / 1048576.0, memory.fraction);
  }
  for (const BenchProfile& p : r.profiles) std::printf("%s", FormatProfile(p).c_str());
}

// {"extract": [[{"role": ..., "content": ...}, ...], ...], "code": ..., "multiturn": ...}: each
// chat task's two conversations, as the speculative bench renders them.
int PrintSpecTasks() {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const std::string& task : AllSpecTasks()) {
    if (!IsChatSpecTask(task)) continue;
    for (int i = 0; i < 2; ++i) {
      nlohmann::ordered_json messages = nlohmann::ordered_json::array();
      for (const ChatMessage& m : SpecTaskChat(task, i)) {
        messages.push_back({{"role", m.role}, {"content", m.content}});
      }
      out[task].push_back(std::move(messages));
    }
  }
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}

}  // namespace

int RunBench(const std::vector<std::string>& argv) {
  auto args = Args::Parse(argv, BenchFlagTable());
  if (!args.ok()) return Fail(args.message() + "\n" + kUsage, 2);
  if (!args->positional().empty()) {
    return Fail("unexpected argument '" + args->positional()[0] + "'\n" + kUsage, 2);
  }
  if (args->Has("--spec-print-tasks")) return PrintSpecTasks();
  auto model_options = ReadModelOptions(*args);
  if (!model_options.ok()) return Fail(model_options.message() + "\n" + kUsage, 2);
  auto flags = ReadBenchFlags(*args);
  if (!flags.ok()) return Fail(flags.message() + "\n" + kUsage, 2);
  // --profile: the model runs on a ProfilingBackend around the CLI's (declared first, so that it
  // outlives the model).
  const Backend& backend = *model_options->backend;
  std::optional<ProfilingBackend> profiler;
  if (flags->profile) profiler.emplace(backend);
  auto model = profiler ? OpenModel(*model_options, *profiler) : OpenModel(*model_options);
  if (!model.ok()) return Fail(model.message(), 1);
  const std::optional<uint64_t> load_peak = PeakResidentBytes();
  // The probes' workspace; its thread count is the tests' too.
  const std::unique_ptr<Workspace> probe =
      backend.NewWorkspace({.n_threads = model_options->n_threads});
  BenchReport report{.model = model->get(),
                     .backend = &backend,
                     .n_threads = probe->threads(),
                     .kv_format = model_options->kv_type,
                     .profiled = profiler.has_value()};
  if (flags->cache_compare) {
    return RunCacheCompare(**model, *model_options, *flags, report.n_threads);
  }
  if (args->Has("--structured"))
    return RunGrammarBenchCommand(*args, **model, *model_options, *flags);
  if (args->GetOr("--spec", "none") != "none" || args->Has("--spec-replay"))
    return RunSpecBenchCommand(*args, **model, *model_options, *flags);

  MeasureCeilings(*flags, *probe, report);
  // The probes' buffers are freed by now: reset the peak so that it covers the tests (the load's
  // peak was read before the probes).
  const bool peak_reset = ResetPeakResident();
  for (int32_t n : flags->n_prompt) {
    if (n > 0) report.tests.push_back({.n_prompt = n, .depth = flags->depth});
  }
  for (int32_t n : flags->n_gen) {
    if (n > 0) report.tests.push_back({.n_gen = n, .depth = flags->depth});
  }
  if (report.tests.empty() && flags->concurrency.empty()) {
    return Fail("nothing to run: every -p and -n is 0", 2);
  }
  if (Status run = RunSingleTests(*flags, profiler ? &*profiler : nullptr, report); !run.ok()) {
    return Fail(run.message(), 1);
  }
  if (!flags->concurrency.empty()) {
    if (Status run = RunConcurrentTests(*args, *model_options, *flags, report); !run.ok()) {
      return Fail(run.message(), run.code() == StatusCode::kInvalidArgument ? 2 : 1);
    }
  }
  report.memory = CheckMemory(**model, report.results, load_peak, peak_reset);
  if (flags->format == "json") {
    PrintBenchJson(report);
  } else if (flags->format == "csv") {
    PrintBenchCsv(report);
  } else {
    PrintBenchTable(report);
  }
  return 0;
}

}  // namespace kvserve
