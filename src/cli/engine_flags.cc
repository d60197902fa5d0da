#include "cli/engine_flags.h"

#include "cli/cli_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>

namespace kvserve {

FlagGroup EngineFlags(double max_step_ms, double max_step_decodes) {
  char shown[32];
  std::snprintf(shown, sizeof shown, "%g", max_step_ms);
  char shown_decodes[32];
  std::snprintf(shown_decodes, sizeof shown_decodes, "%g", max_step_decodes);
  return {"engine",
          {{.name = "--kv-memory",
            .value_name = "SIZE",
            .default_text = "room for --max-num-seqs full contexts",
            .help = "KV pool: 2GiB, 512MiB, 1GB, bytes, or a fraction of free memory like 0.5"},
           {.name = "--block-size",
            .value_name = "TOKENS",
            .default_text = "16",
            .help = "tokens per KV block"},
           {.name = "--max-num-seqs",
            .value_name = "N",
            .default_text = "16",
            .help = "sequences running at once"},
           {.name = "--max-batched-tokens",
            .value_name = "TOKENS",
            .default_text = "512",
            .help = "tokens per engine step, decode tokens and prefill chunks together"},
           {.name = "--max-step-ms",
            .value_name = "MS",
            .default_text = shown,
            .help = "per-step time target while streams decode: prefill chunks are sized from "
                    "the measured step cost to stay under it, so a long prompt does not stall "
                    "running streams (at least 16 prompt tokens a step); 0 = off"},
           {.name = "--max-step-decodes",
            .value_name = "N",
            .default_text = shown_decodes,
            .help = "with --max-step-ms, a step while streams decode also takes at most N "
                    "decode-only steps (a small model's prompts then stall its streams for a few "
                    "of their own steps); 0 = --max-step-ms alone"},
           {.name = "--no-prefix-cache",
            .help = "do not share the KV blocks of a common prompt prefix between requests"}}};
}

FlagGroup KvDiskFlags() {
  return {"KV disk tier (docs/kv-cache.md)",
          {{.name = "--kv-disk",
            .value_name = "DIR",
            .help = "keep KV blocks that leave memory (and, at exit, those still there) in DIR; "
                    "a later prompt with that prefix, or a restarted server, reads them back"},
           {.name = "--kv-disk-size",
            .value_name = "SIZE",
            .default_text = "1GiB",
            .help = "DIR's size limit, like 512MiB or 2GiB (least recently used files go)"}}};
}

Status ReadKvDiskOptions(const Args& args, EngineOptions& o) {
  const std::string dir = args.GetOr("--kv-disk", "");
  const auto size_text = args.Get("--kv-disk-size");
  if (dir.empty()) {
    if (size_text) return Status::InvalidArgument("flag --kv-disk-size needs --kv-disk DIR");
    return Status::Ok();
  }
  o.kv_disk_dir = dir;
  if (size_text) {
    if (size_text->find_first_not_of("0123456789.") == std::string::npos &&
        std::stod("0" + *size_text) < 1) {
      return Status::InvalidArgument("flag --kv-disk-size: '" + *size_text +
                                     "' must be a size like 512MiB or 2GiB");
    }
    auto size = ParseSize("--kv-disk-size", *size_text);
    if (!size.ok()) return size.status();
    o.kv_disk_bytes = *size;
  }
  return Status::Ok();
}

FlagGroup ContextOverflowFlags(const char* fallback) {
  return {"context overflow (docs/kv-cache.md#context-overflow)",
          {{.name = "--context-overflow",
            .value_name = "POLICY",
            .default_text = fallback,
            .help = "error: refuse what cannot fit, stop at the context; shift: keep the sink "
                    "tokens, drop the oldest tokens after them and go on"},
           {.name = "--sink-tokens",
            .value_name = "N",
            .default_text = "4",
            .help = "shift: leading tokens always kept (rounded up to whole KV blocks)"}}};
}

Status ReadContextOverflowOptions(const Args& args, EngineOptions& o, ContextOverflow fallback) {
  o.context_overflow = fallback;
  if (auto text = args.Get("--context-overflow")) {
    auto policy = ContextOverflowNamed(*text);
    if (!policy) {
      return Status::InvalidArgument("flag --context-overflow: '" + *text +
                                     "' is not one of error, shift");
    }
    o.context_overflow = *policy;
  }
  auto sinks = args.GetInt("--sink-tokens", 4);
  if (!sinks.ok()) return sinks.status();
  if (*sinks < 0 || *sinks > (1 << 20)) {
    return Status::InvalidArgument("flag --sink-tokens: " + std::to_string(*sinks) +
                                   " is out of range (0 to 1048576)");
  }
  o.sink_tokens = static_cast<int>(*sinks);
  return Status::Ok();
}

FlagGroup SpecFlags(const char* default_method) {
  return {"speculative decoding (never changes a token)",
          {{.name = "--spec",
            .value_name = "METHOD",
            .default_text = default_method,
            .help = "none, ngram (prompt lookup), draft (--model-draft), history (what earlier "
                    "requests of the same tenant read or produced) or ngram+history"},
           {.name = "--spec-max",
            .value_name = "N",
            .default_text = "5",
            .help = "drafted tokens per sequence and step at most (the adaptive depth's ceiling)"},
           {.name = "--spec-min",
            .value_name = "N",
            .default_text = "1",
            .help = "shorter drafts are not verified (the depth's floor)"},
           {.name = "--spec-ngram-min",
            .value_name = "N",
            .default_text = "1",
            .help = "ngram: shortest suffix looked up in the sequence's own tokens"},
           {.name = "--spec-ngram-max",
            .value_name = "N",
            .default_text = "3",
            .help = "ngram: longest suffix looked up (tried first); history: the n-gram matched"},
           {.name = "--spec-history-tokens",
            .value_name = "N",
            .default_text = "1048576",
            .help = "history: tokens kept over all tenants (the oldest requests' leave first)"},
           {.name = "--spec-batch-tokens",
            .value_name = "N",
            .default_text = "16",
            .help = "back-off: with n live sequences each drafts at most (N - n) / n tokens"},
           {.name = "--spec-gate",
            .value_name = "MODE",
            .default_text = "cost",
            .help = "cost: verify only drafts whose expected accepted tokens pay for their "
                    "measured cost; off: every proposed draft"},
           {.name = "--model-draft",
            .value_name = "FILE",
            .help = "draft: the GGUF of a smaller model with the same vocabulary"}}};
}

uint64_t AvailableMemoryBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  uint64_t value = 0;
  while (meminfo >> key >> value >> unit) {
    if (key == "MemAvailable:") return value * 1024;
  }
  return 0;
}

