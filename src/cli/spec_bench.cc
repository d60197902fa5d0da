#include "cli/spec_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/spec_tasks.h"
#include "engine/completion.h"
#include "engine/proposer_replay.h"

namespace kvserve {

namespace {

using Clock = std::chrono::steady_clock;

Result<std::vector<Request>> Requests(const Tokenizer& tokenizer, const ChatTemplate& chat,
                                      const std::string& task, const std::string& sampling,
                                      int streams, int n_gen) {
  std::vector<Request> out;
  for (int i = 0; i < streams; ++i) {
    auto prompt = SpecTaskPrompt(task, i, tokenizer, chat);
    if (!prompt.ok()) return prompt.status();
    Request r;
    r.id = task + "-" + std::to_string(i);
    r.prompt = std::move(prompt).value();
    r.max_tokens = n_gen;
    // Raw-text tasks run to n_gen; a chat answer ends where the model ends its turn.
    r.ignore_eos = task == "grounded" || task == "free";
    if (sampling == "seeded") {
      r.sampling.temperature = 0.8f;
      r.sampling.top_p = 0.95f;
      r.sampling.seed = 1000 + i;
    } else {
      r.sampling.temperature = 0.0f;
    }
    out.push_back(std::move(r));
  }
  return out;
}

struct RunResult {
  double tokens_per_s = 0;
  std::vector<std::vector<int32_t>> tokens;
  uint64_t drafted = 0;
  uint64_t accepted = 0;
};

Result<RunResult> RunOnce(const Model& model, const Tokenizer& tokenizer, EngineOptions options,
                          const std::vector<Request>& requests) {
  int longest = 0;
  for (const Request& r : requests) longest = std::max<int>(longest, r.prompt.size());
  options.n_ctx = longest + requests[0].max_tokens + options.spec.max_tokens + 1;
  options.max_num_seqs = static_cast<int>(requests.size());
  auto engine = Engine::Create(model, tokenizer, options);
  if (!engine.ok()) return engine.status();
  const auto start = Clock::now();
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const Request& r : requests) {
    auto stream = (*engine)->Submit(r);
    if (!stream.ok()) return stream.status();
    streams.push_back(*stream);
  }
  RunResult result;
  // Decode rate: tokens after each stream's first, over the span from the earliest first token to
  // the last finish (the prefill, the same with and without speculation, is left out).
  uint64_t generated = 0;
  double first_ms = 1e300, last_ms = 0;
  for (auto& stream : streams) {
    auto done = Complete(*stream, start);
    if (!done.ok()) return done.status();
    generated += std::max<size_t>(done->tokens.size(), 1) - 1;
    first_ms = std::min(first_ms, done->prompt_ms);
    last_ms = std::max(last_ms, done->prompt_ms + done->decode_ms);
    result.drafted += done->usage.drafted_tokens;
    result.accepted += done->usage.accepted_tokens;
    result.tokens.push_back(std::move(done->tokens));
  }
  result.tokens_per_s = last_ms > first_ms ? generated / ((last_ms - first_ms) / 1000.0) : 0;
  return result;
}

// The best of `repeats` timed runs (outputs are the same every time: greedy or seeded, batch
// invariant).
Result<RunResult> RunBest(const Model& model, const Tokenizer& tokenizer,
                          const EngineOptions& options, const std::vector<Request>& requests,
                          int repeats) {
  Result<RunResult> best = Status::InvalidArgument("no repeats");
  for (int r = 0; r < std::max(1, repeats); ++r) {
    auto run = RunOnce(model, tokenizer, options, requests);
    if (!run.ok()) return run.status();
    if (!best.ok() || run->tokens_per_s > best->tokens_per_s) best = std::move(run);
  }
  return best;
}

// (task, sampling) in row order: each task under each sampling.
std::vector<std::pair<std::string, std::string>> TaskSamplings(const SpecBenchOptions& options) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& task : options.tasks) {
    for (const std::string& sampling : options.samplings) out.emplace_back(task, sampling);
  }
  return out;
}

// The 4-token runs of the repeat count and ceiling: the 3-token key of the default n-gram lookup
// and the token it drafts.
constexpr int kRepeatSpan = 4;

// The plain outputs' tokens and how many of them repeat earlier text (RepeatedPositions).
struct RepeatCount {
  uint64_t generated = 0;
  uint64_t repeated = 0;
};
RepeatCount CountRepeats(const std::vector<Request>& requests,
                         const std::vector<std::vector<int32_t>>& outputs) {
  RepeatCount count;
  for (size_t i = 0; i < requests.size(); ++i) {
    std::vector<int32_t> all = requests[i].prompt;
    all.insert(all.end(), outputs[i].begin(), outputs[i].end());
    const std::vector<bool> marks = RepeatedPositions(all, requests[i].prompt.size(), kRepeatSpan);
    count.generated += outputs[i].size();
    count.repeated += std::count(marks.begin(), marks.end(), true);
  }
  return count;
}

}  // namespace

