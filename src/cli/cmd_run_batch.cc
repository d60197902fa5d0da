// `kvserve run --batch-file requests.jsonl`: every line is a request; all are submitted at once
// through the serving engine and each result is printed as one JSON line, in file order.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/run_batch.h"
#include "engine/completion.h"
#include "engine/engine.h"
#include "tokenizer/tokenizer.h"

namespace kvserve {

namespace {

using nlohmann::json;

// Reads one request line; errors name the line and the field.
Result<Request> ParseRequestLine(const std::string& line, int line_number, const Tokenizer& tok) {
  const std::string where = "line " + std::to_string(line_number) + ": ";
  json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Result<Request>::InvalidArgument(where + "not a JSON object");
  }
  Request r;
  try {
    if (j.contains("id")) r.id = j["id"].is_string() ? j["id"].get<std::string>() : j["id"].dump();
    if (j.contains("prompt_tokens")) {
      r.prompt = j["prompt_tokens"].get<std::vector<int32_t>>();
    } else if (j.contains("prompt")) {
      r.prompt = tok.Encode(j["prompt"].get<std::string>(), true, false);
    } else {
      return Result<Request>::InvalidArgument(where + "needs \"prompt\" or \"prompt_tokens\"");
    }
    r.max_tokens = j.value("max_tokens", 16);
    SamplingParams& s = r.sampling;
    s.temperature = j.value("temperature", 0.8f);
    s.top_k = j.value("top_k", 0);
    s.top_p = j.value("top_p", 1.0f);
    s.min_p = j.value("min_p", 0.0f);
    s.repetition_penalty = j.value("repetition_penalty", 1.0f);
    s.presence_penalty = j.value("presence_penalty", 0.0f);
    s.frequency_penalty = j.value("frequency_penalty", 0.0f);
    s.seed = j.value("seed", uint64_t{0xC0FFEE});
    r.ignore_eos = j.value("ignore_eos", false);
    r.cache_salt = j.value("cache_salt", std::string());
    r.speculative = j.value("speculative", true);
    if (j.contains("context_overflow")) {
      const auto policy = ContextOverflowNamed(j["context_overflow"].get<std::string>());
      if (!policy) {
        return Result<Request>::InvalidArgument(where +
                                                "\"context_overflow\" must be \"error\" or "
                                                "\"shift\"");
      }
      r.context_overflow = *policy;
    }
    r.pinned_prefix_tokens = j.value("pinned_prefix_tokens", 0);
    if (j.contains("stop")) {
      r.stop = j["stop"].is_string() ? std::vector<std::string>{j["stop"].get<std::string>()}
                                     : j["stop"].get<std::vector<std::string>>();
    }
  } catch (const json::exception& e) {
    return Result<Request>::InvalidArgument(where + "bad field: " + e.what());
  }
  return r;
}

}  // namespace

int RunBatchFile(const Args& args, const ModelOptions& model_options, const Model& model) {
  auto fail = [](const std::string& message, int code) {
    std::fprintf(stderr, "kvserve run: %s\n", message.c_str());
    return code;
  };
  auto tokenizer = Tokenizer::FromGguf(model.file());
  if (!tokenizer.ok()) return fail(tokenizer.message(), 1);
  auto engine_options = ReadEngineOptions(args, model_options);
  if (!engine_options.ok()) return fail(engine_options.message(), 2);
  const std::string path = *args.Get("--batch-file");
  std::ifstream in(path);
  if (!in) return fail("cannot open batch file '" + path + "'", 1);
  std::vector<Request> requests;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto request = ParseRequestLine(line, number, **tokenizer);
    if (!request.ok()) return fail(path + ": " + request.message(), 1);
    if (request->id.empty()) request->id = "line-" + std::to_string(number);
    requests.push_back(std::move(request).value());
  }
  auto draft = OpenDraftModel(args, engine_options->spec);
  if (!draft.ok()) return fail(draft.message(), 1);
  auto engine = Engine::Create(model, **tokenizer, *engine_options);
  if (!engine.ok()) return fail(engine.message(), 1);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const Request& r : requests) {
    auto stream = (*engine)->Submit(r);
    if (!stream.ok()) return fail("request '" + r.id + "': " + stream.message(), 1);
    streams.push_back(*stream);
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    auto done = Complete(*streams[i], start);
    if (!done.ok()) return fail("request '" + requests[i].id + "': " + done.message(), 1);
    json out = {{"id", requests[i].id},
                {"prompt_tokens", requests[i].prompt},
                {"tokens", done->tokens},
                {"text", done->text},
                {"finish_reason", FinishReasonName(done->finish_reason)},
                {"cached_tokens", done->usage.cached_tokens},
                {"timings",
                 {{"prompt_ms", done->prompt_ms},
                  {"decode_ms", done->decode_ms},
                  {"prompt_tokens_per_s", done->prompt_tokens_per_s()},
                  {"decode_tokens_per_s", done->decode_tokens_per_s()}}}};
    if (done->usage.dropped_tokens > 0) {
      out["truncated"] = true;
      out["dropped_tokens"] = done->usage.dropped_tokens;
    }
    if (engine_options->spec.enabled()) {
      out["drafted_tokens"] = done->usage.drafted_tokens;
      out["accepted_tokens"] = done->usage.accepted_tokens;
    }
    std::printf("%s\n", out.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
  }
  return 0;
}

}  // namespace kvserve
