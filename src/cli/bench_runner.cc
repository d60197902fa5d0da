#include "cli/bench_runner.h"

#include <chrono>
#include <cmath>
#include <map>
#include <random>

#include "cli/engine_flags.h"
#include "engine/completion.h"
#include "engine/engine.h"
#include "engine/sequence_runner.h"

namespace kvserve {

namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

uint64_t Bytes(const WeightMatrix& w) {
  return w.data == nullptr ? 0 : static_cast<uint64_t>(w.n_out) * w.row_bytes;
}
uint64_t Params(const WeightMatrix& w) {
  return w.data == nullptr ? 0 : static_cast<uint64_t>(w.n_out) * w.n_in;
}

std::vector<int32_t> RandomTokens(int n, int n_vocab, std::mt19937_64& rng) {
  std::uniform_int_distribution<int32_t> dist(0, n_vocab - 1);
  std::vector<int32_t> tokens(n);
  for (int32_t& t : tokens) t = dist(rng);
  return tokens;
}

// One timed run of `test` on `runner`, emptied first (its KV storage and scratch stay allocated,
// as llama-bench keeps its context between repetitions): tokens per second of the timed part.
Result<double> RunOnce(SequenceRunner& runner, const BenchTest& test, int n_vocab,
                       std::mt19937_64& rng) {
  runner.Truncate(0);
  const int n_timed = test.n_prompt > 0 ? test.n_prompt : test.n_gen;
  if (test.depth > 0) {
    const std::vector<int32_t> context = RandomTokens(test.depth, n_vocab, rng);
    KVSERVE_RETURN_IF_ERROR(runner.Append(context));
  }
  const std::vector<int32_t> tokens = RandomTokens(n_timed, n_vocab, rng);
  const auto start = Clock::now();
  if (test.n_prompt > 0) {
    KVSERVE_RETURN_IF_ERROR(runner.Append(tokens));
  } else {
    for (const int32_t& token : tokens) {
      KVSERVE_RETURN_IF_ERROR(runner.Append(std::span(&token, 1)));
    }
  }
  return n_timed / SecondsSince(start);
}

void SetMeanAndStddev(BenchResult& result) {
  const double n = static_cast<double>(result.tokens_per_s.size());
  for (double v : result.tokens_per_s) result.mean += v / n;
  if (n > 1) {
    double sq = 0;
    for (double v : result.tokens_per_s) sq += (v - result.mean) * (v - result.mean);
    result.stddev = std::sqrt(sq / (n - 1));
  }
}

}  // namespace

ModelCost CostOf(const Model& model) {
  ModelCost cost;
  // The type holding most of the matrix bytes is the one the matmul rate is measured on.
  std::map<GgmlType, uint64_t> bytes_by_type;
  for (const WeightMatrix* m : model.matrices()) {
    // A mixture's expert is read and multiplied for its routed share of the tokens.
    const double share = model.TokenShare(m);
    cost.matmul_params += static_cast<uint64_t>(static_cast<double>(Params(*m)) * share);
    cost.weight_bytes += static_cast<uint64_t>(static_cast<double>(Bytes(*m)) * share);
    bytes_by_type[m->type] += Bytes(*m);
  }
  uint64_t most = 0;
  for (const auto& [type, bytes] : bytes_by_type) {
    if (bytes > most) {
      most = bytes;
      cost.main_type = type;
    }
  }
  for (const TensorInfo& t : model.file().tensors()) {
    cost.file_tensor_bytes += t.n_bytes;
    cost.total_params += t.n_elements;
  }
  return cost;
}

std::string BenchTest::Name() const {
  std::string name = n_prompt > 0 ? "pp" + std::to_string(n_prompt) : "tg" + std::to_string(n_gen);
  if (depth > 0) name += " @ d" + std::to_string(depth);
  return name;
}

