#include "cli/engine_flags.h"

#include <cmath>
#include <fstream>
#include <limits>

namespace kvserve {

FlagGroup EngineFlags() {
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
           {.name = "--no-prefix-cache",
            .help = "do not share the KV blocks of a common prompt prefix between requests"}}};
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
}  // namespace

Result<EngineOptions> ReadEngineOptions(const Args& args, const ModelOptions& model) {
  EngineOptions o;
  o.n_threads = model.n_threads;
  o.n_ctx = model.n_ctx;
  o.kv_type = model.kv_type;
  KVSERVE_RETURN_IF_ERROR(ReadBounded(args, "--block-size", 16, 1, 1024, &o.block_size));
  KVSERVE_RETURN_IF_ERROR(ReadBounded(args, "--max-num-seqs", 16, 1, 4096, &o.max_num_seqs));
  KVSERVE_RETURN_IF_ERROR(
      ReadBounded(args, "--max-batched-tokens", 512, 1, 1 << 20, &o.max_batched_tokens));
  o.prefix_caching = !args.Has("--no-prefix-cache");
  if (auto text = args.Get("--kv-memory")) {
    auto size = ParseSize("--kv-memory", *text);
    if (!size.ok()) return size.status();
    o.kv_memory_bytes = *size;
  }
  return o;
}

}  // namespace kvserve