Result<std::vector<SpecBenchRow>> RunSpecBench(const Model& model, const Tokenizer& tokenizer,
                                               const SpecBenchOptions& options) {
  const bool replay = options.engine.spec.method == SpecMethod::kNone;
  auto chat = ChatTemplate::ForModel(model.file(), tokenizer, "");
  if (!chat.ok()) return chat.status();
  EngineOptions plain_options = options.engine;
  plain_options.spec = SpecOptions{};
  // Warm-up: faults the weights in (and the draft model's) before anything is timed.
  {
    auto warm = Requests(tokenizer, *chat, "free", "greedy", 1, 4);
    if (!warm.ok()) return warm.status();
    KVSERVE_RETURN_IF_ERROR(RunOnce(model, tokenizer, plain_options, *warm).status());
    if (!replay) KVSERVE_RETURN_IF_ERROR(RunOnce(model, tokenizer, options.engine, *warm).status());
  }
  std::vector<SpecBenchRow> rows;
  for (const auto& [task, sampling] : TaskSamplings(options)) {
    for (int streams : options.streams) {
      auto made = Requests(tokenizer, *chat, task, sampling, streams, options.n_gen);
      if (!made.ok()) return made.status();
      const std::vector<Request>& requests = *made;
      auto plain = RunBest(model, tokenizer, plain_options, requests, options.repeats);
      if (!plain.ok()) return plain.status();
      const RepeatCount repeats = CountRepeats(requests, plain->tokens);
      std::vector<std::pair<std::string, EngineOptions>> variants;
      if (replay) {
        std::map<std::string, std::vector<int32_t>> reference;
        for (size_t i = 0; i < requests.size(); ++i) {
          std::vector<int32_t> all = requests[i].prompt;
          all.insert(all.end(), plain->tokens[i].begin(), plain->tokens[i].end());
          reference[requests[i].id] = std::move(all);
        }
        if (options.replay_repeats) {
          std::map<std::string, size_t> prompt_sizes;
          for (const Request& r : requests) prompt_sizes[r.id] = r.prompt.size();
          EngineOptions o = options.engine;
          o.spec.proposer = std::make_shared<ReplayProposer>(reference, prompt_sizes, kRepeatSpan);
          variants.emplace_back("replay@repeats", std::move(o));
        }
        for (double accept : options.accept) {
          EngineOptions o = options.engine;
          o.spec.proposer =
              std::make_shared<ReplayProposer>(reference, accept, model.config().n_vocab, 1);
          char name[32];
          std::snprintf(name, sizeof(name), "replay@%.2f", accept);
          variants.emplace_back(name, std::move(o));
        }
      } else {
        variants.emplace_back(SpecMethodName(options.engine.spec.method), options.engine);
      }
      for (const auto& [name, spec_options] : variants) {
        auto spec = RunBest(model, tokenizer, spec_options, requests, options.repeats);
        if (!spec.ok()) return spec.status();
        SpecBenchRow row{.task = task,
                         .streams = streams,
                         .method = name,
                         .sampling = sampling,
                         .plain_tokens_per_s = plain->tokens_per_s,
                         .spec_tokens_per_s = spec->tokens_per_s,
                         .drafted = spec->drafted,
                         .accepted = spec->accepted,
                         .generated = repeats.generated,
                         .repeated = repeats.repeated,
                         .same_output = spec->tokens == plain->tokens};
        std::fprintf(stderr,
                     "kvserve bench: %s %s x%d %s: plain %.2f t/s, spec %.2f t/s (%.2fx), "
                     "acceptance %.1f%%, repeats %.1f%%, same output: %s\n",
                     task.c_str(), sampling.c_str(), streams, name.c_str(), row.plain_tokens_per_s,
                     row.spec_tokens_per_s, row.speedup(), 100 * row.acceptance(),
                     100 * row.repeat_share(), row.same_output ? "yes" : "NO");
        rows.push_back(row);
        if (!row.same_output) {
          return Status::Internal("speculative decoding changed the output of " + task + " " +
                                  sampling + " x" + std::to_string(streams) + " " + name);
        }
      }
    }
  }
  return rows;
}

std::string FormatSpecBench(const std::vector<SpecBenchRow>& rows, const std::string& format) {
  if (format == "json") {
    nlohmann::json list = nlohmann::json::array();
    for (const SpecBenchRow& r : rows) {
      list.push_back({{"task", r.task},
                      {"streams", r.streams},
                      {"method", r.method},
                      {"sampling", r.sampling},
                      {"plain_tokens_per_s", r.plain_tokens_per_s},
                      {"spec_tokens_per_s", r.spec_tokens_per_s},
                      {"speedup", r.speedup()},
                      {"drafted_tokens", r.drafted},
                      {"accepted_tokens", r.accepted},
                      {"acceptance", r.acceptance()},
                      {"generated_tokens", r.generated},
                      {"repeated_tokens", r.repeated},
                      {"repeat_share", r.repeat_share()},
                      {"same_output", r.same_output}});
    }
    return list.dump(2) + "\n";
  }
  std::string out =
      "| task | sampling | streams | method | plain t/s | spec t/s | speed-up | drafted | accepted "
      "| acceptance | repeats | same output "
      "|\n|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|:---:|\n";
  for (const SpecBenchRow& r : rows) {
    char line[256];
    std::snprintf(
        line, sizeof(line),
        "| %s | %s | %d | %s | %.2f | %.2f | %.2fx | %llu | %llu | %.1f%% | %.1f%% | %s |\n",
        r.task.c_str(), r.sampling.c_str(), r.streams, r.method.c_str(), r.plain_tokens_per_s,
        r.spec_tokens_per_s, r.speedup(), static_cast<unsigned long long>(r.drafted),
        static_cast<unsigned long long>(r.accepted), 100 * r.acceptance(), 100 * r.repeat_share(),
        r.same_output ? "yes" : "NO");
    out += line;
  }
  return out;
}

}  // namespace kvserve
