// Flags that configure the serving engine, shared by `run --batch-file`, `bench --concurrency`
// and `serve`: --kv-memory, --block-size, --max-num-seqs, --max-batched-tokens,
// --max-step-ms, --max-step-decodes, --no-prefix-cache (and the model flags' -t, -c, --kv-type);
// and speculative decoding's (SpecFlags, also for plain `run` and `bench`): --spec, --spec-max,
// --spec-min,
// --spec-ngram-min, --spec-ngram-max, --spec-batch-tokens, --model-draft.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "cli/args.h"
#include "cli/model_options.h"
#include "engine/engine.h"
#include "util/status.h"

namespace kvserve {

// `serve`'s default per-step time target (docs/benchmarks.md, "Latency under load"): streams
// keep their pace while prompts arrive. `run`, batch files and `bench` default to off (0).
inline constexpr double kServeMaxStepMs = 500;
// ... and at most this many decode-only steps, which on small fast models is far less than
// kServeMaxStepMs (docs/benchmarks.md, "Real models against llama.cpp").
inline constexpr double kServeMaxStepDecodes = 3;
// `serve`'s default --spec: prompt lookup, which with the cost gate was never slower beyond noise
// on the control tasks and drafts nothing at 16 streams (docs/speculative.md, "Defaults"). `run`,
// batch files and `bench` default to none.
inline constexpr const char* kServeSpec = "ngram";
// max_step_ms, max_step_decodes: --max-step-ms's and --max-step-decodes' defaults for the command
// (serve: kServeMaxStepMs and kServeMaxStepDecodes; others: off).
FlagGroup EngineFlags(double max_step_ms = 0, double max_step_decodes = 0);
// default_method: --spec's default for the command (serve: kServeSpec; others: none).
FlagGroup SpecFlags(const char* default_method = "none");
// --kv-disk DIR, --kv-disk-size SIZE (`run` and `serve`; ReadEngineOptions reads them too).
FlagGroup KvDiskFlags();
Status ReadKvDiskOptions(const Args& args, EngineOptions& options);
// --context-overflow error|shift, --sink-tokens N (`run`, `chat`, `serve`, batch files;
// ReadEngineOptions reads them too). `fallback` is the policy when the flag is absent.
FlagGroup ContextOverflowFlags(const char* fallback = "error");
Status ReadContextOverflowOptions(const Args& args, EngineOptions& options,
                                  ContextOverflow fallback = ContextOverflow::kError);
// Reads the --spec flags (draft_model left null; ReadEngineOptions calls it too).
Status ReadSpecOptions(const Args& args, SpecOptions& spec,
                       const std::string& default_method = "none");
// With --spec draft: loads --model-draft (on the CLI backend) and points spec.draft_model at it;
// the returned model must outlive the engine. Null (and no error) for the other methods.
Result<std::unique_ptr<Model>> OpenDraftModel(const Args& args, SpecOptions& spec);
// Reads the engine flags; threads, context and KV type come from the resolved model options.
// max_step_ms, max_step_decodes, spec: the values without --max-step-ms, --max-step-decodes and
// --spec (the ones EngineFlags and SpecFlags showed).
Result<EngineOptions> ReadEngineOptions(const Args& args, const ModelOptions& model,
                                        double max_step_ms = 0, double max_step_decodes = 0,
                                        const std::string& spec = "none");

// One sequence at a time, prefilled in one pass (max_batched_tokens = the context): the engine
// behind `run` and `chat`. block_size 1 makes prefix reuse token-exact (chat); `recompute` is
// --no-cache.
EngineOptions SingleStreamEngineOptions(const ModelOptions& model, int block_size, bool recompute);

// "2GiB", "512MiB", "1.5GB", "100000" (bytes), or a fraction of available memory like "0.5".
Result<uint64_t> ParseSize(const std::string& flag, const std::string& text);
// Bytes of MemAvailable in /proc/meminfo, 0 when unknown.
uint64_t AvailableMemoryBytes();

}  // namespace kvserve