Result<BenchResult> RunBenchTest(const Model& model, const BenchTest& test, int n_threads) {
  if ((test.n_prompt > 0) == (test.n_gen > 0)) {
    return Status::InvalidArgument("a bench test is either pp (n_prompt " +
                                   std::to_string(test.n_prompt) + ") or tg (n_gen " +
                                   std::to_string(test.n_gen) + ")");
  }
  if (test.repeats < 1) {
    return Status::InvalidArgument("repeats " + std::to_string(test.repeats) +
                                   " must be at least 1");
  }
  const ModelConfig& config = model.config();
  const int needed = test.depth + test.n_prompt + test.n_gen;
  if (model.max_positions() > 0 && needed > model.max_positions()) {
    return Status::InvalidArgument(test.Name() + " needs " + std::to_string(needed) +
                                   " positions, more than the model's " +
                                   std::to_string(model.max_positions()));
  }
  std::mt19937_64 rng(test.seed);
  SequenceRunner runner(model, test.kv_type, needed, n_threads);
  // Warm-up, like llama-bench's: the whole prompt once (or 4 decode steps), which faults the mapped
  // weights in and grows the scratch buffers to the test's size.
  BenchTest warmup = test;
  if (warmup.n_gen > 0) warmup.n_gen = std::min(warmup.n_gen, 4);
  warmup.depth = 0;
  KVSERVE_RETURN_IF_ERROR(RunOnce(runner, warmup, config.n_vocab, rng));

  BenchResult result{.test = test.Name(), .kv_bytes = runner.kv_bytes()};
  if (test.before_timed_runs) test.before_timed_runs();
  for (int r = 0; r < test.repeats; ++r) {
    auto rate = RunOnce(runner, test, config.n_vocab, rng);
    if (!rate.ok()) return rate.status();
    result.tokens_per_s.push_back(*rate);
  }
  SetMeanAndStddev(result);
  return result;
}

std::string ConcurrentTest::Name() const {
  return "tg" + std::to_string(n_gen) + " x" + std::to_string(concurrency);
}

namespace {

// One engine run of `test`: generated tokens per second, all streams together. *kv_bytes: the
// engine's KV pool.
Result<double> RunConcurrentOnce(const Model& model, const Tokenizer& tokenizer,
                                 const ConcurrentTest& test, int n_gen, std::mt19937_64& rng,
                                 uint64_t* kv_bytes) {
  EngineOptions options = test.engine;
  options.n_ctx = n_gen + 1;
  options.max_num_seqs = test.concurrency;
  auto engine = Engine::Create(model, tokenizer, options);
  if (!engine.ok()) return engine.status();
  std::vector<std::shared_ptr<RequestStream>> streams;
  const auto start = Clock::now();
  for (int i = 0; i < test.concurrency; ++i) {
    Request request{.prompt = RandomTokens(1, model.config().n_vocab, rng),
                    .max_tokens = n_gen,
                    .ignore_eos = true};
    request.sampling.temperature = 0.0f;
    auto stream = (*engine)->Submit(std::move(request));
    if (!stream.ok()) return stream.status();
    streams.push_back(*stream);
  }
  uint64_t generated = 0;
  for (const auto& stream : streams) {
    for (;;) {
      const std::optional<RequestEvent> event = stream->Next(std::chrono::milliseconds(1000));
      if (!event) continue;
      if (event->kind == RequestEvent::Kind::kFinish) break;
      ++generated;
    }
  }
  const double seconds = SecondsSince(start);
  // The engine publishes its counters every step; every stream has finished, so they are current.
  *kv_bytes = (*engine)->Stats().kv_bytes;
  return generated / seconds;
}

}  // namespace

Result<BenchResult> RunConcurrentDecode(const Model& model, const Tokenizer& tokenizer,
                                        const ConcurrentTest& test) {
  if (test.concurrency < 1 || test.n_gen < 1 || test.repeats < 1) {
    return Status::InvalidArgument("concurrent test " + test.Name() + " with " +
                                   std::to_string(test.repeats) + " repeats is empty");
  }
  std::mt19937_64 rng(test.seed);
  uint64_t kv_bytes = 0;
  KVSERVE_RETURN_IF_ERROR(
      RunConcurrentOnce(model, tokenizer, test, std::min(test.n_gen, 4), rng, &kv_bytes));
  BenchResult result{.test = test.Name()};
  for (int r = 0; r < test.repeats; ++r) {
    auto rate = RunConcurrentOnce(model, tokenizer, test, test.n_gen, rng, &result.kv_bytes);
    if (!rate.ok()) return rate.status();
    result.tokens_per_s.push_back(*rate);
  }
  SetMeanAndStddev(result);
  return result;
}

