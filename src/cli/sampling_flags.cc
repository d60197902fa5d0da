#include "cli/sampling_flags.h"

namespace kvserve {

FlagGroup SamplingFlags() {
  return {"sampling",
          {{.name = "--temp",
            .value_name = "T",
            .default_text = "0.8",
            .help = "temperature; 0 always picks the most likely token"},
           {.name = "--seed", .value_name = "N", .default_text = "12648430", .help = "random seed"},
           {.name = "--top-k",
            .value_name = "K",
            .default_text = "0, off",
            .help = "sample from the K most likely tokens only"},
           {.name = "--top-p",
            .value_name = "P",
            .default_text = "1, off",
            .help = "sample from the most likely tokens whose probabilities add up to P"},
           {.name = "--min-p",
            .value_name = "P",
            .default_text = "0, off",
            .help = "drop tokens less likely than P times the most likely one"},
           {.name = "--repeat-penalty",
            .value_name = "R",
            .default_text = "1, off",
            .help = "divide the positive logits of tokens already in the sequence by R"}}};
}

Result<SamplingParams> ReadSamplingParams(const Args& args) {
  auto seed = args.GetInt("--seed", 0xC0FFEE);
  auto top_k = args.GetInt("--top-k", 0);
  auto temp = args.GetDouble("--temp", 0.8);
  auto top_p = args.GetDouble("--top-p", 1.0);
  auto min_p = args.GetDouble("--min-p", 0.0);
  auto repeat = args.GetDouble("--repeat-penalty", 1.0);
  for (const Status& s : {seed.status(), top_k.status(), temp.status(), top_p.status(),
                          min_p.status(), repeat.status()}) {
    if (!s.ok()) return s;
  }
  SamplingParams s;
  s.temperature = static_cast<float>(*temp);
  s.top_k = static_cast<int>(*top_k);
  s.top_p = static_cast<float>(*top_p);
  s.min_p = static_cast<float>(*min_p);
  s.repetition_penalty = static_cast<float>(*repeat);
  s.seed = static_cast<uint64_t>(*seed);
  return s;
}

}  // namespace kvserve