EngineOptions SingleStreamEngineOptions(const ModelOptions& model, int block_size, bool recompute) {
  return EngineOptions{.n_threads = model.n_threads,
                       .n_ctx = model.n_ctx,
                       .kv_type = model.kv_type,
                       .block_size = block_size,
                       .max_num_seqs = 1,
                       .max_batched_tokens = model.n_ctx,
                       .recompute = recompute};
}

Result<uint64_t> ParseSize(const std::string& flag, const std::string& text) {
  auto bad = [&](const std::string& why) {
    return Result<uint64_t>::InvalidArgument("flag " + flag + ": '" + text + "' " + why);
  };
  size_t used = 0;
  double number = 0;
  try {
    number = std::stod(text, &used);
  } catch (const std::exception&) {
    return bad("is not a size (like 2GiB, 512MiB, 1000000, or 0.5 of free memory)");
  }
  const std::string unit = text.substr(used);
  if (!std::isfinite(number) || number <= 0) return bad("must be positive");
  if (unit.empty() && number < 1) {
    const uint64_t available = AvailableMemoryBytes();
    if (available == 0) return bad("is a fraction, but /proc/meminfo has no MemAvailable");
    return static_cast<uint64_t>(number * static_cast<double>(available));
  }
  struct Unit {
    const char* name;
    double scale;
  };
  static const Unit kUnits[] = {{"", 1},          {"B", 1},       {"KiB", 1024.0}, {"MiB", 1 << 20},
                                {"GiB", 1 << 30}, {"KB", 1e3},    {"MB", 1e6},     {"GB", 1e9},
                                {"K", 1024.0},    {"M", 1 << 20}, {"G", 1 << 30}};
  for (const Unit& u : kUnits) {
    if (unit != u.name) continue;
    const double bytes = number * u.scale;
    if (bytes >= static_cast<double>(std::numeric_limits<uint64_t>::max()))
      return bad("is too large");
    return static_cast<uint64_t>(bytes);
  }
  return bad("has an unknown unit '" + unit + "' (use B, KiB, MiB, GiB, KB, MB, GB)");
}

namespace {
Status ReadBounded(const Args& args, const std::string& flag, int64_t fallback, int64_t lo,
                   int64_t hi, int* out) {
  auto value = args.GetInt(flag, fallback);
  if (!value.ok()) return value.status();
  if (*value < lo || *value > hi) {
    return Status::InvalidArgument("flag " + flag + ": " + std::to_string(*value) +
                                   " is out of range (" + std::to_string(lo) + " to " +
                                   std::to_string(hi) + ")");
  }
  *out = static_cast<int>(*value);
  return Status::Ok();
}

// A number flag in [0, hi]; `range` is how the error writes the range ("0 to 10000000 ms").
Status ReadNonNegative(const Args& args, const std::string& flag, double fallback, double hi,
                       const std::string& range, double* out) {
  auto value = args.GetDouble(flag, fallback);
  if (!value.ok()) return value.status();
  if (!(*value >= 0) || *value > hi) {
    return Status::InvalidArgument("flag " + flag + ": '" + *args.Get(flag) +
                                   "' is out of range (" + range + ")");
  }
  *out = *value;
  return Status::Ok();
}
}  // namespace

