// `kvserve bench --structured SCHEMA`: what constrained decoding costs on this model and machine.
// For a JSON Schema (`tool`: a typical tool call's arguments; `person`: a nested record; or a
// file), it times compiling (parse, grammar, the vocabulary's first mask; a fresh cache each
// time), then decodes a chat answer without and with the schema, alternating, greedy and seeded:
// the constrained side once with a cold mask cache (the schema's first request) and once warm.
// The mask's cost per token is the engine's own account (EngineStats::grammar_mask_ms), put
// beside the plain decode step.
#pragma once

#include <string>
#include <vector>

#include "engine/engine.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "util/status.h"

namespace kvserve {

struct GrammarBenchOptions {
  EngineOptions engine;
  std::string schema = "tool";  // tool, person, or a JSON Schema file
  int n_gen = 128;              // tokens per answer at most
  int repeats = 3;              // rounds; the best rates and the median compile time are kept
  std::vector<std::string> samplings = {"greedy", "seeded"};
  std::string format = "md";  // md or json
};

struct GrammarBenchRow {
  std::string schema;
  std::string sampling;
  double vocab_ms = 0;    // building the grammar vocabulary (once per model)
  double compile_ms = 0;  // median over the rounds
  double plain_tokens_per_s = 0;
  double cold_tokens_per_s = 0;  // constrained, the schema's first request
  double warm_tokens_per_s = 0;  // constrained, the masks cached
  double cold_mask_ms = 0;       // per token
  double warm_mask_ms = 0;       // per token
  int constrained_tokens = 0;    // of the last warm answer
  // The warm mask's cost as a fraction of the plain decode step.
  double warm_fraction() const {
    return plain_tokens_per_s > 0 ? warm_mask_ms * plain_tokens_per_s / 1000.0 : 0;
  }
};

Result<std::vector<GrammarBenchRow>> RunGrammarBench(const Model& model, const Tokenizer& tokenizer,
                                                     const GrammarBenchOptions& options);

std::string FormatGrammarBench(const std::vector<GrammarBenchRow>& rows, const std::string& format);

}  // namespace kvserve
