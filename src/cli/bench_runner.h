// The measurements behind `kvserve bench`: prefill (pp) and decode (tg) rates of one sequence in
// the manner of llama-bench, the ceilings of design.md's performance model to set them against,
// and the cache-versus-recompute comparison. Each test runs on n_threads threads of the model's
// backend.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "io/ggml_type.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "util/status.h"

namespace kvserve {

// What one token costs the model, counted from its weight matrices.
struct ModelCost {
  // Weights multiplied per token (output included, lookups not; a mixture's experts for their
  // routed share: expert_used_count / expert_count of them on average).
  uint64_t matmul_params = 0;
  uint64_t weight_bytes = 0;            // bytes of those weights: what a decode step must read
  uint64_t file_tensor_bytes = 0;       // every tensor of the file
  uint64_t total_params = 0;            // every element of every tensor
  GgmlType main_type = GgmlType::kF32;  // the type of the layer matrices
};
ModelCost CostOf(const Model& model);

struct BenchTest {
  int n_prompt = 0;  // pp test when > 0
  int n_gen = 0;     // tg test when > 0 (exactly one of the two is set)
  int depth = 0;     // tokens already in the context before the timed part
  int repeats = 5;
  KvFormat kv_type = KvType::kF32;
  uint64_t seed = 1;  // of the random token ids
  // Called after the warm-up, right before the timed runs (a profile starts there).
  std::function<void()> before_timed_runs;

  std::string Name() const;  // "pp512", "tg128", "tg128 @ d512"
};

struct BenchResult {
  std::string test;
  std::vector<double> tokens_per_s;  // one per repeat
  double mean = 0;
  double stddev = 0;  // sample standard deviation; 0 for one repeat
  double ceiling_tokens_per_s = 0;
  double ceiling_fraction = 0;  // mean / ceiling
  uint64_t kv_bytes = 0;        // KV storage the test allocated (the runner's, or the engine's)
};

// Runs `test` repeats times with random valid token ids on one SequenceRunner, emptied before each
// repeat (its KV storage and scratch stay allocated, as llama-bench keeps its context): a pp test
// appends n_prompt tokens in one batch after `depth` untimed ones; a tg test appends n_gen tokens
// one at a time after `depth` untimed ones. An untimed warm-up run (the whole prompt, or 4
// generated tokens; no depth) comes first: it faults the weights in and sizes the scratch.
Result<BenchResult> RunBenchTest(const Model& model, const BenchTest& test, int n_threads);

// Aggregate decode throughput through the serving engine (engine/engine.h): `concurrency`
// requests, each a 1-token random prompt generating n_gen tokens greedily (end tokens ignored),
// submitted at once; tokens/s = all generated tokens / wall time from the first Submit to the last
// finish. The engine runs its own n_threads workers; one engine per repeat, after a warm-up one.
struct ConcurrentTest {
  int concurrency = 1;
  int n_gen = 128;
  int repeats = 5;
  // Threads, KV type, block size, KV memory, token budget, prefix caching; n_ctx and max_num_seqs
  // are set per test (n_gen + 1 and concurrency).
  EngineOptions engine;
  uint64_t seed = 1;

  std::string Name() const;  // "tg128 x4"
};
Result<BenchResult> RunConcurrentDecode(const Model& model, const Tokenizer& tokenizer,
                                        const ConcurrentTest& test);

// The cache comparison at one length: `length` tokens generated greedily (ignoring end tokens)
// from `prompt`, once with the KV cache and once recomputing everything per step.
struct CacheCompareRow {
  int length = 0;
  double cached_s = 0;    // prefill + decode, with the cache
  double uncached_s = 0;  // the same without it
  bool same_tokens = false;
  double Ratio() const { return cached_s > 0 ? uncached_s / cached_s : 0; }
  double SavedFraction() const { return uncached_s > 0 ? 1.0 - cached_s / uncached_s : 0; }
};
Result<CacheCompareRow> CompareCache(const Model& model, const Tokenizer& tokenizer,
                                     std::span<const int32_t> prompt, int length,
                                     const KvFormat& kv_type, int n_threads);

// Encoder-decoder models: the time a shared encoder input saves through the engine (prefix
// caching on, which finds an input's encoding by its tokens). n_requests greedy requests of n_gen
// tokens each (end tokens ignored), submitted at once: once all with one random input of n_input
// tokens, once each with its own; seconds from the first Submit to the last finish, the median of
// `repeats` alternating runs of each (one engine per run, after a warm-up one).
struct SharedInputTest {
  int n_requests = 16;
  int n_input = 0;
  int n_gen = 8;
  int repeats = 3;
  KvFormat kv_type = KvType::kF32;
  int n_threads = 0;
  uint64_t seed = 1;  // of the random input token ids
};
struct SharedInputRow {
  SharedInputTest test;
  double same_s = 0;       // median seconds, every request with the same input
  double different_s = 0;  // median seconds, each with its own
  double Ratio() const { return same_s > 0 ? different_s / same_s : 0; }
};
Result<SharedInputRow> CompareSharedInput(const Model& model, const Tokenizer& tokenizer,
                                          const SharedInputTest& test);

}  // namespace kvserve