Status ReadSpecOptions(const Args& args, SpecOptions& spec, const std::string& default_method) {
  const std::string method = args.GetOr("--spec", default_method);
  bool known = false;
  for (SpecMethod m : {SpecMethod::kNone, SpecMethod::kNgram, SpecMethod::kDraft,
                       SpecMethod::kHistory, SpecMethod::kNgramHistory, SpecMethod::kMtp}) {
    if (method == SpecMethodName(m)) {
      spec.method = m;
      known = true;
    }
  }
  if (!known) {
    return Status::InvalidArgument(
        "flag --spec: '" + method +
        "' is not one of none, ngram, draft, history, ngram+history, mtp");
  }
  KVSERVE_RETURN_IF_ERROR(ReadBounded(args, "--spec-max", 5, 1, 64, &spec.max_tokens));
  KVSERVE_RETURN_IF_ERROR(ReadBounded(args, "--spec-min", 1, 0, spec.max_tokens, &spec.min_tokens));
  KVSERVE_RETURN_IF_ERROR(ReadBounded(args, "--spec-ngram-min", 1, 1, 64, &spec.ngram_min));
  KVSERVE_RETURN_IF_ERROR(ReadBounded(args, "--spec-ngram-max", std::max(3, spec.ngram_min),
                                      spec.ngram_min, 64, &spec.ngram_max));
  KVSERVE_RETURN_IF_ERROR(
      ReadBounded(args, "--spec-batch-tokens", 16, 1, 1 << 20, &spec.batch_tokens));
  int history_tokens = 0;
  KVSERVE_RETURN_IF_ERROR(
      ReadBounded(args, "--spec-history-tokens", 1 << 20, 0, 1 << 30, &history_tokens));
  spec.history_tokens = static_cast<size_t>(history_tokens);
  const std::string gate = args.GetOr("--spec-gate", "cost");
  if (gate != "cost" && gate != "off")
    return Status::InvalidArgument("flag --spec-gate: '" + gate + "' is not one of cost, off");
  spec.cost_gate = gate == "cost";
  const std::string draft_path = args.GetOr("--model-draft", "");
  if (spec.method == SpecMethod::kDraft && draft_path.empty())
    return Status::InvalidArgument("flag --spec draft needs --model-draft FILE");
  if (spec.method != SpecMethod::kDraft && !draft_path.empty())
    return Status::InvalidArgument("flag --model-draft is used only with --spec draft");
  return Status::Ok();
}

Result<std::unique_ptr<Model>> OpenDraftModel(const Args& args, SpecOptions& spec) {
  if (spec.method != SpecMethod::kDraft) return std::unique_ptr<Model>();
  auto backend = CliBackend(args);
  if (!backend.ok()) return backend.status();
  auto model = LoadModel(args.GetOr("--model-draft", ""), **backend);
  if (!model.ok()) return Status::InvalidArgument("flag --model-draft: " + model.message());
  spec.draft_model = model->get();
  return model;
}

Result<EngineOptions> ReadEngineOptions(const Args& args, const ModelOptions& model,
                                        double max_step_ms_default, double max_step_decodes_default,
                                        const std::string& spec_default) {
  EngineOptions o;
  o.n_threads = model.n_threads;
  o.n_ctx = model.n_ctx;
  o.kv_type = model.kv_type;
  KVSERVE_RETURN_IF_ERROR(ReadBounded(args, "--block-size", 16, 1, 1024, &o.block_size));
  KVSERVE_RETURN_IF_ERROR(ReadBounded(args, "--max-num-seqs", 16, 1, 4096, &o.max_num_seqs));
  KVSERVE_RETURN_IF_ERROR(
      ReadBounded(args, "--max-batched-tokens", 512, 1, 1 << 20, &o.max_batched_tokens));
  KVSERVE_RETURN_IF_ERROR(ReadNonNegative(args, "--max-step-ms", max_step_ms_default, 1e7,
                                          "0 to 10000000 ms", &o.max_step_ms));
  KVSERVE_RETURN_IF_ERROR(ReadNonNegative(args, "--max-step-decodes", max_step_decodes_default, 1e6,
                                          "0 to 1000000", &o.max_step_decodes));
  o.prefix_caching = !args.Has("--no-prefix-cache");
  if (auto text = args.Get("--kv-memory")) {
    auto size = ParseSize("--kv-memory", *text);
    if (!size.ok()) return size.status();
    o.kv_memory_bytes = *size;
  }
  KVSERVE_RETURN_IF_ERROR(ReadSpecOptions(args, o.spec, spec_default));
  KVSERVE_RETURN_IF_ERROR(ReadKvDiskOptions(args, o));
  KVSERVE_RETURN_IF_ERROR(ReadContextOverflowOptions(args, o));
  return o;
}

}  // namespace kvserve