Result<CacheCompareRow> CompareCache(const Model& model, const Tokenizer& tokenizer,
                                     std::span<const int32_t> prompt, int length,
                                     const KvFormat& kv_type, int n_threads) {
  if (length < 1)
    return Status::InvalidArgument("length " + std::to_string(length) + " must be positive");
  // The context holds the prompt and the completion (engine/request.h, FitContext).
  const int n_ctx = static_cast<int>(prompt.size()) + length;
  if (model.max_positions() > 0 && n_ctx > model.max_positions()) {
    return Status::InvalidArgument(
        "length " + std::to_string(length) + " after a " + std::to_string(prompt.size()) +
        "-token prompt needs a context of " + std::to_string(n_ctx) + ", more than the model's " +
        std::to_string(model.max_positions()));
  }
  const ModelOptions single{.n_threads = n_threads, .n_ctx = n_ctx, .kv_type = kv_type};
  Request request{.prompt = std::vector<int32_t>(prompt.begin(), prompt.end()),
                  .max_tokens = length,
                  .ignore_eos = true};
  request.sampling.temperature = 0.0f;
  CacheCompareRow row{.length = length};
  std::vector<int32_t> tokens[2];
  for (int pass = 0; pass < 2; ++pass) {
    auto engine = Engine::Create(model, tokenizer,
                                 SingleStreamEngineOptions(single, 16, /*recompute=*/pass == 1));
    if (!engine.ok()) return engine.status();
    const auto start = Clock::now();
    auto stream = (*engine)->Submit(request);
    if (!stream.ok()) return stream.status();
    auto result = Complete(**stream, start);
    if (!result.ok()) return result.status();
    (pass == 0 ? row.cached_s : row.uncached_s) = SecondsSince(start);
    tokens[pass] = std::move(result->tokens);
  }
  row.same_tokens = tokens[0] == tokens[1] && static_cast<int>(tokens[0].size()) == length;
  return row;
}

namespace {

// One engine run of `inputs`, one greedy request each, all submitted at once: seconds from the
// first Submit to the last finish.
Result<double> RunInputsOnce(const Model& model, const Tokenizer& tokenizer,
                             const SharedInputTest& test,
                             const std::vector<std::vector<int32_t>>& inputs, int n_gen) {
  const EngineOptions options{.n_threads = test.n_threads,
                              .n_ctx = test.n_input + n_gen + 1,
                              .kv_type = test.kv_type,
                              .max_num_seqs = static_cast<int>(inputs.size()),
                              .max_batched_tokens = std::max(512, test.n_input + 1),
                              .prefix_caching = true};
  auto engine = Engine::Create(model, tokenizer, options);
  if (!engine.ok()) return engine.status();
  std::vector<std::shared_ptr<RequestStream>> streams;
  const auto start = Clock::now();
  for (const std::vector<int32_t>& input : inputs) {
    Request request{.prompt = input, .max_tokens = n_gen, .ignore_eos = true};
    request.sampling.temperature = 0.0f;
    auto stream = (*engine)->Submit(std::move(request));
    if (!stream.ok()) return stream.status();
    streams.push_back(*stream);
  }
  for (const auto& stream : streams) {
    auto result = Complete(*stream, start);
    if (!result.ok()) return result.status();
  }
  return SecondsSince(start);
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n == 0 ? 0 : n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace

Result<SharedInputRow> CompareSharedInput(const Model& model, const Tokenizer& tokenizer,
                                          const SharedInputTest& test) {
  if (model.cross_group() < 0) {
    return Status::InvalidArgument("model '" + model.config().name + "' has no encoder");
  }
  if (test.n_requests < 1 || test.n_input < 1 || test.n_gen < 1 || test.repeats < 1) {
    return Status::InvalidArgument("shared-input test of " + std::to_string(test.n_requests) +
                                   " requests, " + std::to_string(test.n_input) +
                                   " input tokens, " + std::to_string(test.n_gen) + " generated, " +
                                   std::to_string(test.repeats) + " repeats is empty");
  }
  std::mt19937_64 rng(test.seed);
  const int n_vocab = model.config().n_vocab;
  std::vector<std::vector<int32_t>> same(test.n_requests, RandomTokens(test.n_input, n_vocab, rng));
  std::vector<std::vector<int32_t>> different;
  for (int i = 0; i < test.n_requests; ++i)
    different.push_back(RandomTokens(test.n_input, n_vocab, rng));
  KVSERVE_RETURN_IF_ERROR(RunInputsOnce(model, tokenizer, test, {same[0]}, 2));
  std::vector<double> seconds[2];
  for (int r = 0; r < test.repeats; ++r) {
    for (int pass = 0; pass < 2; ++pass) {
      auto s = RunInputsOnce(model, tokenizer, test, pass == 0 ? same : different, test.n_gen);
      if (!s.ok()) return s.status();
      seconds[pass].push_back(*s);
    }
  }
  return SharedInputRow{
      .test = test, .same_s = Median(seconds[0]), .different_s = Median(seconds[1])};
}

}  // namespace kvserve
